"""The app of the authority tests: `reactor serve --app tests.service.authorized:make_service`.

Reaction agents that suggest, each with its own ``Approval``: ``enrich`` (``Person``,
the default: one approver, not the one who made the change), ``pair`` (``Deal``: two
approvers), ``fleeting`` (``Quote``: a suggestion expires after ``FLEETING`` seconds,
``REACTOR_TEST_FLEETING``), ``dans`` (``Note``: decided by ``user:dan`` alone, who may
also approve his own; justified always). Graphs ``relay`` (waits for ``go``) and
``approval`` (asks a question) to drive runs.
"""

from __future__ import annotations

import os
from typing import Any

from reactor import AgentContext, agent
from reactor.service import (
    Approval,
    Changes,
    ObjectStore,
    Reaction,
    ReactionService,
    Update,
)
from tests.service.served import GRAPHS
from tests.service.support import TYPES


def _note(field: str, value: str) -> Any:
    def suggest(ctx: AgentContext[Any]) -> Changes:
        return Changes(
            reasoning=f"set {field}", operations=(Update(ctx.object.id, {field: value}),)
        )

    return suggest


def _reacting(type: str, field: str, value: str, approval: Approval) -> Any:
    return agent(
        run=_note(field, value),
        output=Changes,
        reaction=Reaction(types=[type], events=["created"]),
        execution_mode="suggest",
        approval=approval,
    )


AGENTS = {
    "enrich": _reacting("Person", "employer", "Acme", Approval()),
    "pair": _reacting("Deal", "checked", "yes", Approval(count=2)),
    "fleeting": _reacting(
        "Quote",
        "seen",
        "yes",
        Approval(expires_after=float(os.environ.get("REACTOR_TEST_FLEETING", "3600"))),
    ),
    "dans": _reacting(
        "Note",
        "read",
        "yes",
        Approval(by=["user:dan"], distinct_from_proposer=False, justification="always"),
    ),
}


def make_service(url: str) -> ReactionService:
    """The served service, on the database at ``url``."""
    return ReactionService(
        objects=ObjectStore(url, types=TYPES),
        agents=AGENTS,
        graphs={"relay": GRAPHS["relay"], "approval": GRAPHS["approval"]},
    )

"""Rejecting many suggestions at once: each decided and recorded as one rejection is.

A desk whose agent fell behind has thousands of pending suggestions nobody will
approve; :func:`reject_many` rejects those named (``ids``) or those a filter finds
(pending, of an agent, about an object), at most :data:`MAX_BULK` a call. Each is
decided as :func:`~reactor.service._reactions.resolve.reject` decides one: its agent's
``Approval`` must let the decider decide, and a justification it requires must be
given; each rejected one has its ``suggestion:decided`` line in the processing log's
history (written in the one transaction that rejects them all), in the JSON log, and a
``suggestion:rejected`` signal. What cannot be rejected is refused, each with why (not
found, not the decider's to decide, a justification missing, already resolved), and
the others are rejected all the same.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

import pydantic

from reactor._agents.agent import Agent
from reactor._agents.reaction import Approval
from reactor._signals.door import check_text
from reactor._signals.names import SUGGESTION_REJECTED
from reactor._signals.payloads import SuggestionDecided
from reactor.exceptions import PayloadError, PermissionDeniedError, ServiceConfigError
from reactor.service._objects.changes import Suggestion
from reactor.service._objects.objects import ObjectStore
from reactor.service._objects.rows import MAX_PAGE
from reactor.service._objects.suggestions import Suggestions, resolved_error
from reactor.service._reactions.reaction import announce
from reactor.service._reactions.resolve import (
    Asked,
    Record,
    justified,
    log_line,
    may_decide,
    policy_of,
)

__all__ = ["MAX_BULK", "Refusal", "Rejected", "reject_many"]

MAX_BULK = 1000
"""The most suggestions one call rejects (a filter that finds more says ``more``)."""


class Refusal(pydantic.BaseModel):
    """A suggestion that was not rejected, and why."""

    id: str
    reason: str


class Rejected(pydantic.BaseModel):
    """What a bulk rejection did.

    Attributes:
        rejected: How many suggestions it rejected.
        ids: Their ids.
        refused: Those it did not reject, each with why.
        more: A filter found more pending suggestions than one call rejects
            (:data:`MAX_BULK`): call again for the next ones.
    """

    rejected: int
    ids: list[str]
    refused: list[Refusal]
    more: bool = False


async def reject_many(
    objects: ObjectStore,
    suggestions: Suggestions,
    agents: Mapping[str, Agent],
    asked: Asked,
    *,
    ids: Sequence[str] | None = None,
    agent: str | None = None,
    object_id: str | None = None,
) -> Rejected:
    """Reject the suggestions named by ``ids``, or the pending ones of a filter.

    Args:
        objects: The object store (its bus hears ``suggestion:rejected``).
        suggestions: The suggestions.
        agents: The agents, whose ``Approval`` says who may decide.
        asked: Who rejects, and their justification.
        ids: The suggestions to reject (at most :data:`MAX_BULK`).
        agent: Or: the pending suggestions of this agent...
        object_id: ...and/or about this object (the newest first, at most
            :data:`MAX_BULK`; with neither, every agent's pending suggestions).

    Raises:
        ServiceConfigError: Both ``ids`` and a filter, or too many ids (422).
        PayloadError: The justification is too long, or it, an id or a filter cannot be
            stored (422).
    """
    justification = justified(Approval(justification="never"), "reject", asked.justification)
    asked = Asked(asked.decider, justification=justification)
    for index, given in enumerate(ids or ()):
        check_text(given, f"ids[{index}]")
    for name, value in (("agent", agent), ("object_id", object_id)):
        if value is not None:
            check_text(value, name)
    if ids is not None:
        if agent is not None or object_id is not None:
            raise ServiceConfigError(
                "Name the suggestions to reject by ids, or by a filter (agent, object_id), "
                "not both."
            )
        if len(ids) > MAX_BULK:
            raise ServiceConfigError(
                f"At most {MAX_BULK:,} suggestions are rejected in one request, got "
                f"{len(ids):,} ids: send them in parts."
            )
        wanted = list(dict.fromkeys(ids))
        found, more = await suggestions.get_many(wanted), False
    else:
        listed, more = await _pending(suggestions, agent, object_id)
        wanted, found = [s.id for s in listed], {s.id: s for s in listed}
    refused = [Refusal(id=id, reason=_missing(id)) for id in wanted if id not in found]
    chosen, refusals = _decided(agents, [found[id] for id in wanted if id in found], asked)
    rejected = await suggestions.reject_many(
        [(s.id, line) for s, line in chosen], asked.decider.actor
    )
    done = {suggestion.id: suggestion for suggestion in rejected}
    late = await suggestions.get_many(s.id for s, _ in chosen if s.id not in done)
    refused += refusals + [Refusal(id=id, reason=str(resolved_error(s))) for id, s in late.items()]
    for suggestion, line in chosen:
        if suggestion.id in done:
            log_line(line)
            announce(objects, SUGGESTION_REJECTED, done[suggestion.id], asked.decider.actor)
    order = {id: index for index, id in enumerate(wanted)}
    return Rejected(
        rejected=len(done),
        ids=sorted(done, key=order.__getitem__),
        refused=sorted(refused, key=lambda refusal: order[refusal.id]),
        more=more,
    )


async def _pending(
    suggestions: Suggestions, agent: str | None, object_id: str | None
) -> tuple[list[Suggestion], bool]:
    """The newest pending suggestions of the filter (at most ``MAX_BULK``), and if more wait."""
    found: list[Suggestion] = []
    after: str | None = None
    while True:
        page = await suggestions.page(
            status="pending", agent=agent, object_id=object_id, after=after, limit=MAX_PAGE
        )
        found += page.items
        after = page.next
        if after is None or len(found) >= MAX_BULK:
            return found[:MAX_BULK], after is not None or len(found) > MAX_BULK


def _decided(
    agents: Mapping[str, Agent], found: Sequence[Suggestion], asked: Asked
) -> tuple[list[tuple[Suggestion, tuple[str, SuggestionDecided]]], list[Refusal]]:
    """Each pending suggestion the decider may reject, with its line; the others refused.

    Whether the decider may decide, and whether a justification is missing, is asked
    once per agent (so a refusal is logged once per agent, not once per suggestion).
    """
    now = datetime.now(UTC)
    verdicts: dict[str, str | None] = {}
    chosen: list[tuple[Suggestion, tuple[str, SuggestionDecided]]] = []
    refused: list[Refusal] = []
    for suggestion in found:
        if suggestion.status != "pending":
            refused.append(Refusal(id=suggestion.id, reason=str(resolved_error(suggestion))))
            continue
        policy = policy_of(agents, suggestion)
        if suggestion.agent not in verdicts:
            verdicts[suggestion.agent] = _verdict(policy, suggestion, asked)
        reason = verdicts[suggestion.agent]
        if reason is not None:
            refused.append(Refusal(id=suggestion.id, reason=reason))
            continue
        record = Record(
            suggestion,
            asked,
            "reject",
            suggestion.operations,
            policy.count,
            asked.justification,
            now,
        )
        chosen.append((suggestion, record.line(len(suggestion.approvals), "rejected")))
    return chosen, refused


def _verdict(policy: Approval, suggestion: Suggestion, asked: Asked) -> str | None:
    """Why the decider may not reject this agent's suggestions (``None``: they may)."""
    try:
        may_decide(policy, suggestion, asked.decider, approving=False)
        justified(policy, "reject", asked.justification)
    except (PermissionDeniedError, PayloadError) as refused:
        return str(refused)
    return None


def _missing(suggestion_id: str) -> str:
    return f"No suggestion {suggestion_id!r}."

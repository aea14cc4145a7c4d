"""The older code of the scale-out tests' app, for rolling deploys.

`reactor worker --app tests.service.rolling:make_old_service` is
:func:`tests.service.queued.make_service` as it was before it had the ``steps`` graph
and the ``orders`` reaction agent: it runs ``sleeper`` and ``tick`` only.
"""

from __future__ import annotations

from reactor import ScriptedProvider, agent, reactive
from reactor.service import Changes, ObjectStore, ReactionService


def make_old_service(db: str) -> ReactionService:
    return ReactionService(
        objects=ObjectStore(db),
        provider=ScriptedProvider(default=lambda request: Changes(reasoning=request.prompt)),
        graphs={
            "sleeper": reactive(
                {"sleep": agent(run=lambda ctx: 0.0, updates="woke")},
                state={"woke": None},
                name="sleeper",
            )
        },
        agents={"tick": agent(run=lambda ctx: "tick")},
    )

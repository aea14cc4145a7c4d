"""The service of the scale-out demo: a graph of two slow model calls, run on workers.

``reactor worker --app examples.scale_out.app:make_service`` executes its runs;
``python -m examples.scale_out`` starts two workers, submits runs and kills one.
"""

from __future__ import annotations

from reactor import ScriptedProvider, agent, reactive
from reactor.service import ObjectStore, ReactionService


def make_service(db: str) -> ReactionService:
    """The service on database ``db`` (the workers and the submitter share it)."""
    research = reactive(
        {
            "draft": agent(prompt="Draft a note on {{ input.topic }}", updates="draft"),
            "review": agent(
                prompt="Review: {{ state.draft }}",
                activate_on="state:draft:changed",
                updates="review",
            ),
        },
        state={"draft": None, "review": None},
        name="research",
    )
    provider = ScriptedProvider(default=lambda request: f"ok: {request.agent}", latency=1.0)
    return ReactionService(
        objects=ObjectStore(db), graphs={"research": research}, provider=provider
    )

"""Object types, agents and helpers shared by the service's tests."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import pydantic

from reactor import Agent, AgentContext, Provider
from reactor._signals.payloads import SuggestionDecided
from reactor.service import ObjectStore, ReactionService


class Person(pydantic.BaseModel):
    name: str
    email: str | None = None
    employer: str | None = None


class Company(pydantic.BaseModel):
    name: str
    domain: str | None = None


TYPES = (Person, Company)


@asynccontextmanager
async def running(
    url: str,
    agents: Mapping[str, Agent],
    *,
    provider: Provider | None = None,
    **options: Any,
) -> AsyncIterator[tuple[ObjectStore, ReactionService]]:
    """An object store on ``url`` and a running service with ``agents`` on it."""
    async with (
        ObjectStore(url, types=TYPES) as objects,
        ReactionService(objects=objects, agents=agents, provider=provider, **options) as service,
    ):
        yield objects, service


class Gate:
    """Holds handler agents until the test opens it; counts who went through."""

    def __init__(self) -> None:
        self.opened = asyncio.Event()
        self.waiting = asyncio.Event()
        self.seen: list[tuple[str, int]] = []

    async def __call__(self, ctx: AgentContext[Any]) -> None:
        self.seen.append((ctx.object.id, ctx.object.version))
        self.waiting.set()
        await self.opened.wait()

    def open(self) -> None:
        self.opened.set()


class Recorder:
    """A handler agent that notes what it was given: the object, the event, the actor."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def __call__(self, ctx: AgentContext[Any]) -> None:
        event = ctx.scope["event"]
        self.calls.append(
            {
                "agent": ctx.agent,
                "id": ctx.object.id,
                "type": ctx.object.type,
                "version": ctx.object.version,
                "event": event.event,
                "data": dict(ctx.object.data),
                "actor": ctx.object.actor,
            }
        )


def decided_line(n: int = 1) -> SuggestionDecided:
    """A history line of a suggestion ``sug_<n>`` rejected by alice (for history tests)."""
    return {
        "suggestion_id": f"sug_{n}",
        "proposed_by_run": {"run_id": None, "agent": "enrich"},
        "object_id": None,
        "object_version": None,
        "changes_sha256": "0" * 64,
        "principal": {"id": "alice", "roles": ["approver"], "authenticator": "tokens"},
        "decided_at": "2026-12-07T00:00:00+00:00",
        "decision": "reject",
        "outcome": "rejected",
        "justification": None,
        "force": False,
        "approvals": 0,
        "needed": 1,
        "diff": None,
        "actor": {"type": "user", "id": "alice"},
    }

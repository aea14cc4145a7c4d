"""Object types, agents and helpers shared by the service's tests."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import pydantic

from reactor import Agent, AgentContext, Provider
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

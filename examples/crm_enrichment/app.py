"""The CRM's object types and its two reaction agents.

* ``enrich`` (suggest mode): when a person is added, find their employer and propose
  a company and the person's ``employer``; a person approves or rejects it.
* ``dedup`` (execute mode, ``can_delete=False``): when a person is added whose email
  is already known, mark them ``duplicate_of`` the first; it tries to delete the
  duplicate, is refused (``capability:denied``), and leaves that to a person.
"""

from __future__ import annotations

import contextlib
from typing import Any

import pydantic

from reactor import AgentContext, agent
from reactor.service import Capabilities, CapabilityError, Changes, Reaction


class Person(pydantic.BaseModel):
    """A contact."""

    name: str
    email: str
    employer: str | None = None
    duplicate_of: str | None = None


class Company(pydantic.BaseModel):
    """An organisation people work for."""

    name: str
    domain: str


TYPES = (Person, Company)

ON_NEW_PEOPLE = Reaction(types=["Person"], events=["created"])

enrich = agent(
    system="You research contacts for a CRM. Propose only changes you are sure of.",
    prompt=(
        "Person {{ object.id }}: {{ object.data.name }} <{{ object.data.email }}>.\n"
        "Who employs them? Propose a Company (name, domain) and set the person's employer."
    ),
    output=Changes,
    reaction=ON_NEW_PEOPLE,
    execution_mode="suggest",
    capabilities=Capabilities(can_delete=False, allowed_types=["Person", "Company"]),
)


async def find_duplicate(ctx: AgentContext[Any]) -> None:
    """Mark a person whose email is already known; deleting them is for a person."""
    person = ctx.object
    for other in await ctx.objects.list("Person"):
        same = other.data["email"].lower() == person.data["email"].lower()
        if same and other.id != person.id and other.created_at < person.created_at:
            await ctx.objects.update(person.id, {"duplicate_of": other.id})
            with contextlib.suppress(CapabilityError):  # refused, logged, emitted: the mark stays
                await ctx.objects.delete(person.id)
            return


dedup = agent(
    run=find_duplicate,
    reaction=ON_NEW_PEOPLE,
    execution_mode="execute",
    capabilities=Capabilities(can_delete=False, allowed_types=["Person"]),
)

AGENTS = {"enrich": enrich, "dedup": dedup}

"""Run the CRM offline: ``python -m examples.crm_enrichment [--db URL]``.

Three people are added (one of them twice); ``dedup`` marks the duplicate, ``enrich``
suggests employers, and a manager approves the suggestions, except for the
duplicate's, which they reject. Every reaction is recorded in the database.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from pathlib import Path

from examples.crm_enrichment.app import AGENTS, TYPES
from examples.crm_enrichment.scripted import scripted_provider
from reactor.service import ObjectStore, ReactionService, User

PEOPLE = [
    ("Ada Lovelace", "ada@analytical-engines.org"),
    ("Grace Hopper", "grace@navy.mil"),
    ("Ada L.", "ADA@analytical-engines.org"),
]


async def crm(url: str) -> None:
    """Add the people, let the agents react, resolve the suggestions, print the result."""
    boss = User("manager")
    async with (
        ObjectStore(url, types=TYPES) as objects,
        ReactionService(objects=objects, agents=AGENTS, provider=scripted_provider()) as service,
    ):
        objects.bus.subscribe(
            "capability:denied", lambda s: print(f"refused: {s.payload['reason']}")
        )
        for name, email in PEOPLE:
            await objects.create("Person", {"name": name, "email": email}, actor=User("sales"))
            await service.idle(timeout=30)
        for entry in await service.processing_log():
            print(f"log: {entry.agent} {entry.event_type} v{entry.object_version} {entry.status}")
        for suggestion in reversed(await service.suggestions(status="pending")):
            assert suggestion.object_id is not None
            person = await objects.get(suggestion.object_id)
            if person.data["duplicate_of"]:
                await service.reject(suggestion.id, actor=boss)
            else:
                await service.approve(suggestion.id, actor=boss)
            print(
                f"suggestion {'rejected' if person.data['duplicate_of'] else 'approved'}: "
                f"{suggestion.reasoning}"
            )
        await service.idle(timeout=30)
        names = {p.id: p.data["name"] for p in await objects.list("Person")}
        for person in await objects.list("Person"):
            data = person.data
            original = data["duplicate_of"]
            mark = f", duplicate of {names[original]}" if original else ""
            print(f"person: {data['name']} at {data['employer']} (by {person.actor}{mark})")
        print(f"companies: {sorted(c.data['name'] for c in await objects.list('Company'))}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m examples.crm_enrichment", description=__doc__)
    parser.add_argument("--db", help="database URL (default: a new SQLite file)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        url = args.db or f"sqlite:///{Path(folder) / 'crm.db'}"
        asyncio.run(crm(url))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

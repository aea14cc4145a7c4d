"""The CRM example: enrichment suggested and approved, a duplicate marked, not deleted."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from examples.crm_enrichment.app import AGENTS, TYPES
from examples.crm_enrichment.scripted import scripted_provider
from reactor.service import AgentActor, ObjectStore, ReactionService, User


def test_the_example_runs_offline_and_prints_what_happened() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "examples.crm_enrichment"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "refused: it may not delete objects (can_delete=False)",
        *["log: enrich created v1 completed", "log: dedup created v1 completed"] * 3,
        "suggestion approved: Ada Lovelace writes from analytical-engines.org, the domain of "
        "Analytical Engines.",
        "suggestion approved: Grace Hopper writes from navy.mil, the domain of Navy.",
        "suggestion rejected: Ada L. writes from analytical-engines.org, the domain of "
        "Analytical Engines.",
        "person: Ada Lovelace at Analytical Engines (by agent:enrich)",
        "person: Grace Hopper at Navy (by agent:enrich)",
        "person: Ada L. at None (by agent:dedup, duplicate of Ada Lovelace)",
        "companies: ['Analytical Engines', 'Navy']",
    ]


async def test_enrichment_waits_for_approval_and_dedup_may_not_delete(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'crm.db'}"
    async with (
        ObjectStore(url, types=TYPES) as objects,
        ReactionService(objects=objects, agents=AGENTS, provider=scripted_provider()) as service,
    ):
        ada = await objects.create("Person", {"name": "Ada", "email": "ada@acme.io"})
        again = await objects.create("Person", {"name": "Ada", "email": "ada@acme.io"})
        await service.idle(timeout=60)
        assert (await objects.get(ada.id)).data["employer"] is None  # only suggested
        duplicate = await objects.get(again.id)
        assert (duplicate.data["duplicate_of"], duplicate.actor) == (ada.id, AgentActor("dedup"))
        suggestions = await service.suggestions(status="pending")
        assert len(suggestions) == 2
        first = next(s for s in suggestions if s.object_id == ada.id)
        await service.approve(first.id, actor=User("manager"))
        person = await objects.get(ada.id)
        assert (person.data["employer"], person.actor) == ("Acme", AgentActor("enrich"))
        assert [c.data for c in await objects.list("Company")] == [
            {"name": "Acme", "domain": "acme.io"}
        ]

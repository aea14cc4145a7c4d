"""Retention of the service's tables: the processing log, its history and the object events.

``REACTOR_RETENTION`` deletes what ended longer ago than it, never what is still needed,
and leaves the hash chains verifiable from an anchor.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa

from reactor import AgentContext, MemorySignalStore, agent
from reactor._recording.chain import Report
from reactor._signals.settings import database_location
from reactor.service import ObjectStore, Reaction, ReactionService
from reactor.service._hosting.retention import Retention, prune_tables
from reactor.service._objects.db import Database
from reactor.service._objects.history import History, verify_database
from reactor.service._objects.schema import (
    audit_chains,
    object_events,
    processing_history,
    processing_log,
)
from tests.service.support import TYPES, decided_line


def verified(url: str) -> Report:
    report = Report()
    verify_database(database_location(url), report, None)
    return report


async def rows(db: Database, query: Any) -> list[Any]:
    async with db.read() as conn:
        return list((await conn.execute(query)).all())


async def test_retention_deletes_what_ended_long_ago_and_the_chains_still_verify(url: str) -> None:
    def note(ctx: AgentContext[Any]) -> None:
        return None

    agents = {"note": agent(run=note, reaction=Reaction(types=["Person"]))}
    async with (
        ObjectStore(url, types=TYPES) as objects,
        ReactionService(objects=objects, agents=agents) as service,
    ):
        history = History(objects.db)
        for n in range(4):
            await objects.create("Person", {"name": f"p{n}"})
        await service.idle(timeout=60)
        for n in range(2):
            await history.add("suggestion:decided", decided_line(n))
        cutoff = datetime.now(UTC)  # what came before this ended "long ago"
        people = [await objects.create("Person", {"name": f"p{n}"}) for n in range(4, 6)]
        await service.idle(timeout=60)
        for n in range(2, 4):
            await history.add("suggestion:decided", decided_line(n))
        async with objects.db.write() as conn:  # an old event an entry still waits on
            await conn.execute(
                processing_log.update()
                .where(processing_log.c.event_id == 3)
                .values(status="pending", updated_at=datetime.now(UTC))
            )
        counts = await prune_tables(objects.db, before=cutoff)
        events = sorted(row.event_id for row in await rows(objects.db, sa.select(object_events)))
        entries = await rows(objects.db, sa.select(processing_log.c.event_id))
        lines = sorted(row.id for row in await rows(objects.db, sa.select(processing_history)))
        anchors = {
            row.table_name: row.pruned_through
            for row in await rows(objects.db, sa.select(audit_chains))
        }
        await objects.update(people[0].id, {"email": "p4@x.org"})  # written after the prune
        await history.add("suggestion:decided", decided_line(9))
    assert counts == {"processing_log": 3, "history": 2, "events": 2}
    assert events == [3, 4, 5, 6]  # 1-2 went; 3 is waited on, so 3 and what follows stay
    assert sorted(row.event_id for row in entries) == [3, 5, 6]  # 1, 2, 4 were done long ago
    assert lines == [3, 4]
    assert anchors == {"object_events": 2, "processing_history": 2}
    report = verified(url)
    assert report.broken is None, report.broken
    assert any("through id 2" in note for note in report.notes)


async def test_a_chain_pruned_whole_goes_on_from_its_anchor(url: str) -> None:
    async with ObjectStore(url, types=TYPES) as objects:
        ada = await objects.create("Person", {"name": "Ada"})
        await objects.update(ada.id, {"email": "ada@x.org"})
        await History(objects.db).add("suggestion:decided", decided_line(1))
        pruned = await prune_tables(objects.db, before=datetime.now(UTC))
    assert pruned == {"processing_log": 0, "history": 1, "events": 2}
    async with ObjectStore(url, types=TYPES) as objects:  # a new process: no head in memory
        await objects.update(ada.id, {"email": "lovelace@x.org"})
        await History(objects.db).add("suggestion:decided", decided_line(2))
    assert verified(url).broken is None


async def pruned_after_two(url: str) -> str:
    """Ada made and renamed three times; her first two events pruned. Her id."""
    async with ObjectStore(url, types=TYPES) as objects:
        ada = await objects.create("Person", {"name": "Ada"})
        await objects.update(ada.id, {"name": "A"})
        cutoff = datetime.now(UTC)
        for name in ("B", "C"):
            await objects.update(ada.id, {"name": name})
        await prune_tables(objects.db, before=cutoff)
    return ada.id


async def test_an_edit_of_what_is_kept_is_still_caught_after_a_prune(url: str) -> None:
    await pruned_after_two(url)
    async with ObjectStore(url, types=TYPES) as objects, objects.db.write() as conn:
        await conn.execute(
            object_events.update().where(object_events.c.event_id == 3).values(data={"n": 1})
        )
    report = verified(url)
    assert report.broken is not None
    assert (report.broken.table, report.broken.id) == ("object_events", 3)


async def test_a_row_deleted_past_the_anchor_is_caught(url: str) -> None:
    await pruned_after_two(url)
    async with ObjectStore(url, types=TYPES) as objects, objects.db.write() as conn:
        await conn.execute(object_events.delete().where(object_events.c.event_id == 3))
    report = verified(url)
    assert report.broken is not None
    assert (report.broken.table, report.broken.id) == ("object_events", 4)


async def test_the_daily_retention_prunes_the_tables_with_the_runs(url: str) -> None:
    async with ObjectStore(url, types=TYPES) as objects:
        ada = await objects.create("Person", {"name": "Ada"})
        await objects.update(ada.id, {"name": "A"})
        await Retention(timedelta(microseconds=1)).prune(MemorySignalStore(), objects.db)
        kept = await rows(objects.db, sa.select(object_events))
    assert kept == []
    assert verified(url).broken is None


async def test_a_large_prune_goes_a_chunk_at_a_time_and_the_chains_still_verify(url: str) -> None:
    """Each chunk is its own transaction; together they delete what one prune would."""
    async with ObjectStore(url, types=TYPES) as objects:
        history = History(objects.db)
        ada = await objects.create("Person", {"name": "Ada"})
        for n in range(7):
            await objects.update(ada.id, {"email": f"ada{n}@x.org"})
            await history.add("suggestion:decided", decided_line(n))
        cutoff = datetime.now(UTC)
        await objects.update(ada.id, {"email": "kept@x.org"})
        await history.add("suggestion:decided", decided_line(7))
        counts = await prune_tables(objects.db, before=cutoff, chunk=3)
        events = [row.event_id for row in await rows(objects.db, sa.select(object_events))]
        lines = [row.id for row in await rows(objects.db, sa.select(processing_history))]
        with pytest.raises(ValueError, match="at least one row"):
            await prune_tables(objects.db, before=cutoff, chunk=0)
    assert counts == {"processing_log": 0, "history": 7, "events": 8}
    assert (events, lines) == ([9], [8])
    report = verified(url)
    assert report.broken is None, report.broken
    assert any("through id 8" in note for note in report.notes)

"""A run whose recording fails never reports ``completed``, and the store recovers.

The faults are real: a 3 MB tmpfs filled to the last byte (SQLITE_FULL), and
PostgreSQL connections cut with ``pg_terminate_backend`` while refusing new ones.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog
from psycopg import sql

from reactor import (
    AgentContext,
    PostgresSignalStore,
    RecordingError,
    SignalStoreBase,
    SQLiteSignalStore,
    agent,
    reactive,
)
from reactor._recording.writes import WriteFailures
from tests.reactor.databases import admin
from tests.reactor.test_postgres import name_of


@pytest.fixture
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    """A real 3 MB filesystem (tmpfs), unmounted after the test."""
    mount = tmp_path / "disk"
    mount.mkdir()
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(mount)],
        check=True,
        capture_output=True,
    )
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False, capture_output=True)


def fill(disk: Path) -> Path:
    """Fill ``disk`` to the last byte with one file; return it (delete it to free space)."""
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:
        for size in (65536, 4096, 1):
            with contextlib.suppress(OSError):
                while True:
                    os.write(fd, b"\0" * size)
    finally:
        os.close(fd)
    return filler


def small_graph() -> Any:
    def note(ctx: AgentContext) -> dict[str, Any]:
        return {"text": "x" * 400, "n": ctx.signal.seq}

    return reactive(
        {
            "first": agent(run=note, updates="a"),
            "second": agent(run=note, activate_on="state:a:changed", updates="b"),
        },
        state={"a": None, "b": None},
    )


def recorded_completely(store: SignalStoreBase, result: Any) -> bool:
    try:
        recording = store.load(result.run_id)
    except Exception:
        return False
    return [s.seq for s in recording.signals] == [s.seq for s in result.signals]


async def test_runs_on_a_full_disk_fail_and_the_store_records_again_once_space_is_freed(
    tiny_disk: Path,
) -> None:
    graph = small_graph()
    with SQLiteSignalStore(tiny_disk / "runs.db", batch_size=50) as store:
        assert (await graph.run(record=store)).status == "completed"
        filler = fill(tiny_disk)
        with structlog.testing.capture_logs() as logs:
            results = [await graph.run(record=store) for _ in range(200)]
        statuses = [result.status for result in results]
        failed = [result for result in results if result.status == "failed"]
        assert failed, f"no run failed on a full disk: {set(statuses)}"
        assert set(statuses) <= {"completed", "failed"}
        for result in results:
            if result.status == "completed":
                assert recorded_completely(store, result)
        for result in failed:
            assert isinstance(result.error, RecordingError)
            assert (result.error.unwritten or 0) > 0
            assert "full" in str(result.error)
            assert "Free disk space where the store is." in str(result.error)
            assert result.reason.startswith("recording failed: ")
            assert not recorded_completely(store, result)
        failures = [line for line in logs if line["event"] == "recording failed"]
        assert 1 <= len(failures) < len(failed)  # once per failure, not per signal or run

        filler.unlink()
        after = await graph.run(record=store)
        assert after.status == "completed"
        assert recorded_completely(store, after)
        assert store.load(after.run_id).status == "completed"


async def test_a_failed_run_leaves_a_prefix_that_never_says_completed(tiny_disk: Path) -> None:
    graph = small_graph()
    with SQLiteSignalStore(tiny_disk / "runs.db") as store:
        await graph.run(record=store)
        filler = fill(tiny_disk)
        result = await graph.run(record=store)
        filler.unlink()
        assert result.status == "failed"
        infos = {info.run_id: info for info in store.runs()}
        assert infos.get(result.run_id) is None or infos[result.run_id].status != "completed"


async def test_postgres_runs_fail_while_the_database_is_away_and_record_once_it_is_back(
    postgres_dsn: str,
) -> None:
    graph = small_graph()
    database = name_of(postgres_dsn)
    with PostgresSignalStore(postgres_dsn, retry_for=0.5) as store:
        assert (await graph.run(record=store)).status == "completed"
        with admin() as conn:
            conn.execute(
                sql.SQL("ALTER DATABASE {} ALLOW_CONNECTIONS false").format(
                    sql.Identifier(database)
                )
            )
            try:
                conn.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
                    (database,),
                )
                with structlog.testing.capture_logs() as logs:
                    away = [await graph.run(record=store) for _ in range(2)]
            finally:
                conn.execute(
                    sql.SQL("ALTER DATABASE {} ALLOW_CONNECTIONS true").format(
                        sql.Identifier(database)
                    )
                )
        for result in away:
            assert result.status == "failed"
            assert isinstance(result.error, RecordingError)
            assert result.error.unwritten == len(result.signals)
        assert [line["event"] for line in logs].count("recording failed") == 1

        back = await graph.run(record=store)  # the same store object
        assert back.status == "completed"
        assert recorded_completely(store, back)


async def test_pg_terminate_backend_alone_loses_nothing(postgres_dsn: str) -> None:
    graph = small_graph()
    with PostgresSignalStore(postgres_dsn) as store:
        await graph.run(record=store)
        with admin() as conn:
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
                (name_of(postgres_dsn),),
            )
        result = await graph.run(record=store)
        assert result.status == "completed"
        assert recorded_completely(store, result)


def test_a_run_that_watches_after_its_recording_failed_is_told_at_once() -> None:
    # The first writes of a run can fail before the run starts watching its recording.
    failures = WriteFailures("runs.db")
    failures.lose({"run_a": 1}, OSError("database or disk is full"))
    told: list[str] = []
    failures.watch("run_a", lambda: told.append("run_a"))
    unwatch = failures.watch("run_b", lambda: told.append("run_b"))
    assert told == ["run_a"]
    unwatch()
    failures.lose({"run_b": 1}, OSError("database or disk is full"))
    assert told == ["run_a"]


NOTES = 1000


async def test_a_run_stops_as_soon_as_its_recording_fails(tiny_disk: Path) -> None:
    async def chatty(ctx: AgentContext) -> int:
        for n in range(NOTES):  # 10 s of work if nothing stopped it
            ctx.emit("note", {"n": n, "text": "y" * 200})
            await asyncio.sleep(0.01)
        return NOTES

    graph = reactive({"chatty": agent(run=chatty, emits=["note"])})
    # Nothing written since the store was made: its first write must grow the database
    # (a store that had written already may reuse its write-ahead log's pages for a while).
    with SQLiteSignalStore(tiny_disk / "runs.db", batch_size=10) as store:
        filler = fill(tiny_disk)
        result = await graph.run(record=store)
        filler.unlink()
    assert result.status == "failed"
    assert isinstance(result.error, RecordingError)
    notes = len(result.select("note"))
    assert notes < NOTES / 2, notes  # stopped, not run to its end with nothing recorded
    assert "agent:chatty:cancelled" in [s.name for s in result.signals]
    assert result.signals[-1].payload["status"] == "failed"


class CountedStore(SQLiteSignalStore):
    """A SQLite store that counts its flushes (each a wait on its writer thread)."""

    flushes = 0

    def flush(self) -> None:
        self.flushes += 1
        super().flush()


async def test_runs_ending_at_once_share_one_flush_and_each_is_written(tmp_path: Path) -> None:
    async def note(ctx: AgentContext) -> dict[str, Any]:  # no thread: the runs go in step
        return {"text": "x" * 400, "n": ctx.signal.seq}

    graph = reactive(
        {
            "first": agent(run=note, updates="a"),
            "second": agent(run=note, activate_on="state:a:changed", updates="b"),
        },
        state={"a": None, "b": None},
    )
    with CountedStore(tmp_path / "runs.db") as store:
        results = await asyncio.gather(*(graph.run(record=store) for _ in range(40)))
        # one flush for the runs waiting at once (and one more for those who came
        # during it), not one per run: each would hold a thread of the loop's pool
        assert store.flushes < len(results) / 2, store.flushes
        assert {result.status for result in results} == {"completed"}
        # each run returned once its own log was written: none waits for a later flush
        assert all(recorded_completely(store, result) for result in results)


async def test_runs_sharing_a_flush_on_a_full_disk_each_fail_with_their_own_error(
    tiny_disk: Path,
) -> None:
    graph = small_graph()
    with CountedStore(tiny_disk / "runs.db", batch_size=50) as store:
        assert (await graph.run(record=store)).status == "completed"
        filler = fill(tiny_disk)
        results = await asyncio.gather(*(graph.run(record=store) for _ in range(40)))
        filler.unlink()
        failed = [result for result in results if result.status == "failed"]
        assert failed, {result.status for result in results}
        for result in failed:
            assert isinstance(result.error, RecordingError)
            assert result.reason.startswith("recording failed: ")
            assert not recorded_completely(store, result)
        for result in results:
            if result.status == "completed":
                assert recorded_completely(store, result)
        after = await graph.run(record=store)
        assert after.status == "completed"
        assert recorded_completely(store, after)


async def test_a_store_flush_that_raises_reaches_every_run_waiting_on_it() -> None:
    class Refusing(SignalStoreBase):
        """A store of an application's own whose every flush fails."""

        def __init__(self) -> None:
            self.flushes = 0

        def append(self, signal: Any) -> None:
            pass

        def flush(self) -> None:
            self.flushes += 1
            raise RecordingError("the archive refused the batch", unwritten=3)

    store = Refusing()
    results = await asyncio.gather(*(small_graph().run(record=store) for _ in range(10)))
    assert {result.status for result in results} == {"failed"}
    for result in results:
        assert isinstance(result.error, RecordingError)
        assert "the archive refused the batch" in str(result.error)
    assert store.flushes < len(results)

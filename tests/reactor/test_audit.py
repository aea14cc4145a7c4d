"""Each run's signals are hash-chained as they are written, and ``reactor audit verify`` checks.

On a real SQLite file and a real PostgreSQL database: a run is recorded, someone edits
the database with SQL (as a person with access to it would), and ``reactor audit
verify`` (a real ``python -m reactor`` process) names the first entry that fails; an
intact database verifies. A resume refuses a snapshot edited in the database, whether
its seal was deleted or recomputed. A store made by the schema before chains opens,
is migrated, and its old signals verify as written before the trail was chained. A
batch that holds what the database refuses fails only the run it belongs to.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator, MutableMapping, Sequence
from pathlib import Path
from typing import Any

import psycopg
import pytest
from structlog.testing import capture_logs

from reactor import PostgresSignalStore, RecordingError, Signal, SignalStoreBase, SQLiteSignalStore
from reactor._backends.chained import POSTGRES, SQLITE, ChainSQL
from reactor._recording.chain import Chain, signal_entry
from reactor._recording.seals import HASH, seal
from reactor._signals.settings import settings
from tests.reactor.cli_support import cli_env, reactor_process
from tests.reactor.databases import (
    POSTGRES_SINCE_6,
    SQLITE_SINCE_7,
    StorePlace,
    execute,
)
from tests.reactor.support import ticking

KEY = "k3y-of-the-audit-trail-0123"
TICKS = 40
MISMATCH = (
    "its content does not match its hash: it was changed, or an entry before it was "
    "removed, added or moved"
)


@pytest.fixture
def audit_key(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """``REACTOR_AUDIT_KEY`` set for the stores this test opens."""
    monkeypatch.setenv("REACTOR_AUDIT_KEY", KEY)
    settings.cache_clear()
    yield KEY
    monkeypatch.delenv("REACTOR_AUDIT_KEY")
    settings.cache_clear()


def record(place: StorePlace, snapshot_every: int | None = None) -> str:
    """Record a run of :func:`ticking` to ``place``; its id."""
    with place.open() as store:
        store.snapshot_every = snapshot_every
        result = ticking(TICKS).run_sync(record=store, max_activations=None)
        assert result.status == "completed", result.error
        return result.run_id


def sql(place: StorePlace, statement: str, params: Sequence[Any] = ()) -> list[Any]:
    """Run one statement on the store's database, as someone with access to it would."""
    if place.kind == "sqlite":
        with sqlite3.connect(place.where) as conn:
            return conn.execute(statement.replace("%s", "?"), tuple(params)).fetchall()
    return execute(place.where, statement, tuple(params))


def names(place: StorePlace) -> ChainSQL:
    return SQLITE if place.kind == "sqlite" else POSTGRES


def rows_of(place: StorePlace, run_id: str) -> list[tuple[Any, ...]]:
    """The run's rows as chained: a signal's stored fields (``signal_entry``'s), then its hash."""
    chain = names(place)
    return [
        tuple(row)
        for row in sql(
            place,
            f"SELECT {chain.columns} FROM {chain.signals} WHERE run_id = %s ORDER BY seq",
            (run_id,),
        )
    ]


def changed_state(place: StorePlace, run_id: str) -> tuple[int, str]:
    """The seq and id of the run's first ``state:n:changed``."""
    seq, signal_id = next(
        (row[1], row[2]) for row in rows_of(place, run_id) if row[3] == "state:n:changed"
    )
    return seq, signal_id


def edit_payload(place: StorePlace, run_id: str, seq: int) -> None:
    """Change the value a signal's payload says was written."""
    if place.kind == "sqlite":
        sql(
            place,
            "UPDATE signals SET payload = json_set(payload, '$.new', 99) "
            "WHERE run_id = %s AND seq = %s",
            (run_id, seq),
        )
    else:
        sql(
            place,
            "UPDATE reactor_signals SET payload = jsonb_set(payload::jsonb, '{new}', '99')::json "
            "WHERE run_id = %s AND seq = %s",
            (run_id, seq),
        )


def rechain(place: StorePlace, run_id: str, start: int, chain: Chain) -> None:
    """Recompute every hash of the run from signal ``start`` on, as a forger would."""
    table = names(place).signals
    previous = None
    for row in rows_of(place, run_id):
        if row[1] >= start:
            previous = chain.link(previous, signal_entry(row[:9]))
            sql(
                place,
                f"UPDATE {table} SET hash = %s WHERE run_id = %s AND seq = %s",
                (previous, run_id, row[1]),
            )
        else:
            previous = row[9]


def verify(
    place: StorePlace, project: Path, *options: str, key: str | None = None
) -> tuple[int, list[str]]:
    """``reactor audit verify --db PLACE OPTIONS`` in a new process: its status and its lines."""
    env = cli_env()
    env.pop("REACTOR_AUDIT_KEY", None)  # this process's, when a test set it for its stores
    if key is not None:
        env["REACTOR_AUDIT_KEY"] = key
    done = reactor_process(project, "audit", "verify", "--db", place.where, *options, env=env)
    assert done.stderr == "" or done.returncode != 0, done.stderr
    return done.returncode, (done.stdout + done.stderr).splitlines()


# -- verify on a store ----------------------------------------------------------------


def test_an_intact_store_verifies(store_place: StorePlace, tmp_path: Path) -> None:
    run_id = record(store_place)
    count = len(rows_of(store_place, run_id))
    status, lines = verify(store_place, tmp_path)
    assert (status, lines) == (
        0,
        [
            f"signals: 1 run, {count} entries chained",
            "The trail is intact. Without REACTOR_AUDIT_KEY this shows edits, not a writer who "
            "recomputed the chain (see docs/audit.md).",
        ],
    )
    assert all(row[9].startswith("sha256:") for row in rows_of(store_place, run_id))


def test_an_edited_signal_is_named_by_run_and_seq(store_place: StorePlace, tmp_path: Path) -> None:
    record(store_place)
    run_id = record(store_place)
    seq, signal_id = changed_state(store_place, run_id)
    edit_payload(store_place, run_id, seq)
    status, lines = verify(store_place, tmp_path)
    table = names(store_place).signals
    assert (status, lines) == (
        1,
        [f"Broken: table {table}, run {run_id}, seq {seq}, id {signal_id}: {MISMATCH}."],
    )


def test_a_signal_deleted_in_the_middle_is_caught_at_the_next(
    store_place: StorePlace, tmp_path: Path
) -> None:
    run_id = record(store_place)
    rows = rows_of(store_place, run_id)
    gone, after = rows[5], rows[6]
    sql(
        store_place,
        f"DELETE FROM {names(store_place).signals} WHERE run_id = %s AND seq = %s",
        (run_id, gone[1]),
    )
    status, lines = verify(store_place, tmp_path, "--json")
    assert status == 1
    broken = json.loads(lines[0])["broken"]
    assert broken == {
        "table": names(store_place).signals,
        "id": after[2],
        "seq": after[1],
        "run_id": run_id,
        "problem": MISMATCH,
    }


def test_the_newest_signals_removed_are_caught_by_the_runs_row(
    store_place: StorePlace, tmp_path: Path
) -> None:
    run_id = record(store_place)
    last = rows_of(store_place, run_id)[-1][1]
    sql(
        store_place,
        f"DELETE FROM {names(store_place).signals} WHERE run_id = %s AND seq > %s",
        (run_id, last - 3),
    )
    status, lines = verify(store_place, tmp_path)
    assert status == 1
    assert lines == [
        f"Broken: table {names(store_place).signals}, run {run_id}, seq {last}: the run's row "
        f"says its log reaches seq {last}, but the log ends at seq {last - 3}: its newest "
        "signals were removed."
    ]


def test_one_run_is_verified_alone_with_run(store_place: StorePlace, tmp_path: Path) -> None:
    broken = record(store_place)
    sound = record(store_place)
    edit_payload(store_place, broken, changed_state(store_place, broken)[0])
    status, lines = verify(store_place, tmp_path, "--run", sound)
    assert status == 0
    assert lines[0] == f"signals: 1 run, {len(rows_of(store_place, sound))} entries chained"
    assert verify(store_place, tmp_path, "--run", broken)[0] == 1
    status, lines = verify(store_place, tmp_path, "--run", "run_nope")
    assert (status, lines) == (
        1,
        ["reactor audit: error: No run 'run_nope' in this database (see `reactor runs`)."],
    )


def test_a_hash_removed_is_caught(store_place: StorePlace, tmp_path: Path) -> None:
    run_id = record(store_place)
    table = names(store_place).signals
    sql(store_place, f"UPDATE {table} SET hash = NULL WHERE run_id = %s", (run_id,))
    status, lines = verify(store_place, tmp_path)
    assert status == 1
    assert lines[0].startswith(f"Broken: table {table}, run {run_id}, seq 1, id ")
    assert "it has no hash, though it was written after the trail was chained (" in lines[0]


# -- with a key -------------------------------------------------------------------------


def test_a_chain_recomputed_without_the_key_is_caught_with_it(
    store_place: StorePlace, tmp_path: Path, audit_key: str
) -> None:
    run_id = record(store_place)
    rows = rows_of(store_place, run_id)
    assert all(row[9].startswith("hmac-sha256:") for row in rows)
    assert verify(store_place, tmp_path, key=audit_key)[0] == 0
    seq, signal_id = changed_state(store_place, run_id)
    edit_payload(store_place, run_id, seq)
    rechain(store_place, run_id, seq, Chain(None))  # SHA-256: the forger has no key
    status, lines = verify(store_place, tmp_path, key=audit_key)
    assert (status, lines) == (
        1,
        [
            f"Broken: table {names(store_place).signals}, run {run_id}, seq {seq}, id "
            f"{signal_id}: it is chained without the key (SHA-256), so the key does not vouch "
            "for it: someone without REACTOR_AUDIT_KEY rewrote it, or a process without the "
            "key wrote it (verify such a chain without the key)."
        ],
    )
    rechain(store_place, run_id, seq, Chain(b"a-guessed-key-0000000"))
    status, lines = verify(store_place, tmp_path, key=audit_key)
    assert status == 1
    assert lines[0].endswith(f"{MISMATCH} (or it was chained with another key).")
    status, lines = verify(store_place, tmp_path)  # without the key: it cannot say
    assert status == 1
    assert lines[0].endswith(
        "its chain was written with a key (HMAC-SHA-256); set REACTOR_AUDIT_KEY to that key "
        "to verify it."
    )


def test_without_a_key_a_chain_recomputed_whole_is_not_caught(
    store_place: StorePlace, tmp_path: Path
) -> None:
    """What docs/audit.md says SHA-256 does not detect: a writer who recomputes the chain."""
    run_id = record(store_place)
    seq, _ = changed_state(store_place, run_id)
    edit_payload(store_place, run_id, seq)
    rechain(store_place, run_id, seq, Chain(None))
    assert verify(store_place, tmp_path)[0] == 0


# -- the chain goes on over a resume -----------------------------------------------------


def crash_after(place: StorePlace, run_id: str, last: int) -> None:
    """The run's log and row as a process that died after signal ``last`` leaves them."""
    chain = names(place)
    sql(place, f"DELETE FROM {chain.signals} WHERE run_id = %s AND seq > %s", (run_id, last))
    sql(
        place,
        f"UPDATE {chain.runs} SET status = NULL, ended_at = NULL, last_seq = %s, "
        f"signals = %s WHERE run_id = %s",
        (last, last, run_id),
    )


def test_a_resumed_run_chains_on_from_its_last_stored_signal(
    store_place: StorePlace, tmp_path: Path
) -> None:
    run_id = record(store_place)
    crash_after(store_place, run_id, 30)
    with store_place.open() as store:
        result = ticking(TICKS).resume_sync(run_id, record=store, max_activations=None)
    assert result.status == "completed", result.error
    rows = rows_of(store_place, run_id)
    assert rows[-1][1] > 30
    assert rows[30][9] == Chain(None).link(rows[29][9], signal_entry(rows[30][:9]))
    assert verify(store_place, tmp_path)[0] == 0


# -- snapshots ---------------------------------------------------------------------------


def snapshot_rows(place: StorePlace, run_id: str) -> list[tuple[Any, ...]]:
    return [row for row in rows_of(place, run_id) if row[3] == "harness:snapshot"]


def forge_snapshot(place: StorePlace, run_id: str, seq: int, *, keep_seal: bool) -> None:
    """Set a snapshot's counter to 999: its seal deleted, or recomputed over the lie."""
    (row,) = [row for row in snapshot_rows(place, run_id) if row[1] == seq]
    payload = json.loads(row[4])
    payload["state"]["n"] = 999
    if keep_seal:
        payload = seal(payload)  # SHA-256 of the content, as reactor seals it
    else:
        del payload[HASH]
    table = names(place).signals
    sql(
        place,
        f"UPDATE {table} SET payload = %s WHERE run_id = %s AND seq = %s",
        (json.dumps(payload), run_id, seq),
    )


def skipped(logs: list[MutableMapping[str, Any]]) -> list[tuple[str, int, str]]:
    return [(e["run_id"], e["seq"], e["problem"]) for e in logs if e["event"] == "snapshot skipped"]


@pytest.mark.parametrize("keep_seal", [False, True], ids=["seal-deleted", "seal-recomputed"])
def test_a_resume_refuses_an_edited_snapshot_and_folds_from_the_one_before(
    store_place: StorePlace, keep_seal: bool
) -> None:
    run_id = record(store_place, snapshot_every=10)
    snapshots = snapshot_rows(store_place, run_id)
    latest = snapshots[len(snapshots) // 2]
    crash_after(store_place, run_id, latest[1] + 3)
    forge_snapshot(store_place, run_id, latest[1], keep_seal=keep_seal)
    with capture_logs() as logs, store_place.open() as store:
        result = ticking(TICKS).resume_sync(run_id, record=store, max_activations=None)
    assert result.status == "completed", result.error
    assert result.state == {"n": TICKS}  # not 999 + what came after: the forgery was not used
    [(run, seq, problem)] = skipped(logs)
    assert (run, seq) == (run_id, latest[1])
    if keep_seal:
        assert problem.startswith("its entry fails its link in the run's chain (")
    else:
        assert problem == "it has no seal (its hash key), though its run's log is chained"


def test_a_snapshot_whose_own_hash_was_recomputed_is_refused_with_the_key(
    store_place: StorePlace, audit_key: str
) -> None:
    run_id = record(store_place, snapshot_every=10)
    snapshots = snapshot_rows(store_place, run_id)
    latest = snapshots[len(snapshots) // 2]
    crash_after(store_place, run_id, latest[1] + 3)
    forge_snapshot(store_place, run_id, latest[1], keep_seal=True)
    rechain(store_place, run_id, latest[1], Chain(None))  # every hash from it, without the key
    with capture_logs() as logs, store_place.open() as store:
        result = ticking(TICKS).resume_sync(run_id, record=store, max_activations=None)
    assert result.state == {"n": TICKS}
    [(_, seq, problem)] = skipped(logs)
    assert seq == latest[1]
    assert "chained without the key" in problem


# -- a store made by the schema before chains -------------------------------------------


def unchain_schema(place: StorePlace) -> None:
    """Make the database what the schema before chains made: no hashes, no marker."""
    if place.kind == "sqlite":
        with sqlite3.connect(place.where) as conn:
            for statement in SQLITE_SINCE_7:
                conn.execute(statement)
            conn.execute("PRAGMA user_version = 7")
    else:
        for statement in POSTGRES_SINCE_6:
            execute(place.where, statement)
        execute(place.where, "UPDATE reactor_schema SET version = 6")


def test_a_store_of_the_schema_before_chains_is_migrated_and_its_old_signals_are_not_chained(
    store_place: StorePlace, tmp_path: Path
) -> None:
    old = record(store_place)
    old_count = len(rows_of(store_place, old))
    unchain_schema(store_place)
    status, lines = verify(store_place, tmp_path)
    assert status == 1  # not migrated yet: verify says how
    assert "reactor audit: error:" in lines[0]
    new = record(store_place)  # opening the store migrates it
    assert all(row[9] is None for row in rows_of(store_place, old))
    new_count = len(rows_of(store_place, new))
    status, lines = verify(store_place, tmp_path)
    assert (status, lines[0]) == (
        0,
        f"signals: 2 runs, {new_count} entries chained, {old_count} written before the "
        "trail was chained (not checked)",
    )


# -- a batch that fails for what it holds ------------------------------------------------


def healthy_and_bad(refused: Signal) -> list[Signal]:
    """Two runs' signals, interleaved: ``run_good`` whole, and ``run_bad`` that ends with
    ``refused``, which the database refuses."""
    good = [Signal("harness:start", {"n": 0}, seq=1, run_id="run_good")]
    good += [Signal("note:tick", {"n": n}, seq=n, run_id="run_good") for n in range(2, 41)]
    bad = [Signal("harness:start", {"n": 0}, seq=1, run_id="run_bad")]
    bad += [Signal("note:tick", {"n": n}, seq=n, run_id="run_bad") for n in range(2, 5)]
    bad.append(refused)
    mixed: list[Signal] = []
    for index, signal in enumerate(good):
        mixed.append(signal)
        if index < len(bad):
            mixed.append(bad[index])
    return mixed


def wait_until(check: Any, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "the condition did not hold in time"
        time.sleep(0.02)


def assert_only_the_bad_run_failed(
    store: SignalStoreBase, tmp_path: Path, place: StorePlace
) -> None:
    store.flush()
    error = store.recording_error("run_bad")
    assert isinstance(error, RecordingError)
    assert store.recording_error("run_good") is None
    assert store.recording_error("run_first") is None
    assert error.unwritten == 5
    assert [s.seq for s in store.load("run_good").signals] == list(range(1, 41))
    assert [s.seq for s in store.load("run_first").signals] == [1, 2]
    assert verify(place, tmp_path, "--run", "run_good")[0] == 0


def test_a_nul_postgres_refuses_fails_only_its_run(postgres_dsn: str, tmp_path: Path) -> None:
    place = StorePlace("postgres", postgres_dsn)
    with PostgresSignalStore(postgres_dsn) as store, psycopg.connect(postgres_dsn) as holder:
        store.append(Signal("harness:start", {}, seq=1, run_id="run_first"))
        store.flush()  # the tables of runs exist: now hold them, so the writer waits
        holder.execute("LOCK TABLE reactor_runs IN EXCLUSIVE MODE")
        store.append(Signal("note:tick", None, seq=2, run_id="run_first"))
        wait_until(
            lambda: (
                execute(
                    postgres_dsn,
                    "SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation "
                    "WHERE c.relname = 'reactor_runs' AND NOT l.granted",
                )[0][0]
                > 0
            )
        )
        end = {"status": "aborted", "reason": "stopped by \x00 an operator", "failures": 0}
        for signal in healthy_and_bad(Signal("harness:end", end, seq=5, run_id="run_bad")):
            store.append(signal)  # queued behind the held batch: the next batch holds them all
        holder.rollback()
        assert_only_the_bad_run_failed(store, tmp_path, place)


def test_a_value_sqlite_refuses_fails_only_its_run(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    place = StorePlace("sqlite", str(path))
    with SQLiteSignalStore(path, timeout=0.05) as store, capture_logs() as logs:
        store.append(Signal("harness:start", {}, seq=1, run_id="run_first"))
        store.flush()
        holder = sqlite3.connect(path, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")  # the writer's next batch waits for the lock
        store.append(Signal("note:tick", None, seq=2, run_id="run_first"))
        wait_until(
            lambda: any(
                e["event"] == "database locked; keeping the signals and retrying" for e in logs
            )
        )
        too_far = Signal("note:tick", None, seq=2**63, run_id="run_bad")  # past SQLite's INTEGER
        for signal in healthy_and_bad(too_far):
            store.append(signal)
        holder.execute("ROLLBACK")
        holder.close()
        assert_only_the_bad_run_failed(store, tmp_path, place)

"""Snapshots are checked: one changed after it was taken is skipped, never trusted or fatal.

Each test records a run to a real SQLite file and a real PostgreSQL database, changes
a stored ``harness:snapshot`` with SQL (as someone editing the database would), and
reads the run back: a resume, ``load_tail``, ``Recording.state_at`` and the service's
``state_at`` all give what the log gives without that snapshot, and a warning names
the run and the snapshot.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import MutableMapping
from typing import Any

import pytest
from structlog.testing import capture_logs

from reactor import Recording
from reactor._recording.seals import HASH, seal, snapshot_problem
from reactor.service._api.reads import state_at
from tests.reactor.databases import StorePlace, execute
from tests.reactor.support import ticking

TICKS = 40


# What someone does to a stored snapshot, in each database's SQL (``{p}`` is the payload).
CHANGES: dict[str, tuple[str, str]] = {
    "a state value changed": (
        "json_set(payload, '$.state.n', 999)",
        "jsonb_set(payload::jsonb, '{state,n}', '999')::json",
    ),
    "a key removed": (
        "json_remove(payload, '$.progress')",
        "(payload::jsonb - 'progress')::json",
    ),
    "not a JSON object": ("'[1, 2, 3]'", "'[1, 2, 3]'::json"),
    "the state of a wrong type": (
        "json_set(payload, '$.state', json('[1, 2]'))",
        "jsonb_set(payload::jsonb, '{state}', '[1, 2]')::json",
    ),
    "its seq moved past itself": (
        "json_set(payload, '$.seq', seq + 5)",
        "jsonb_set(payload::jsonb, '{seq}', to_jsonb(seq + 5))::json",
    ),
}
UNSEAL = ("json_remove(payload, '$.hash')", "(payload::jsonb - 'hash')::json")
"""A snapshot as one recorded before snapshots were sealed (no hash)."""


def unchain(place: StorePlace, run_id: str) -> None:
    """Make the run's log as one recorded before logs were hash-chained (no hashes)."""
    if place.kind == "sqlite":
        with sqlite3.connect(place.where) as conn:
            conn.execute("UPDATE signals SET hash = NULL WHERE run_id = ?", (run_id,))
    else:
        execute(place.where, "UPDATE reactor_signals SET hash = NULL WHERE run_id = %s", (run_id,))


def change(place: StorePlace, run_id: str, new_payload: tuple[str, str], *seqs: int) -> None:
    """Set the payload of the run's signals ``seqs`` (default: every snapshot) with SQL."""
    sqlite_sql, postgres_sql = new_payload
    which = (
        f"seq IN ({', '.join(str(seq) for seq in seqs)})" if seqs else "name = 'harness:snapshot'"
    )
    if place.kind == "sqlite":
        with sqlite3.connect(place.where) as conn:
            conn.execute(
                f"UPDATE signals SET payload = {sqlite_sql} WHERE run_id = ? AND {which}",
                (run_id,),
            )
    else:
        execute(
            place.where,
            f"UPDATE reactor_signals SET payload = {postgres_sql} WHERE run_id = %s AND {which}",
            (run_id,),
        )


def crash_after(place: StorePlace, run_id: str, last: int) -> None:
    """Make the run's log what a process that died after signal ``last`` leaves."""
    if place.kind == "sqlite":
        with sqlite3.connect(place.where) as conn:
            conn.execute("DELETE FROM signals WHERE run_id = ? AND seq > ?", (run_id, last))
            conn.execute(
                "UPDATE runs SET status = NULL, ended_at = NULL WHERE run_id = ?", (run_id,)
            )
    else:
        execute(
            place.where,
            "DELETE FROM reactor_signals WHERE run_id = %s AND seq > %s",
            (run_id, last),
        )
        execute(
            place.where,
            "UPDATE reactor_runs SET status = NULL, ended_at = NULL WHERE run_id = %s",
            (run_id,),
        )


def recorded(place: StorePlace) -> tuple[str, Recording]:
    """A run of :func:`ticking` with a snapshot every 10 signals: its id and its log."""
    with place.open() as store:
        store.snapshot_every = 10
        result = ticking(TICKS).run_sync(record=store, max_activations=None)
        assert result.status == "completed", result.error
        return result.run_id, store.load(result.run_id)


def crashed_mid_count(place: StorePlace) -> tuple[str, int]:
    """A run that died while its counter worked through queued ticks; its latest snapshot."""
    run_id, whole = recorded(place)
    snapshots = whole.select("harness:snapshot")
    latest = snapshots[len(snapshots) // 2]
    assert latest.payload["needs"]  # ticks still queued: the snapshot names them
    crash_after(place, run_id, latest.seq + 3)
    return run_id, latest.seq


def skipped(logs: list[MutableMapping[str, Any]]) -> list[tuple[str, int]]:
    return [(e["run_id"], e["seq"]) for e in logs if e["event"] == "snapshot skipped"]


@pytest.mark.parametrize("how", list(CHANGES))
def test_a_resume_skips_a_changed_snapshot_and_ends_as_if_it_were_not_there(
    store_place: StorePlace, how: str
) -> None:
    run_id, latest = crashed_mid_count(store_place)
    change(store_place, run_id, CHANGES[how], latest)
    with capture_logs() as logs, store_place.open() as store:
        result = ticking(TICKS).resume_sync(run_id, record=store, max_activations=None)
        log = store.load(run_id)
    assert result.status == "completed", result.error
    assert result.state == {"n": TICKS}  # every tick counted once: none lost, none twice
    assert len(log.select("agent:count:completed")) == TICKS
    assert skipped(logs) == [(run_id, latest)]
    [warning] = [e for e in logs if e["event"] == "snapshot skipped"]
    assert warning["log_level"] == "warning"


@pytest.mark.parametrize("how", list(CHANGES))
def test_load_tail_starts_from_the_latest_sound_snapshot(store_place: StorePlace, how: str) -> None:
    run_id, latest = crashed_mid_count(store_place)
    with store_place.open() as store:
        whole = store.load(run_id)
    change(store_place, run_id, CHANGES[how], latest)
    with capture_logs() as logs, store_place.open() as store:
        tail = store.load_tail(run_id)
    [start] = [s for s in tail.signals if s.name == "harness:snapshot" and s.seq != latest]
    covered = start.payload["seq"]
    needed = {
        first + step * n for first, step, count in start.payload["needs"] for n in range(count)
    }
    assert [s.seq for s in tail.signals] == [
        s.seq for s in whole.signals if s.seq > covered or s.seq in needed
    ]
    assert tail.state == whole.state
    assert skipped(logs) == [(run_id, latest)]


def test_a_run_whose_every_snapshot_was_changed_resumes_from_its_start(
    store_place: StorePlace,
) -> None:
    run_id, _ = crashed_mid_count(store_place)
    change(store_place, run_id, CHANGES["a state value changed"])
    with capture_logs() as logs, store_place.open() as store:
        snapshots = [s.seq for s in store.load(run_id).select("harness:snapshot")]
        assert len(store.load_tail(run_id).signals) == len(store.load(run_id).signals)
        result = ticking(TICKS).resume_sync(run_id, record=store, max_activations=None)
    assert result.state == {"n": TICKS}
    assert {seq for _, seq in skipped(logs)} == set(snapshots)


@pytest.mark.parametrize("how", list(CHANGES))
def test_state_at_skips_a_changed_snapshot(store_place: StorePlace, how: str) -> None:
    run_id, whole = recorded(store_place)
    without = tuple(s for s in whole.signals if s.name != "harness:snapshot")
    expected = Recording(info=whole.info, signals=without)
    target = whole.select("harness:snapshot")[3]
    change(store_place, run_id, CHANGES[how], target.seq)
    with capture_logs() as logs, store_place.open() as store:
        log = store.load(run_id)
        for signal in log.signals:
            assert log.state_at(signal.seq) == expected.state_at(signal.seq), signal.seq
        for seq in range(target.seq - 2, target.seq + 80, 7):
            assert state_at(store, run_id, seq) == expected.state_at(seq), seq
    assert set(skipped(logs)) == {(run_id, target.seq)}


def test_an_unsealed_snapshot_recorded_before_hashes_is_trusted(store_place: StorePlace) -> None:
    run_id, latest = crashed_mid_count(store_place)
    unchain(store_place, run_id)
    change(store_place, run_id, UNSEAL)
    with capture_logs() as logs, store_place.open() as store:
        tail = store.load_tail(run_id)
        result = ticking(TICKS).resume_sync(run_id, record=store, max_activations=None)
    assert latest in {s.seq for s in tail.signals if s.name == "harness:snapshot"}
    assert tail.signals[0].seq < latest < tail.signals[-1].seq
    assert result.state == {"n": TICKS}
    assert skipped(logs) == []


@pytest.mark.parametrize("how", ["a key removed", "the state of a wrong type"])
def test_an_unsealed_snapshot_of_the_wrong_shape_is_skipped(
    store_place: StorePlace, how: str
) -> None:
    run_id, latest = crashed_mid_count(store_place)
    unchain(store_place, run_id)
    change(store_place, run_id, UNSEAL)
    change(store_place, run_id, CHANGES[how], latest)
    with capture_logs() as logs, store_place.open() as store:
        result = ticking(TICKS).resume_sync(run_id, record=store, max_activations=None)
    assert result.state == {"n": TICKS}
    assert skipped(logs) == [(run_id, latest)]


# -- the seal itself -----------------------------------------------------------------


def test_a_seal_holds_through_json_text_in_any_key_order() -> None:
    sealed = seal({"seq": 3, "needs": [], "state": {"b": 1.5, "a": [1e20, "é"]}, "progress": {}})
    text = json.dumps({k: sealed[k] for k in reversed(list(sealed))}, ensure_ascii=False)
    assert json.loads(text)[HASH] == sealed[HASH]
    assert (
        snapshot_problem(json.loads(text))
        == "its progress.launched is missing or not a JSON object"
    )
    changed = {**json.loads(text), "state": {"b": 1.5, "a": [1e20, "e"]}}
    assert snapshot_problem(changed) == (
        "its content does not match its hash (it was changed after it was taken)"
    )

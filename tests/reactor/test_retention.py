"""Retention: ``store.prune`` deletes ended runs whole, and never one that has not ended."""

from __future__ import annotations

import asyncio
import re
from datetime import timedelta
from typing import Any

import pytest

from reactor import (
    AgentContext,
    MemorySignalStore,
    RunNotFoundError,
    ScriptedProvider,
    SignalStoreBase,
    agent,
    reactive,
)


def _graphs() -> tuple[Any, Any, Any]:
    def fail(ctx: AgentContext[Any]) -> str:
        raise RuntimeError("no")

    quick = reactive(
        {"answer": agent(prompt="Say {{ input }}", updates="said")}, state={"said": None}, name="a"
    )
    other = reactive({"fail": agent(run=fail)}, name="b")
    waits = reactive({"ask": agent(ask="Go?", choices=["yes"])}, name="c")
    return quick, other, waits


def _record(store: SignalStoreBase) -> dict[str, list[str]]:
    """Three completed runs of graph a, one failed of b, one of c waiting; their ids."""
    quick, other, waits = _graphs()
    provider = ScriptedProvider(default=lambda request: "ok")
    ids: dict[str, list[str]] = {"completed": [], "failed": [], "waiting": []}
    for n in range(3):
        result = quick.run_sync(input=n, provider=provider, record=store, tags={"n": str(n)})
        ids["completed"].append(result.run_id)
    ids["failed"].append(other.run_sync(record=store).run_id)

    async def ask() -> str:
        handle = waits.start(record=store)
        await handle.next_prompt()
        store.post(handle.run_id, "note", {"kept": True})  # its inbox stays with it
        await handle.suspend()
        return str(handle.run_id)

    ids["waiting"].append(asyncio.run(ask()))
    for run_id in ids["completed"]:
        store.post(run_id, "late", None)  # an inbox message nobody took: pruned too
    store.flush()
    return ids


def _pruning(store: SignalStoreBase) -> None:
    ids = _record(store)
    everything = {run_id for group in ids.values() for run_id in group}
    assert {info.run_id for info in store.runs()} == everything
    assert store.prune(older_than=timedelta(hours=1)) == 0  # nothing ended that long ago
    assert store.prune(older_than=timedelta(0), dry_run=True) == 3
    assert {info.run_id for info in store.runs()} == everything  # a dry run deletes nothing
    assert store.prune(older_than=timedelta(0), keep_last=1) == 2
    newest = ids["completed"][-1]
    assert {info.run_id for info in store.runs()} == {newest, *ids["failed"], *ids["waiting"]}
    for run_id in ids["completed"][:2]:
        with pytest.raises(RunNotFoundError):
            store.load(run_id)
        assert store.undelivered([run_id]) == []
    assert store.prune(older_than=timedelta(0), status=None) == 2  # failed, the last completed
    [left] = store.runs()
    assert (left.run_id, left.status) == (ids["waiting"][0], "waiting")  # never pruned
    assert [m.name for m in store.undelivered([left.run_id])] == ["note"]
    assert store.load(left.run_id).signals


def test_prune_deletes_ended_runs_whole_and_never_a_waiting_one(
    signal_store: SignalStoreBase,
) -> None:
    _pruning(signal_store)


def test_prune_in_memory_does_the_same() -> None:
    _pruning(MemorySignalStore())


@pytest.mark.parametrize(
    ("bounds", "message"),
    [
        pytest.param(
            {"status": ("running",)},
            "Cannot prune runs with status 'running': only ended runs are pruned (statuses "
            "completed, ended, failed, aborted, timeout, loop_limit); a run that has not "
            "ended never is.",
            id="running",
        ),
        pytest.param(
            {"keep_last": -1}, "keep_last must be a whole number >= 0, got -1.", id="keep-last"
        ),
        pytest.param(
            {"older_than": 30},
            "older_than must be a duration (datetime.timedelta(days=30)), got 30.",
            id="not-a-duration",
        ),
    ],
)
def test_prune_refuses_what_it_cannot_mean(bounds: dict[str, Any], message: str) -> None:
    arguments: dict[str, Any] = {"older_than": timedelta(days=1), **bounds}
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        MemorySignalStore().prune(**arguments)


def test_a_fork_records_where_it_came_from(signal_store: SignalStoreBase) -> None:
    quick, _, _ = _graphs()
    provider = ScriptedProvider(default=lambda request: "ok")
    source = quick.run_sync(input="x", provider=provider, record=signal_store)
    fork = asyncio.run(quick.fork(source.run_id, at=2, record=signal_store, provider=provider))
    signal_store.flush()
    infos = {info.run_id: info for info in signal_store.runs()}
    assert infos[fork.run_id].forked_from == source.run_id
    assert infos[source.run_id].forked_from is None
    recording = signal_store.load(fork.run_id)
    assert recording.select("harness:forked")[0].payload["from_run_id"] == source.run_id
    assert recording.select("harness:forked")[0].payload["at"] == 2
    assert recording.info.forked_from == source.run_id

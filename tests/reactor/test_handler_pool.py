"""The handler threads are shared fairly: a run's share, and abandoned calls counted.

Synchronous handlers and tools of every run take threads from one pool of
``REACTOR_HANDLER_THREADS``; a run's calls hold at most ``max(1, threads // 4)`` of
them at once, and a call abandoned on a timeout gives its place back, is counted by
:func:`reactor.abandoned_threads` and replaced by a new thread while it runs.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from typing import Any

import structlog

from reactor import AgentContext, abandoned_threads, agent, reactive
from reactor._signals.threads import _Pool, _pool
from reactor.testing import ToolUse, fake_anthropic, turn

DEADLINE = 60.0  # generous: the conditions hold long before on a quiet machine


async def until(condition: Callable[[], bool], what: str) -> None:
    """Wait (on the loop) until ``condition()`` holds, or fail saying ``what`` was awaited."""
    deadline = time.monotonic() + DEADLINE
    while not condition():
        assert time.monotonic() < deadline, f"waited {DEADLINE} s for {what}"
        await asyncio.sleep(0.01)


class Blocked:
    """Sync handlers that block until the test releases them, counting who is inside."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.inside = 0
        self.peak = 0
        self.done = 0
        self._lock = threading.Lock()

    def __call__(self, ctx: AgentContext) -> str:
        self.block()
        return ctx.agent

    def block(self) -> None:
        with self._lock:
            self.inside += 1
            self.peak = max(self.peak, self.inside)
        try:
            self.release.wait(DEADLINE)
        finally:
            with self._lock:
                self.inside -= 1
                self.done += 1


async def test_a_run_whose_handlers_all_block_leaves_threads_for_another_run() -> None:
    share = _pool().share
    blocked = Blocked()
    busy = reactive({f"a{i}": agent(run=blocked) for i in range(40)}).start(keep_open=False)
    try:
        await until(lambda: blocked.inside >= share, "run A's share of handlers to block")
        trivial = reactive({"b": agent(run=lambda ctx: "done")})
        other = await asyncio.wait_for(trivial.run(), DEADLINE)
        assert other.status == "completed"
        (completed,) = [s for s in other.signals if s.name == "agent:b:completed"]
        assert completed.payload["output"] == "done"
        # A's handlers are all still blocked: B did not wait for them.
        assert not blocked.release.is_set()
        assert blocked.done == 0
        assert blocked.inside == share
    finally:
        blocked.release.set()
    result = await asyncio.wait_for(busy.result(), DEADLINE)
    assert result.status == "completed"
    assert blocked.done == 40
    assert blocked.peak == share  # the other 32 waited on the loop for a place


async def test_an_abandoned_handler_is_counted_and_named_until_it_returns() -> None:
    await until(lambda: abandoned_threads() == 0, "earlier tests' threads to return")
    share = _pool().share
    blocked = Blocked()
    graph = reactive({f"slow{i}": agent(run=blocked) for i in range(share)})
    with structlog.testing.capture_logs() as logs:
        result = await graph.run(timeout=0.3)
    try:
        assert result.status == "timeout"
        assert blocked.inside == share  # still running, in the background
        assert abandoned_threads() == share
        warnings = [
            line for line in logs if line["event"] == "handler abandoned in its worker thread"
        ]
        assert sorted(line["agent"] for line in warnings) == sorted(
            f"slow{i}" for i in range(share)
        )
        assert {line["run_id"] for line in warnings} == {result.run_id}
        assert sorted(line["abandoned_threads"] for line in warnings) == list(range(1, share + 1))
        assert {line["log_level"] for line in warnings} == {"warning"}
        # A new run's blocking handlers get their whole share while those still run.
        more = Blocked()
        handle = reactive({f"new{i}": agent(run=more) for i in range(share)}).start(keep_open=False)
        try:
            await until(lambda: more.inside == share, "the new run's whole share to start")
        finally:
            more.release.set()
        assert (await asyncio.wait_for(handle.result(), DEADLINE)).status == "completed"
    finally:
        blocked.release.set()
    await until(lambda: abandoned_threads() == 0, "the abandoned calls to return and be uncounted")
    assert blocked.done == share


async def test_a_runs_blocking_tools_take_its_share_and_are_counted_when_abandoned() -> None:
    await until(lambda: abandoned_threads() == 0, "earlier tests' threads to return")
    share = _pool().share
    blocked = Blocked()

    def hold(n: int) -> int:
        """Block until the test lets go."""
        blocked.block()
        return n

    calls = [ToolUse(f"t{n}", "hold", {"n": n}) for n in range(share + 2)]
    graph = reactive({"desk": agent(prompt="go", tools=[hold])})
    provider = fake_anthropic([turn(*calls), "done"])
    with structlog.testing.capture_logs() as logs:
        handle = graph.start(provider=provider, keep_open=False)
        try:
            await until(lambda: blocked.inside == share, "the run's share of tools to block")
            assert abandoned_threads() == 0
            handle.abort("enough")
            result = await asyncio.wait_for(handle.result(), DEADLINE)
            assert result.status == "aborted"
            assert abandoned_threads() == share  # the two waiting for a place never started
        finally:
            blocked.release.set()
    warnings = [
        line for line in logs if line["event"] == "tool 'hold' abandoned in its worker thread"
    ]
    assert len(warnings) == share
    assert {(line["agent"], line["run_id"]) for line in warnings} == {("desk", result.run_id)}
    await until(lambda: abandoned_threads() == 0, "the abandoned tools to return")
    assert blocked.peak == share


def test_the_pool_replaces_an_abandoned_thread_while_it_runs() -> None:
    pool = _Pool(2)
    release, started = threading.Event(), threading.Semaphore(0)

    def stuck() -> None:
        started.release()
        release.wait(DEADLINE)

    try:
        first, second = pool.submit(stuck), pool.submit(stuck)
        for _ in range(2):
            assert started.acquire(timeout=DEADLINE)
        queued = pool.submit(lambda: "ran")  # both threads are taken: it waits
        assert pool.abandon(first) == 1
        assert queued.future.result(timeout=DEADLINE) == "ran"  # a new thread took it
        assert pool.abandon(second) == 2
        assert pool.submit(lambda: "also").future.result(timeout=DEADLINE) == "also"
        assert pool.abandoned == 2
    finally:
        release.set()
    assert first.future.result(timeout=DEADLINE) is None
    assert second.future.result(timeout=DEADLINE) is None
    deadline = time.monotonic() + DEADLINE
    while pool.abandoned:
        assert time.monotonic() < deadline, "the abandoned calls were never uncounted"
        time.sleep(0.01)


def test_a_call_abandoned_before_it_starts_is_dropped_and_holds_no_thread() -> None:
    pool = _Pool(1)
    release, started = threading.Event(), threading.Event()
    ran: list[str] = []

    def stuck() -> None:
        started.set()
        release.wait(DEADLINE)

    try:
        pool.submit(stuck)
        assert started.wait(DEADLINE)
        waiting = pool.submit(lambda: ran.append("late"))
        assert pool.abandon(waiting) is None
        assert pool.abandoned == 0
        assert waiting.future.cancelled()
    finally:
        release.set()
    assert pool.submit(lambda: "next").future.result(timeout=DEADLINE) == "next"
    assert ran == []


def test_the_pool_size_and_the_share_come_from_reactor_handler_threads() -> None:
    script = textwrap.dedent(
        """
        import asyncio, collections, json, threading
        from reactor import agent, reactive

        lock, full = threading.Lock(), threading.Event()
        inside, peak = collections.Counter(), collections.Counter()
        names = set()

        def work(ctx):
            with lock:
                inside[ctx.run_id] += 1
                inside["all"] += 1
                for key in (ctx.run_id, "all"):
                    peak[key] = max(peak[key], inside[key])
                names.add(threading.current_thread().name)
                if inside["all"] == 6:  # every run holds its whole share
                    full.set()
            full.wait(60)
            with lock:
                inside[ctx.run_id] -= 1
                inside["all"] -= 1

        async def main():
            graphs = [reactive({f"h{i}": agent(run=work) for i in range(12)}) for _ in range(3)]
            results = await asyncio.gather(*(graph.run() for graph in graphs))
            return [result.status for result in results]

        statuses = asyncio.run(main())
        print(json.dumps({
            "statuses": statuses,
            "filled": full.is_set(),
            "peak": peak["all"],
            "run peaks": sorted(count for key, count in peak.items() if key != "all"),
            "threads": len(names),
        }))
        """
    )
    env = {**os.environ, "REACTOR_HANDLER_THREADS": "8"}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    seen: dict[str, Any] = json.loads(done.stdout)
    assert seen["statuses"] == ["completed"] * 3
    assert seen["filled"]
    assert seen["run peaks"] == [2, 2, 2]  # 8 // 4 each
    assert seen["peak"] == 6
    assert seen["threads"] <= 8

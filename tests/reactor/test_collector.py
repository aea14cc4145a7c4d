"""Full collections rarer only while the process has many runs in flight, once asked for.

Importing reactor and running graphs change nothing: that is
:mod:`tests.reactor.test_process_globals`.
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Callable, Iterator

import pytest

import reactor
from reactor import AgentContext, CollectorTuning, RunResult, agent, reactive

APP = (700, 10, 10)


@pytest.fixture(autouse=True)
def app_thresholds() -> Iterator[None]:
    """The application's own thresholds; each test leaves the process as it found it."""
    before = gc.get_threshold()
    gc.set_threshold(*APP)
    yield
    reactor.untune_gc()
    gc.set_threshold(*before)


class Parked:
    """Runs that wait inside an agent until released, to hold a number of them in flight."""

    def __init__(self) -> None:
        self.inside = 0
        self.expected = 0
        self.arrived = asyncio.Event()
        self.release = asyncio.Event()
        self.seen: list[tuple[int, int, int]] = []

        async def wait(ctx: AgentContext) -> str:
            self.inside += 1
            if self.inside == self.expected:
                self.arrived.set()
            await self.release.wait()
            self.seen.append(gc.get_threshold())
            return "done"

        self.graph = reactive({"wait": agent(run=wait, updates="out")}, state={"out": None})

    async def hold(self, n: int) -> list[asyncio.Task[RunResult]]:
        self.expected = self.inside + n
        self.arrived.clear()
        tasks = [asyncio.create_task(self.graph.run()) for _ in range(n)]
        await asyncio.wait_for(self.arrived.wait(), 5)
        return tasks


def tuning_for(extra_runs: int) -> CollectorTuning:
    """A tuning that is busy once ``extra_runs`` more runs than now are in flight."""
    in_flight = reactor.tune_gc().runs_in_flight
    return reactor.tune_gc(busy_at=in_flight + extra_runs)


async def test_full_collections_are_rarer_only_while_enough_runs_are_in_flight() -> None:
    tuning = tuning_for(3)
    parked = Parked()

    two = await parked.hold(2)
    assert "idle, " in repr(tuning)
    assert gc.get_threshold() == APP

    three = [*two, *await parked.hold(1)]
    assert tuning.busy
    assert gc.get_threshold() == (700, 10, 1_000)  # the young generations as they were

    parked.release.set()
    results = await asyncio.gather(*three)
    assert [r.state["out"] for r in results] == ["done"] * 3
    assert "idle, " in repr(tuning)
    assert gc.get_threshold() == APP


async def test_thresholds_the_application_sets_while_busy_are_kept() -> None:
    tuning_for(2)
    parked = Parked()
    tasks = await parked.hold(2)
    gc.set_threshold(900, 5, 20)
    parked.release.set()
    await asyncio.gather(*tasks)
    assert gc.get_threshold() == (900, 5, 20)


async def test_an_application_that_collects_less_already_is_left_alone() -> None:
    gc.set_threshold(700, 10, 5_000)
    tuning = tuning_for(1)
    parked = Parked()
    tasks = await parked.hold(1)
    assert gc.get_threshold() == (700, 10, 5_000)
    parked.release.set()
    await asyncio.gather(*tasks)
    assert gc.get_threshold() == (700, 10, 5_000)
    assert tuning.full_threshold == 1_000


@pytest.mark.parametrize(
    "stop",
    [CollectorTuning.undo, lambda tuning: reactor.untune_gc()],
    ids=["undo", "untune_gc"],
)
async def test_stopping_gives_the_thresholds_back_at_once(
    stop: Callable[[CollectorTuning], None],
) -> None:
    tuning = tuning_for(1)
    parked = Parked()
    tasks = await parked.hold(1)
    assert gc.get_threshold() == (700, 10, 1_000)
    stop(tuning)
    assert gc.get_threshold() == APP
    assert not tuning.busy
    more = await parked.hold(2)
    parked.release.set()
    await asyncio.gather(*tasks, *more)
    assert parked.seen == [APP] * 3


def test_the_earlier_names_are_aliases() -> None:
    assert reactor.tune_collector is reactor.tune_gc
    assert reactor.untune_collector is reactor.untune_gc


async def test_leaving_a_block_puts_the_tuning_before_back() -> None:
    parked = Parked()
    before = tuning_for(1)
    tasks = await parked.hold(1)
    with reactor.tune_gc(busy_at=before.busy_at, full_threshold=50):
        assert gc.get_threshold() == (700, 10, 50)
    assert gc.get_threshold() == (700, 10, 1_000)
    assert before.busy
    parked.release.set()
    await asyncio.gather(*tasks)
    assert gc.get_threshold() == APP


async def test_a_new_tuning_replaces_the_one_before() -> None:
    parked = Parked()
    first = tuning_for(1)
    tasks = await parked.hold(1)
    assert gc.get_threshold() == (700, 10, 1_000)
    second = reactor.tune_gc(busy_at=first.busy_at, full_threshold=50)
    assert gc.get_threshold() == (700, 10, 50)
    assert not first.busy
    assert second.busy
    first.undo()  # no longer installed: changes nothing now
    assert gc.get_threshold() == (700, 10, 50)
    second.undo()  # puts back the tuning before the first (not busy), not the first
    assert gc.get_threshold() == APP
    parked.release.set()
    await asyncio.gather(*tasks)
    assert gc.get_threshold() == APP
    assert repr(second).startswith("<CollectorTuning busy_at=")


async def test_a_failed_run_is_counted_out_too() -> None:
    tuning = tuning_for(1)
    before = tuning.runs_in_flight

    def fail(ctx: AgentContext) -> None:
        raise RuntimeError("boom")

    result = await reactive({"fail": agent(run=fail)}).run()
    assert result.status == "failed"
    assert tuning.runs_in_flight == before
    assert gc.get_threshold() == APP


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"busy_at": 0}, "tune_gc(busy_at=...) takes a whole number >= 1, got 0."),
        ({"full_threshold": -5}, "full_threshold=...) takes a whole number >= 1, got -5."),
        ({"busy_at": 2.5}, "got 2.5"),
        ({"busy_at": True}, "got True"),
    ],
)
def test_bad_settings_say_what_is_expected(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match="whole number") as raised:
        reactor.tune_gc(**kwargs)  # type: ignore[arg-type]
    assert message in str(raised.value)

"""The signal store contract as checks a store runs in its own tests.

``check_store_contract(make_store)`` records real runs to stores ``make_store()``
makes (each on an empty database) and checks, through the public
:class:`~reactor.typing.SignalStore` members only, what the engine and the service
rely on: a run reads back as it was recorded, in pages; runs are listed newest first,
ties broken the same way everywhere; ``resolve``, ``delete``, ``tag`` and ``prune``;
the inbox (messages due and scheduled, delivered once, payloads as they were posted);
a closed store refuses new runs. reactor's own stores (memory, SQLite, PostgreSQL) run
it in reactor's suite::

    from reactor.testing import check_store_contract

    def test_my_store_keeps_the_contract(tmp_path):
        check_store_contract(lambda: MyStore(tmp_path / f"{uuid.uuid4().hex}.db"))

Every check runs; the failures are reported together, each naming its check. What a
store declines (``NotImplementedError`` from ``tag``, ``prune`` or ``post``, as
:class:`~reactor.SignalStoreBase` does by default) is skipped, and listed in the
report, not failed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
import traceback
from collections.abc import Callable, Collection, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

from reactor._agents.agent import agent
from reactor._agents.context import AgentContext
from reactor._graph.reactive import Reactive, reactive
from reactor._recording.info import RunInfo
from reactor._recording.store import SignalStore, check_store
from reactor._signals.names import agent_event
from reactor._signals.signal import Signal, to_jsonable
from reactor.exceptions import RecordingError, RunNotFoundError

__all__ = ["ContractReport", "StoreContractError", "check_store_contract"]

MakeStore = Callable[[], SignalStore]


class StoreContractError(AssertionError):
    """A store broke the contract: every failed check, by name, with what it found.

    Attributes:
        report: What ran, failed and was skipped.
    """

    def __init__(self, report: ContractReport) -> None:
        lines = [f"{name}: {problem}" for name, problem in report.failed.items()]
        super().__init__(
            f"The store broke {len(lines)} of {len(report.ran)} contract checks:\n  - "
            + "\n  - ".join(lines)
        )
        self.report = report


@dataclasses.dataclass
class ContractReport:
    """What :func:`check_store_contract` found.

    Attributes:
        ran: The checks run, in order.
        failed: Each failed check, and what it found.
        skipped: Each check skipped, and why (what the store declined).
    """

    ran: list[str] = dataclasses.field(default_factory=list)
    failed: dict[str, str] = dataclasses.field(default_factory=dict)
    skipped: dict[str, str] = dataclasses.field(default_factory=dict)


class _Declined(Exception):
    """The store does not offer what a check is about (NotImplementedError)."""


def _ticks(ctx: AgentContext[Any]) -> int:
    count = int(ctx.input or 0)
    for number in range(count):
        ctx.emit("tick", {"n": number, "text": "é\u2603"})
    return count


def _graph(name: str) -> Reactive:
    return reactive(
        {"ticker": agent(run=_ticks, emits=["tick"], updates="count")},
        state={"count": 0},
        name=name,
    )


_GRAPHS = {name: _graph(name) for name in ("contract-a", "contract-b")}


@contextlib.contextmanager
def _opened(make_store: MakeStore) -> Iterator[SignalStore]:
    store = check_store(make_store(), "check_store_contract(make_store)")
    try:
        yield store
    finally:
        with contextlib.suppress(Exception):
            store.close()


def _record(store: SignalStore, graph: str = "contract-a", ticks: int = 3, **options: Any) -> str:
    result = _GRAPHS[graph].run_sync(input=ticks, record=store, **options)
    if not result.ok:
        raise AssertionError(f"the run to record did not complete: {result.error!r}")
    store.flush()
    return result.run_id


def _expect(found: Any, expected: Any, what: str) -> None:
    if found != expected:
        raise AssertionError(f"{what}: expected {expected!r}, found {found!r}")


def _declined(call: Callable[[], Any]) -> Any:
    try:
        return call()
    except NotImplementedError as exc:
        raise _Declined(str(exc)) from None


# -- the checks ------------------------------------------------------------------------


def a_run_reads_back_as_it_was_recorded(make_store: MakeStore) -> None:
    """Its signals in seq order with their payloads, its row's counters, its state."""
    with _opened(make_store) as store:
        result = _GRAPHS["contract-a"].run_sync(input=4, record=store, tags={"k": "v"})
        store.flush()
        _expect(store.recording_error(result.run_id), None, "recording_error after a flush")
        loaded = store.load(result.run_id)
        _expect([s.seq for s in loaded.signals], [s.seq for s in result.signals], "seqs")
        _expect([s.name for s in loaded.signals], [s.name for s in result.signals], "names")
        _expect(
            [to_jsonable(s.payload) for s in loaded.signals],
            [to_jsonable(s.payload) for s in result.signals],
            "payloads",
        )
        info = store.info(result.run_id)
        _expect(
            (info.status, info.graph, dict(info.tags)),
            ("completed", "contract-a", {"k": "v"}),
            "the run's status, graph and tags",
        )
        _expect(
            (info.signals, info.last_seq),
            (len(result.signals), result.signals[-1].seq),
            "the run's counters",
        )
        _expect(store.state(result.run_id), {"count": 4}, "the run's latest state")
        tail = store.load_tail(result.run_id)
        _expect([s.seq for s in tail.signals][-1], result.signals[-1].seq, "the tail's end")


def a_log_is_read_in_pages(make_store: MakeStore) -> None:
    """``signals(after=, before=, limit=, names=)`` pages through a log in seq order."""
    with _opened(make_store) as store:
        run_id = _record(store, ticks=20)
        page = store.signals(run_id, after=5, limit=10)
        _expect([s.seq for s in page], list(range(6, 16)), "signals(after=5, limit=10)")
        last = store.info(run_id).last_seq
        backward = store.signals(run_id, before=last + 1, limit=3)
        _expect([s.seq for s in backward], [last - 2, last - 1, last], "the last page (before=)")
        ticks = store.signals(run_id, names=["tick"], limit=1000)
        _expect(len(ticks), 20, "signals(names=['tick'])")
        patterned = store.signals(run_id, names=[agent_event("*", "completed")], limit=1000)
        completed = agent_event("ticker", "completed")
        _expect([s.name for s in patterned], [completed], "a pattern of names")
        _expect(store.signals(run_id, after=last), [], "a page after the end")


def runs_are_listed_newest_first_and_filtered(make_store: MakeStore) -> None:
    """``runs(graph=, tag=, status=, limit=)``, newest first."""
    with _opened(make_store) as store:
        first = _record(store, "contract-a", tags={"set": "x"})
        second = _record(store, "contract-b")
        third = _record(store, "contract-a")
        _expect([i.run_id for i in store.runs()][:3], [third, second, first], "newest first")
        _expect([i.run_id for i in store.runs(graph="contract-a")], [third, first], "by graph")
        _expect([i.run_id for i in store.runs(tag="set=x")], [first], "by tag")
        _expect(len(store.runs(status="completed")), 3, "by status")
        _expect(store.runs(status="failed"), [], "by a status no run has")
        _expect([i.run_id for i in store.runs(limit=1)], [third], "limit=1")


def ties_are_broken_by_run_id(make_store: MakeStore) -> None:
    """Runs started at the same moment: the greater run id counts as the newer (``last``)."""
    with _opened(make_store) as store:
        moment = time.time()
        for run_id in ("run_tie_b", "run_tie_a", "run_tie_c"):
            store.start_run(RunInfo(run_id, graph="ties", started_at=moment))
        store.flush()
        listed = [i.run_id for i in store.runs(graph="ties")]
        _expect(listed, ["run_tie_c", "run_tie_b", "run_tie_a"], "runs() of a tie")
        _expect(store.resolve("last"), "run_tie_c", "resolve('last') of a tie")


def runs_are_resolved_from_an_id_a_prefix_or_last(make_store: MakeStore) -> None:
    """``resolve``: an id, a unique prefix, ``last``; else ``RunNotFoundError``."""
    with _opened(make_store) as store:
        older = _record(store)
        newer = _record(store)
        _expect(store.resolve(older), older, "resolve(an id)")
        _expect(store.resolve("last"), newer, "resolve('last')")
        prefix = next(
            older[:n] for n in range(5, len(older) + 1) if not newer.startswith(older[:n])
        )
        _expect(store.resolve(prefix), older, "resolve(a unique prefix)")
        for ref in ("run_", "run_nothing_like_it"):
            try:
                store.resolve(ref)
            except RunNotFoundError:
                continue
            raise AssertionError(f"resolve({ref!r}) found a run; it is ambiguous or unknown")


def an_unknown_run_is_not_found(make_store: MakeStore) -> None:
    """``info``, ``load`` and ``signals`` of a run never recorded raise ``RunNotFoundError``."""
    with _opened(make_store) as store:
        for name, read in (
            ("info", store.info),
            ("load", store.load),
            ("signals", store.signals),
        ):
            try:
                read("run_never_recorded")
            except RunNotFoundError:
                continue
            raise AssertionError(f"{name}() of an unknown run raised nothing")


def a_run_is_deleted_whole(make_store: MakeStore) -> None:
    """``delete`` says whether the run was there, and nothing of it is left."""
    with _opened(make_store) as store:
        kept, gone = _record(store), _record(store)
        _expect(store.delete(gone), True, "delete(a run)")
        _expect(store.delete(gone), False, "delete(it again)")
        _expect([i.run_id for i in store.runs()], [kept], "runs() after it")
        try:
            store.info(gone)
        except RunNotFoundError:
            return
        raise AssertionError("info() of a deleted run still answers")


def tags_are_set_and_dropped(make_store: MakeStore) -> None:
    """``tag(run, {...}, remove=[...])`` changes the run's tags; its info says so."""
    with _opened(make_store) as store:
        run_id = _record(store, tags={"a": "1", "b": "2"})
        info = _declined(lambda: store.tag(run_id, {"b": "3", "dataset": "golden"}, remove=["a"]))
        _expect(dict(info.tags), {"b": "3", "dataset": "golden"}, "the tags it answers")
        _expect(dict(store.info(run_id).tags), {"b": "3", "dataset": "golden"}, "info's tags")
        _expect([i.run_id for i in store.runs(tag="dataset=golden")], [run_id], "runs(tag=)")
        try:
            store.tag("run_never_recorded", {"x": "y"})
        except RunNotFoundError:
            return
        raise AssertionError("tag() of an unknown run raised nothing")


def ended_runs_are_pruned(make_store: MakeStore) -> None:
    """``prune(older_than=, keep_last=, dry_run=)`` deletes ended runs, whole."""
    with _opened(make_store) as store:
        runs = [_record(store) for _ in range(3)]
        would = _declined(lambda: store.prune(older_than=timedelta(0), dry_run=True))
        _expect(would, 3, "prune(dry_run=True)")
        _expect(len(store.runs()), 3, "runs() after a dry run")
        _expect(store.prune(older_than=timedelta(0), keep_last=1), 2, "prune(keep_last=1)")
        _expect([i.run_id for i in store.runs()], runs[-1:], "the run kept")
        _expect(store.prune(older_than=timedelta(days=1)), 0, "prune of what is newer")


def the_inbox_delivers_each_message_once(make_store: MakeStore) -> None:
    """``post`` (now, or ``at=``), ``undelivered``, ``scheduled``, ``wakeups``, ``deliver``."""
    with _opened(make_store) as store:
        run_id = "run_inbox_check"
        store.start_run(RunInfo(run_id, graph="inbox", started_at=time.time()))
        store.flush()
        payload = {"nested": [1, {"é": "\u2603"}], "n": 1.5, "none": None, "flag": True}
        now = _declined(lambda: store.post(run_id, "note", payload, source="alice"))
        later = datetime.now(UTC) + timedelta(hours=1)
        scheduled = store.post(run_id, "later", {"x": 1}, at=later)
        due = store.undelivered([run_id])
        _expect(
            [(p.message_id, p.name, p.source) for p in due],
            [(now, "note", "alice")],
            "undelivered()",
        )
        _expect(to_jsonable(due[0].payload), payload, "a posted payload, as it was posted")
        _expect([p.message_id for p in store.scheduled([run_id])], [scheduled], "scheduled()")
        waiting = {p.message_id for p in store.waiting_messages([run_id])}
        _expect(waiting, {now, scheduled}, "waiting_messages()")
        woken = [w.run_id for w in store.wakeups(before=later + timedelta(minutes=1))]
        _expect(woken, [run_id], "wakeups(before=) of the scheduled message")
        _expect(store.wakeups(before=later - timedelta(minutes=1)), [], "wakeups() not due")
        store.deliver(now, Signal(due[0].name, due[0].payload, seq=1, run_id=run_id))
        store.flush()
        _expect(store.undelivered([run_id]), [], "undelivered() once it is delivered")


def a_closed_store_refuses_new_runs(make_store: MakeStore) -> None:
    """After ``close()``, ``start_run`` raises ``RecordingError``: nothing is lost silently."""
    store = check_store(make_store(), "check_store_contract(make_store)")
    store.close()
    try:
        store.start_run(RunInfo("run_after_close", graph="closed", started_at=time.time()))
    except RecordingError:
        return
    raise AssertionError("start_run() on a closed store raised nothing")


def backpressure_and_watches_are_offered(make_store: MakeStore) -> None:
    """``room()`` is ``None`` or a future; ``watch_recording`` gives an unwatch."""
    with _opened(make_store) as store:
        room = store.room()
        if room is not None and not hasattr(room, "add_done_callback"):
            raise AssertionError(f"room() gave {room!r}: None, or a future of the loop")
        run_id = _record(store)
        unwatch = store.watch_recording(run_id, lambda: None)
        if not callable(unwatch):
            raise AssertionError("watch_recording() gave no function to stop watching")
        unwatch()
        if store.snapshot_every is not None and store.snapshot_every < 1:
            raise AssertionError(f"snapshot_every is {store.snapshot_every}: None, or >= 1")


CHECKS: tuple[Callable[[MakeStore], None], ...] = (
    a_run_reads_back_as_it_was_recorded,
    a_log_is_read_in_pages,
    runs_are_listed_newest_first_and_filtered,
    ties_are_broken_by_run_id,
    runs_are_resolved_from_an_id_a_prefix_or_last,
    an_unknown_run_is_not_found,
    a_run_is_deleted_whole,
    tags_are_set_and_dropped,
    ended_runs_are_pruned,
    the_inbox_delivers_each_message_once,
    a_closed_store_refuses_new_runs,
    backpressure_and_watches_are_offered,
)
"""Every check, in the order they run."""


def check_store_contract(
    make_store: MakeStore, *, only: Collection[str] | None = None
) -> ContractReport:
    """Check that the stores ``make_store()`` makes keep the signal store contract.

    Call it from a synchronous test: it records runs with ``run_sync``.

    Args:
        make_store: Makes a store on an empty database (it is called once per check,
            and closed after it).
        only: The names of the checks to run (all of them by default).

    Returns:
        What ran, and what was skipped because the store declined it.

    Raises:
        StoreContractError: Some check failed (all of them are named, with what each
            found).
    """
    report = ContractReport()
    for check in CHECKS:
        name = check.__name__
        if only is not None and name not in only:
            continue
        report.ran.append(name)
        try:
            check(make_store)
        except _Declined as declined:
            report.skipped[name] = str(declined)
        except Exception as exc:
            where = traceback.extract_tb(exc.__traceback__)[-1]
            report.failed[name] = f"{type(exc).__name__}: {exc} (line {where.lineno})"
    if report.failed:
        raise StoreContractError(report)
    return report

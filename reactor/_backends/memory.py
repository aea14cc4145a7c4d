"""Recordings in memory: for tests, notebooks and replaying within a process.

The runs kept here are not hash-chained (``reactor._recording.chain``): a chain shows
an edit made behind the writer's back, in a database others can reach, and whoever can
change this process's memory can change the code that would check a chain too.
"""

from __future__ import annotations

import bisect
import dataclasses
import json
import threading
import time
from collections.abc import Collection, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from reactor._backends.tally import Tally, merged_state
from reactor._recording.inbox import (
    Posted,
    Wakeup,
    check_posted,
    decode_payload,
    due_time,
    encode_payload,
    new_message_id,
)
from reactor._recording.info import (
    RunInfo,
    matches_filters,
    pending_timers,
    prune_bounds,
    retagged,
)
from reactor._recording.log import latest_snapshot, needed_seqs
from reactor._recording.recording import Recording
from reactor._recording.store import DEFAULT_SNAPSHOT_EVERY, PAGE, check_snapshot_every
from reactor._recording.storebase import SignalStoreBase, page_of
from reactor._signals.names import HARNESS_END
from reactor._signals.patterns import Pattern
from reactor._signals.signal import Signal
from reactor.exceptions import RecordingError, RunNotFoundError

__all__ = ["MemorySignalStore"]


class MemorySignalStore(SignalStoreBase):
    """Recordings in memory: for tests, notebooks and replaying within a process.

    Args:
        snapshot_every: A run recorded here writes a ``harness:snapshot`` every this
            many signals (``None``: never).
    """

    def __init__(self, *, snapshot_every: int | None = DEFAULT_SNAPSHOT_EVERY) -> None:
        self.snapshot_every = check_snapshot_every(snapshot_every)
        self._infos: dict[str, RunInfo] = {}
        self._signals: dict[str, list[Signal]] = {}
        self._tallies: dict[str, Tally] = {}  # each run's counters, kept as it is written
        self._requests: dict[str, dict[str, Any]] = {}
        self._inbox: list[Posted] = []
        self._delivered: set[str] = set()
        self._lock = threading.Lock()  # posts may come from other threads
        self._closed = False

    def start_run(self, info: RunInfo) -> None:
        """Register a run about to be recorded.

        Raises:
            RecordingError: The store is closed (its runs are still read).
        """
        if self._closed:
            raise RecordingError("The memory signal store is closed: it takes no new runs.")
        self._infos[info.run_id] = info
        self._signals.setdefault(info.run_id, [])
        self._requests.setdefault(info.run_id, {})

    def append(self, signal: Signal) -> None:
        """Record one signal."""
        run_id = signal.run_id or "unbound"
        self._signals.setdefault(run_id, []).append(signal)
        tally = self._tallies.get(run_id)
        if tally is None:
            tally = self._tallies[run_id] = Tally()
        tally.add(signal, run_id)

    def info(self, run_id: str) -> RunInfo:
        """What the store knows of the run, its counters included.

        Raises:
            RunNotFoundError: No such run.
        """
        if run_id not in self._signals:
            raise RunNotFoundError(f"No recorded run {run_id!r} in this MemorySignalStore.")
        return self._info(run_id)

    def signals(
        self,
        run_id: str,
        *,
        after: int = 0,
        before: int | None = None,
        limit: int = PAGE,
        names: Collection[Pattern] | None = None,
    ) -> list[Signal]:
        """One page of the run's log (see :class:`SignalStoreBase`), payloads as JSON data.

        Raises:
            RunNotFoundError: No such run.
            ValueError: A bound is not a seq, or ``limit`` < 1.
        """
        found = self._signals.get(run_id)
        if found is None:
            raise RunNotFoundError(f"No recorded run {run_id!r} in this MemorySignalStore.")
        page = page_of(found, after=after, before=before, limit=limit, names=names)
        return [Signal.from_dict(signal.to_dict()) for signal in page]

    def state(self, run_id: str) -> dict[str, Any]:
        """The run's latest state, kept as it is written.

        Raises:
            RunNotFoundError: No such run.
        """
        if run_id not in self._signals:
            raise RunNotFoundError(f"No recorded run {run_id!r} in this MemorySignalStore.")
        tally = self._tallies.get(run_id)
        if tally is None:
            return {}
        start = tally.started.get(run_id)
        state: dict[str, Any] = json.loads(merged_state(start, tally.changes.get(run_id, {})))
        return state

    def record_request(self, run_id: str, request_hash: str, fingerprint: dict[str, Any]) -> None:
        """Keep what a provider was asked (for replay mismatch messages)."""
        self._requests.setdefault(run_id, {})[request_hash] = fingerprint

    def flush(self) -> None:
        """Nothing to flush: appends are immediate."""

    def load(self, run_id: str) -> Recording:
        """Return the recording of ``run_id``.

        Raises:
            RunNotFoundError: No such run.
        """
        if run_id not in self._signals:
            raise RunNotFoundError(f"No recorded run {run_id!r} in this MemorySignalStore.")
        return Recording.from_signals(
            self._signals[run_id], info=self._info(run_id), requests=self._requests.get(run_id)
        )

    def load_tail(self, run_id: str) -> Recording:
        """The run from its latest ``harness:snapshot`` on (see :class:`SignalStoreBase`).

        Raises:
            RunNotFoundError: No such run.
        """
        signals = self._signals.get(run_id)
        if signals is None:
            raise RunNotFoundError(f"No recorded run {run_id!r} in this MemorySignalStore.")
        snapshot = latest_snapshot(signals)
        after = int(snapshot.payload["seq"]) if snapshot is not None else 0
        needs = set(needed_seqs(snapshot.payload.get("needs") or ())) if snapshot else set()
        tail = [s for s in signals if s.seq in needs]
        tail += signals[bisect.bisect_right(signals, after, key=lambda s: s.seq) :]
        return Recording.from_signals(
            tail, info=self._info(run_id), requests=self._requests.get(run_id)
        )

    def prune(
        self,
        *,
        older_than: timedelta,
        status: Collection[str] | None = ("completed",),
        keep_last: int = 0,
        dry_run: bool = False,
    ) -> int:
        """Forget ended runs older than ``older_than``; how many (see :class:`SignalStoreBase`).

        Raises:
            ValueError: A status is not one a run ends with, or a bound is negative.
        """
        cutoff, statuses = prune_bounds(older_than, status, keep_last)
        ended = [info for info in self.runs() if info.ended_at is not None]
        kept: dict[str | None, int] = {}
        doomed = []
        for info in ended:  # newest first
            if statuses is not None and info.status not in statuses:
                continue
            kept[info.graph] = kept.get(info.graph, 0) + 1
            if (
                kept[info.graph] > keep_last
                and info.ended_at is not None
                and info.ended_at < cutoff
            ):
                doomed.append(info.run_id)
        if not dry_run:
            with self._lock:
                for run_id in doomed:
                    self.delete(run_id)
                    self._inbox = [m for m in self._inbox if m.run_id != run_id]
        return len(doomed)

    def _info(self, run_id: str) -> RunInfo:
        info = self._infos.get(run_id) or RunInfo(run_id=run_id)
        signals = self._signals.get(run_id, [])
        tally = self._tallies.get(run_id) or Tally()
        end = signals[-1] if signals and signals[-1].name == HARNESS_END else None
        spent = tally.spent.get(run_id, (0, 0, 0.0))
        return RunInfo(
            run_id=run_id,
            graph=info.graph,
            tags=info.tags,
            started_at=info.started_at or (signals[0].timestamp if signals else 0.0),
            ended_at=end.timestamp if end else None,
            status=end.payload["status"] if end else self._open_status(run_id, tally),
            last_seq=signals[-1].seq if signals else 0,
            input_tokens=spent[0],
            output_tokens=spent[1],
            cost_usd=None if spent[2] is None else round(spent[2], 6),
            prompts=max(0, tally.prompts.get(run_id, 0)),
            reason=end.payload["reason"] if end else None,
            failures=int(end.payload.get("failures") or 0) if end else 0,
            signals=len(signals),
            target=info.target,
            target_hash=info.target_hash,
            parent_run_id=info.parent_run_id,
            forked_from=info.forked_from,
        )

    def _open_status(self, run_id: str, tally: Tally) -> str:
        """``waiting`` while a question, a timer or a scheduled message is pending."""
        fired = {timer_id for _, timer_id in tally.timers.fired}
        timers = any(timer_id not in fired for _, timer_id, _, _ in tally.timers.set)
        if tally.prompts.get(run_id, 0) > 0 or timers:
            return "waiting"
        if any(m.due_at is not None for m in self._waiting([run_id])):
            return "waiting"  # for a scheduled message
        return "running"

    def runs(
        self,
        *,
        graph: str | None = None,
        tag: str | None = None,
        status: str | None = None,
        limit: int | None = None,
    ) -> list[RunInfo]:
        """Recorded runs, newest first, optionally filtered by graph, tag or status."""
        infos = [self._info(run_id) for run_id in self._signals]
        found = [i for i in infos if matches_filters(i, graph=graph, tag=tag, status=status)]
        found.sort(key=lambda info: (info.started_at, info.run_id), reverse=True)
        return found[:limit] if limit is not None else found

    def close(self) -> None:
        """Take no new runs (what was recorded is still read)."""
        self._closed = True

    def tag(
        self, run_id: str, tags: Mapping[str, str] | None = None, *, remove: Collection[str] = ()
    ) -> RunInfo:
        """Set and drop a run's tags; its info after (see :class:`SignalStoreBase`)."""
        with self._lock:
            if run_id not in self._signals:
                raise RunNotFoundError(f"No run {run_id!r} in this memory store.")
            info = self._infos.get(run_id) or RunInfo(run_id=run_id)
            new_tags = retagged(info.tags, tags, remove)
            self._infos[run_id] = dataclasses.replace(info, tags=new_tags)
        return self.info(run_id)

    def delete(self, run_id: str) -> bool:
        """Forget a run; return whether it existed."""
        self._infos.pop(run_id, None)
        self._tallies.pop(run_id, None)
        self._requests.pop(run_id, None)
        return self._signals.pop(run_id, None) is not None

    def post(
        self,
        run_id: str,
        name: str,
        payload: Any = None,
        *,
        source: str = "user",
        at: datetime | None = None,
    ) -> str:
        """Queue a signal for a run (due at ``at``); its id (see :class:`SignalStore`)."""
        check_posted(name, payload)
        due = due_time(at)
        message = Posted(
            new_message_id(),
            run_id,
            name,
            decode_payload(encode_payload(payload)),
            source,
            time.time(),
            due,
        )
        with self._lock:
            self._inbox.append(message)
        return message.message_id

    def undelivered(self, run_ids: Collection[str]) -> list[Posted]:
        """Messages posted to these runs, due and not yet delivered, in order (of due time)."""
        now = time.time()
        return [m for m in self._waiting(run_ids) if m.due_at is None or m.due_at <= now]

    def scheduled(self, run_ids: Collection[str]) -> list[Posted]:
        """Messages posted to these runs with ``at=`` and not due yet, soonest first."""
        now = time.time()
        return [m for m in self._waiting(run_ids) if m.due_at is not None and m.due_at > now]

    def waiting_messages(self, run_ids: Collection[str]) -> list[Posted]:
        """Messages posted to these runs and not delivered, due or not, in order."""
        return self._waiting(run_ids)

    def _waiting(self, run_ids: Collection[str]) -> list[Posted]:
        wanted = set(run_ids)
        with self._lock:
            found = [
                m for m in self._inbox if m.run_id in wanted and m.message_id not in self._delivered
            ]
        return sorted(found, key=lambda m: m.posted_at if m.due_at is None else m.due_at)

    def wakeups(self, *, before: datetime | None = None) -> list[Wakeup]:
        """Runs not ended with a timer or a scheduled message, and its time, soonest first."""
        limit = due_time(before)
        found = []
        for run_id, signals in list(self._signals.items()):
            if signals and signals[-1].name == HARNESS_END:
                continue
            times = [timer.until.timestamp() for timer in pending_timers(signals)]
            times += [m.due_at for m in self._waiting([run_id]) if m.due_at is not None]
            if times and (limit is None or min(times) < limit):
                found.append(Wakeup(run_id, datetime.fromtimestamp(min(times), UTC)))
        return sorted(found, key=lambda wakeup: (wakeup.due_at, wakeup.run_id))

    def deliver(self, message_id: str, signal: Signal) -> None:
        """Record a posted message's signal and mark the message delivered."""
        with self._lock:
            self._delivered.add(message_id)
        self.append(signal)

    def __repr__(self) -> str:
        return f"<MemorySignalStore runs={len(self._signals)}>"

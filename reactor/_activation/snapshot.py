"""A fold as JSON data and back: the payload of ``harness:snapshot``.

A snapshot says what a resume needs as it was right after signal ``seq`` (see
:mod:`reactor._activation.fold`): ``input``, ``state``, ``fingerprints`` and
``progress`` (the activations in flight with the answers their log gave, the decisions
not made yet, the questions asked and their outcomes, the mailboxes, the counters, and
one entry per extra section). Signals inside it are compact lists (:func:`encode_signal`).
It is sealed with the hash of its content (``reactor._recording.seals``): a reader
skips a snapshot that was changed after it was taken.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from reactor._activation.admitting import batch_seqs
from reactor._activation.fold import Flight, LogFold, Prompt, Routes
from reactor._providers.base import End, Usage
from reactor._recording.log import needed_seqs
from reactor._recording.seals import seal
from reactor._signals.signal import Signal, to_jsonable
from reactor.exceptions import RecordingError

__all__ = ["decode_signal", "encode_signal", "fold_from", "snapshot_of"]


def encode_signal(signal: Signal) -> list[Any]:
    """A signal as compact JSON data (its run id is the run's, so it is left out)."""
    return [
        signal.seq,
        signal.id,
        signal.name,
        to_jsonable(signal.payload),
        signal.timestamp,
        signal.source,
        signal.caused_by,
        signal.depth,
    ]


def decode_signal(data: Sequence[Any], run_id: str | None) -> Signal:
    """The signal :func:`encode_signal` encoded, in run ``run_id``."""
    seq, signal_id, name, payload, timestamp, source, caused_by, depth = data
    return Signal(
        name,
        payload,
        id=signal_id,
        seq=seq,
        timestamp=timestamp,
        source=source,
        caused_by=caused_by,
        depth=depth,
        run_id=run_id,
    )


def snapshot_of(fold: LogFold) -> dict[str, Any]:
    """What ``fold`` keeps, as JSON data, sealed: the payload of ``harness:snapshot``."""
    live = fold.flights
    progress: dict[str, Any] = {
        "launched": dict(fold.launched),
        "flights": [_dump_flight(flight) for flight in live.values()],
        "open_calls": {key: value for key, value in fold.open_calls.items() if key in live},
        "calls": {
            key: [owner, to_jsonable(arguments)]
            for key, (owner, arguments) in fold.calls.items()
            if owner in live
        },
        "prompts": [
            [prompt_id, p.owner, encode_signal(p.asked), p.answered, p.timed_out, p.reply]
            for prompt_id, p in fold.prompts.items()
        ],
        "tokens": list(fold.tokens),
        "cost_usd": fold.cost_usd,
        "undecided": _runs([(s.seq, agents) for s, agents in fold.undecided.values()]),
        "mailboxes": to_jsonable(fold.mailboxes),
        "sections": {key: section.dump() for key, section in fold.sections.items()},
    }
    # A resume gives an activation in flight its batch again: the snapshot names those
    # triggers in ``needs``, so that a store reading the run's tail reads them too.
    batched = sorted(
        {seq for flight in live.values() for seq in batch_seqs(flight.activated) or ()}
    )
    needs = [*progress["undecided"], *_runs([(seq, ()) for seq in batched])]
    return seal(
        {
            "seq": fold.seq,
            "needs": [run[:3] for run in needs],
            "input": to_jsonable(fold.input),
            "state": to_jsonable(fold.state),
            "fingerprints": fold.fingerprints,
            "progress": progress,
        }
    )


def fold_from(
    snapshot: Mapping[str, Any],
    agents: Sequence[str],
    routes: Routes,
    run_id: str | None,
    earlier: Callable[[int], Signal | None],
) -> LogFold:
    """The fold a ``harness:snapshot`` payload holds, ready to fold what came after it.

    ``earlier(seq)`` finds a signal from before the snapshot that it names in ``needs``
    (a trigger some agent had not decided on yet).

    Raises:
        RecordingError: A signal the snapshot needs is not in the log that was read.
    """
    fold = LogFold(agents, routes, run_id)
    fold.seq = int(snapshot["seq"])
    fold.input = snapshot.get("input")
    fold.state = dict(snapshot.get("state") or {})
    fold.know(snapshot.get("fingerprints"))
    progress = snapshot.get("progress") or {}
    fold.launched = {str(k): int(v) for k, v in progress["launched"].items()}
    for data in progress["flights"]:
        flight = _load_flight(data, run_id)
        fold.flights[flight.activated.id] = flight
        for owned in flight.owned:
            fold.owners[owned] = flight.activated.id
    fold.open_calls = dict(progress["open_calls"])
    fold.calls = {key: (owner, arguments) for key, (owner, arguments) in progress["calls"].items()}
    for prompt_id, owner, asked, answered, timed_out, reply in progress["prompts"]:
        prompt = Prompt(owner, decode_signal(asked, run_id))
        prompt.answered, prompt.timed_out, prompt.reply = answered, timed_out, reply
        fold.prompts[prompt_id] = prompt
    fold.tokens = [int(n) for n in progress["tokens"]]
    fold.cost_usd = progress["cost_usd"]
    for first, step, count, deciding in progress["undecided"]:
        for seq in needed_seqs([(first, step, count)]):
            signal = earlier(seq)
            if signal is None:
                raise RecordingError(
                    f"The snapshot of run {run_id} at signal {fold.seq} needs signal {seq}, "
                    "which the log read does not have; load the whole run (store.load) "
                    "to resume it."
                )
            fold.undecided[signal.id] = (signal, tuple(deciding))
    fold.mailboxes = {str(k): list(v) for k, v in progress["mailboxes"].items()}
    for key, data in (progress.get("sections") or {}).items():
        section = fold.sections.get(key)
        if section is not None:
            section.load(data)
    return fold


def _runs(pending: Sequence[tuple[int, Sequence[str]]]) -> list[list[Any]]:
    """``(seq, agents)`` in ``seq`` order as runs ``[first, step, count, agents]``.

    A burst of triggers queued behind a busy agent (thousands of them, every few
    signals) takes a few numbers, not a signal each.
    """
    runs: list[list[Any]] = []
    last: list[Any] = [0, 0, 0, None]
    for seq, agents in pending:
        first, step, count, deciding = last
        if deciding is agents or deciding == agents:
            if count == 1:
                last[1], last[2] = seq - first, 2
                continue
            if seq == first + step * count:
                last[2] = count + 1
                continue
        last = [seq, 0, 1, agents]
        runs.append(last)
    return [[first, step, count, list(agents)] for first, step, count, agents in runs]


def _dump_flight(flight: Flight) -> dict[str, Any]:
    return {
        "agent": flight.agent,
        "activated": encode_signal(flight.activated),
        "trigger": encode_signal(flight.trigger),
        "index": flight.index,
        "ends": [
            [
                digest,
                to_jsonable(end.output),
                [end.usage.input_tokens, end.usage.output_tokens],
                end.cost_usd,
                end.stop_reason,
            ]
            for digest, end in flight.ends
        ],
        "tools": [[n, to_jsonable(i), to_jsonable(r), e] for n, i, r, e in flight.tools],
        "prompts": list(flight.prompts),
        "owned": list(flight.owned),
    }


def _load_flight(data: Mapping[str, Any], run_id: str | None) -> Flight:
    flight = Flight(
        str(data["agent"]),
        decode_signal(data["activated"], run_id),
        decode_signal(data["trigger"], run_id),
        int(data["index"]),
    )
    for digest, output, (used_in, used_out), cost, stop in data["ends"]:
        end = End(output=output, usage=Usage(used_in, used_out), cost_usd=cost, stop_reason=stop)
        flight.ends.append((digest, end))
    flight.tools = [(name, i, r, e) for name, i, r, e in data["tools"]]
    flight.prompts = list(data["prompts"])
    flight.owned = list(data["owned"])
    return flight

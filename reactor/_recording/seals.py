"""Snapshots a reader can trust: each carries a hash of its content, checked when read.

A ``harness:snapshot`` stands in for every signal before it: a resume, ``state_at``
and a store's tail start from it instead of folding the log. A snapshot that lies (its
state edited in the database by hand, a row damaged, a payload that is not what a
snapshot holds) would make all of them lie, silently, or fail with a bare
``KeyError``. So :func:`seal` adds ``hash`` to a snapshot's payload when it is taken:
the SHA-256 of everything else in it (the state, the fold's progress and sections) as
canonical JSON text. :func:`sound` checks a snapshot read back: a payload that is not
a JSON object, content that does not match its hash, a key a reader needs missing or
of the wrong type, or a claim to hold signals that come after it. It logs what is
wrong (once per run and snapshot, at warning, naming both) and says no: the reader
skips it and starts from the snapshot before it, or from the start.

A snapshot recorded before snapshots were sealed has no ``hash``: its shape is
checked, and its content is trusted as it is.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from reactor._signals.diagnostics import log
from reactor._signals.signal import Signal, to_jsonable

__all__ = ["HASH", "seal", "skip", "snapshot_problem", "sound"]

HASH = "hash"
"""The key of a snapshot's payload that holds the hash of the rest of it."""

_ALGORITHM = "sha256:"

_PROGRESS: tuple[tuple[str, type, str], ...] = (
    ("launched", Mapping, "object"),
    ("flights", list, "array"),
    ("open_calls", Mapping, "object"),
    ("calls", Mapping, "object"),
    ("prompts", list, "array"),
    ("tokens", list, "array"),
    ("undecided", list, "array"),
    ("mailboxes", Mapping, "object"),
)
"""What a resume reads of a snapshot's ``progress``, and the JSON type of each."""

_WARNED: dict[tuple[str | None, int], None] = {}
"""Snapshots already reported as skipped (run id, seq): a reader skips one often."""
_WARNED_MAX = 1_024


def seal(payload: Mapping[str, Any]) -> dict[str, Any]:
    """``payload`` (a snapshot's) as plain JSON data, with the hash of its content.

    The hash is of what a store will hold (the payload as JSON data), so that the same
    content read back from any store hashes the same.
    """
    content: dict[str, Any] = to_jsonable({k: v for k, v in payload.items() if k != HASH})
    return {**content, HASH: _digest(content)}


def snapshot_problem(payload: Any) -> str | None:
    """What is wrong with a snapshot's payload for a reader, or ``None`` when nothing is.

    A payload with a ``hash`` must match it; one without (recorded before snapshots
    were sealed) is only checked for its shape.
    """
    if not isinstance(payload, Mapping):
        return f"its payload is {type(payload).__name__}, not a JSON object"
    if HASH in payload and payload[HASH] != _digest(payload):
        return "its content does not match its hash (it was changed after it was taken)"
    seq = payload.get("seq")
    if not isinstance(seq, int) or isinstance(seq, bool) or seq < 0:
        return "its seq is missing or not a whole number"
    if not isinstance(payload.get("state"), Mapping):
        return "its state is missing or not a JSON object"
    needs = payload.get("needs")
    if not isinstance(needs, list) or not all(_is_run(need) for need in needs):
        return "its needs are missing or not runs of signal numbers"
    progress = payload.get("progress")
    if not isinstance(progress, Mapping):
        return "its progress is missing or not a JSON object"
    for key, kind, shown in _PROGRESS:
        if not isinstance(progress.get(key), kind):
            return f"its progress.{key} is missing or not a JSON {shown}"
    return None


def sound(snapshot: Signal) -> bool:
    """Whether a reader may start from ``snapshot``; if not, a warning says why.

    Besides :func:`snapshot_problem`, a snapshot must hold signals from before it: it
    is taken after signal ``seq`` and comes after it in the log.
    """
    problem = snapshot_problem(snapshot.payload)
    if problem is None and snapshot.payload["seq"] >= snapshot.seq:
        problem = f"it claims to hold signal {snapshot.payload['seq']}, which comes after it"
    if problem is None:
        return True
    skip(snapshot, problem)
    return False


def skip(snapshot: Signal, problem: str) -> None:
    """Say that a reader skips ``snapshot``, and why (once per run and snapshot)."""
    key = (snapshot.run_id, snapshot.seq)
    if key in _WARNED:
        return
    if len(_WARNED) >= _WARNED_MAX:
        _WARNED.clear()
    _WARNED[key] = None
    log(
        "reactor.recording",
        "warning",
        "snapshot skipped",
        run_id=snapshot.run_id,
        seq=snapshot.seq,
        problem=problem,
        hint="the run is read from the snapshot before it (or from its start) instead",
    )


def _digest(payload: Mapping[str, Any]) -> str:
    """The hash of a payload's content (everything but its ``hash``), canonical JSON."""
    content = {key: value for key, value in payload.items() if key != HASH}
    try:
        text = _canonical(content)
    except (TypeError, ValueError):  # not plain JSON data (non-string keys, a model...)
        text = _canonical(to_jsonable(content))
    return _ALGORITHM + hashlib.sha256(text.encode()).hexdigest()


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False)


def _is_run(need: Any) -> bool:
    return (
        isinstance(need, list)
        and len(need) == 3
        and all(isinstance(n, int) and not isinstance(n, bool) for n in need)
    )

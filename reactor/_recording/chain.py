"""Hash chains: logs whose every entry is linked to the one before it, so that edits show.

Each run's signals (in the SQL signal stores), the service's processing history and
its object events are chained as they are written: every entry stores

    hash = H(previous hash || canonical JSON of the entry)

where ``previous hash`` is the text of the hash stored with the entry before it in its
chain (nothing for the first entry), and H is HMAC-SHA-256 keyed with
``REACTOR_AUDIT_KEY`` when it is set, SHA-256 otherwise. The stored hash names its
algorithm: ``hmac-sha256:<hex>`` or ``sha256:<hex>``, so that a verifier knows which
one to recompute (and says when it needs the key).

The canonical JSON of an entry is an object with its keys sorted, no spaces, non-ASCII
text as UTF-8 (Python's ``json.dumps(entry, sort_keys=True, separators=(",", ":"),
ensure_ascii=False)``), made of what is stored, so that anyone can recompute it:

* a signal (one chain per run, in ``seq`` order): ``caused_by``, ``depth``, ``id``,
  ``name``, ``payload`` (the stored JSON text of the payload, as a string; ``null``
  without one), ``run_id``, ``seq``, ``source`` and ``time`` (the timestamp, UNIX
  seconds as a float);
* a row of a service table (one chain per table, in id order): its columns but
  ``hash``, those that are NULL left out; JSON columns as their JSON values,
  timestamps as ISO 8601 text in UTC (``2026-01-02T03:04:05.123456+00:00``).

What it detects: with SHA-256, an edit, deletion or reordering of an entry by someone
who does not recompute every later hash; with a key, also a recomputation by anyone
who does not hold the key. Neither detects the removal of the newest entries of a
chain (record the latest hash elsewhere to anchor it). docs/audit.md says it for users.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from types import ModuleType
from typing import Any

import pydantic_core

from reactor._signals.settings import settings

_native: ModuleType | None
try:
    from reactor._recording import _chainlink as _native
except ImportError:  # not compiled here: the Python loop links alone
    _native = None

__all__ = [
    "HMAC_SHA256",
    "SHA256",
    "Break",
    "Chain",
    "Checked",
    "Heads",
    "Report",
    "Walk",
    "configured",
    "row_entry",
    "signal_entry",
    "verifying_key",
]

SHA256 = "sha256:"
"""The prefix of a hash made without a key."""
HMAC_SHA256 = "hmac-sha256:"
"""The prefix of a hash made with ``REACTOR_AUDIT_KEY``."""

_HEADS_KEPT = 50_000
"""Runs whose latest hash a writer keeps in memory (beyond: it reads them again)."""


class Chain:
    """How a writer links entries: HMAC-SHA-256 with ``key``, SHA-256 without one.

    Args:
        key: The secret of ``REACTOR_AUDIT_KEY`` (``None``: no key).
    """

    __slots__ = ("key",)

    def __init__(self, key: bytes | None = None) -> None:
        self.key = key or None

    def link(self, previous: str | None, entry: bytes) -> str:
        """The hash of ``entry`` after the entry whose hash is ``previous``."""
        data = previous.encode() + entry if previous else entry
        if self.key is None:
            return SHA256 + hashlib.sha256(data).hexdigest()
        return HMAC_SHA256 + hmac.digest(self.key, data, "sha256").hex()


def verifying_key() -> bytes | None:
    """``REACTOR_AUDIT_KEY`` as bytes (``None``: not set)."""
    secret = settings().audit_key
    return secret.get_secret_value().encode() if secret is not None else None


def configured() -> Chain | None:
    """The chain this process writes: keyed when ``REACTOR_AUDIT_KEY`` is set.

    ``None`` when ``REACTOR_AUDIT_CHAIN`` is off (to measure what chaining costs): the
    rows are then written without a hash, and ``reactor audit verify`` reports them.
    """
    if not settings().audit_chain:
        return None
    return Chain(verifying_key())


_to_json = pydantic_core.to_json


def signal_entry(row: Sequence[Any]) -> bytes:
    """The canonical JSON of a signal's row.

    ``row`` is (run id, seq, id, name, payload as JSON text or ``None``, timestamp,
    source, caused_by, depth): how both SQL stores write and read a signal.

    Raises:
        ValueError: A text field holds what UTF-8 cannot (a lone surrogate).
    """
    run_id, seq, signal_id, name, payload, timestamp, source, caused_by, depth = row
    time = float(timestamp)
    fields = {
        "caused_by": caused_by,
        "depth": depth,
        "id": signal_id,
        "name": name,
        "payload": payload,
        "run_id": run_id,
        "seq": seq,
        "source": source,
        "time": time,
    }
    # pydantic-core writes what json.dumps writes (five times faster) for every field,
    # except floats below 1e-4 or not finite: those go the slow way, to stay exact.
    if time == 0.0 or 1e-4 <= abs(time) < 1e16:
        return _to_json(fields)
    return _canonical(fields)


def row_entry(fields: Mapping[str, Any]) -> bytes:
    """The canonical JSON of a row of a service table (``fields``: its columns but ``hash``)."""
    return _canonical({key: value for key, value in fields.items() if value is not None})


def _canonical(value: Any) -> bytes:
    text = json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=_timestamp
    )
    return text.encode()


def _timestamp(value: Any) -> str:
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat()
    raise TypeError(f"{type(value).__name__} is not JSON data")


class Heads:
    """The latest hash of each run a writer thread appends to, so it links the next entry.

    A run's head is kept in memory once written; when a batch's first signal of a run
    does not follow the one kept (a run not written by this writer yet, resumed after
    a restart, written meanwhile by another process), its head is read from the store
    (``lookup``). Heads change only once the batch is committed (:meth:`keep`).

    Args:
        chain: How to link (``None``: chaining off; every hash is ``None``).
    """

    def __init__(self, chain: Chain | None) -> None:
        self.chain = chain
        self._known: dict[str, tuple[int, str | None]] = {}

    def link(
        self,
        rows: Sequence[list[Any]],
        lookup: Callable[[list[str]], Mapping[str, tuple[int, str | None]]],
    ) -> dict[str, tuple[int, str | None]]:
        """Set each row's hash, in order; return the runs' heads after them.

        A row is a signal's stored fields (as :func:`signal_entry` takes them) and a
        last item, its hash, set here in place (``None``: chaining off, or a row at or
        before its run's stored head: one written already, by a batch written again).
        ``lookup(run_ids)`` reads each run's last stored (seq, hash) (a run with no
        row is left out). The writers' hot path: compiled where ``_chainlink`` was
        built (the same bytes, four to five times faster), else one Python pass.
        """
        chain = self.chain
        if chain is None:
            return {}
        heads = self._heads(rows, lookup)
        if _native is not None and type(rows) is list:
            linked = dict(heads)
            try:
                _native.link(rows, linked, chain.key)
            except (TypeError, ValueError, OverflowError):
                pass  # a row the compiled loop does not take: the reference links it
            else:
                return linked
        return _link(chain, rows, heads)

    def _heads(
        self,
        rows: Sequence[Sequence[Any]],
        lookup: Callable[[list[str]], Mapping[str, tuple[int, str | None]]],
    ) -> dict[str, tuple[int, str | None]]:
        firsts: dict[str, int] = {}
        for row in rows:
            if row[0] not in firsts:
                firsts[row[0]] = row[1]
        known = self._known
        heads: dict[str, tuple[int, str | None]] = {}
        missing = []
        for run_id, first in firsts.items():
            kept = known.get(run_id)
            if kept is not None and kept[0] + 1 == first:
                heads[run_id] = kept
            elif first == 1 and kept is None:  # a new run: nothing stored before it
                heads[run_id] = (0, None)
            else:
                missing.append(run_id)
        if missing:
            found = lookup(missing)
            for run_id in missing:
                heads[run_id] = found.get(run_id, (0, None))
        return heads

    def keep(self, heads: Mapping[str, tuple[int, str | None]]) -> None:
        """The batch that linked ``heads`` is committed: they are the runs' heads now."""
        if len(self._known) > _HEADS_KEPT:
            self._known.clear()
        self._known.update(heads)


def _link(
    chain: Chain, rows: Sequence[list[Any]], heads: dict[str, tuple[int, str | None]]
) -> dict[str, tuple[int, str | None]]:
    """:meth:`Heads.link` in Python: the reference the compiled loop is tested against."""
    link, current, head, previous = chain.link, None, 0, None
    for row in rows:
        run_id, seq = row[0], row[1]
        if run_id != current:
            if current is not None:
                heads[current] = (head, previous)
            current = run_id
            head, previous = heads[run_id]
        if seq <= head:
            row[9] = None
            continue
        entry = signal_entry(row[:9])
        previous = row[9] = link(previous, entry)
        head = seq
    if current is not None:
        heads[current] = (head, previous)
    return heads


@dataclasses.dataclass(frozen=True)
class Break:
    """The first entry of a chain that fails its check.

    Attributes:
        table: The table it is in (``signals``, ``processing_history``, ...).
        id: The row's id (a signal's ``sig_...`` id; a service row's id).
        seq: The signal's ``seq`` (``None`` for a service row).
        run_id: The run whose chain it is (``None`` for a service table).
        problem: What is wrong, in a sentence's middle.
    """

    table: str
    id: str | int | None
    seq: int | None
    run_id: str | None
    problem: str

    def __str__(self) -> str:
        where = [f"table {self.table}"]
        if self.run_id is not None:
            where.append(f"run {self.run_id}")
        if self.seq is not None:
            where.append(f"seq {self.seq}")
        if self.id is not None:
            where.append(f"id {self.id}")
        return f"{', '.join(where)}: {self.problem}"

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form."""
        return dataclasses.asdict(self)


class Walk:
    """Checks the entries of one chain, in order (:meth:`step`), as a verifier reads them.

    Args:
        key: ``REACTOR_AUDIT_KEY`` (``None``: not set; a keyed chain cannot be checked).
        since: When the table began to be chained (UNIX seconds; ``None``: unknown). An
            entry written since without a hash had it removed.

    Attributes:
        checked: Entries whose hash was recomputed and matched.
        unchained: Entries written before the trail was chained (no hash).
        keyed: Entries chained with a key.
    """

    def __init__(self, key: bytes | None, since: float | None) -> None:
        self.key, self.since = key, since
        self._keyed, self._plain = Chain(key), Chain(None)
        self.previous: str | None = None
        self.checked = self.unchained = self.keyed = 0

    def step(self, stored: str | None, entry: bytes, written_at: float | None) -> str | None:
        """Check the next entry: ``None`` when it is sound, else what is wrong with it."""
        if stored is None:
            return self._unchained(written_at)
        if stored.startswith(HMAC_SHA256):
            if self.key is None:
                return (
                    "its chain was written with a key (HMAC-SHA-256); set REACTOR_AUDIT_KEY "
                    "to that key to verify it"
                )
            expected = self._keyed.link(self.previous, entry)
        elif stored.startswith(SHA256):
            if self.key is not None:
                return (
                    "it is chained without the key (SHA-256), so the key does not vouch for "
                    "it: someone without REACTOR_AUDIT_KEY rewrote it, or a process without "
                    "the key wrote it (verify such a chain without the key)"
                )
            expected = self._plain.link(self.previous, entry)
        else:
            return "its hash is not one reactor writes (sha256:... or hmac-sha256:...)"
        if not hmac.compare_digest(expected, stored):
            return _mismatch(stored)
        self.previous = stored
        self.checked += 1
        self.keyed += stored.startswith(HMAC_SHA256)
        return None

    def _unchained(self, written_at: float | None) -> str | None:
        if self.previous is not None:
            return "it has no hash, though the entries before it have one: its hash was removed"
        if self.since is not None and written_at is not None and written_at >= self.since:
            began = datetime.fromtimestamp(self.since, UTC).isoformat(timespec="seconds")
            return (
                f"it has no hash, though it was written after the trail was chained ({began}): "
                "its hash was removed, or a process of an older reactor (or one with "
                "REACTOR_AUDIT_CHAIN off) wrote it"
            )
        self.unchained += 1
        return None


def _mismatch(stored: str) -> str:
    keyed = " (or it was chained with another key)" if stored.startswith(HMAC_SHA256) else ""
    return (
        "its content does not match its hash: it was changed, or an entry before it was "
        f"removed, added or moved{keyed}"
    )


@dataclasses.dataclass
class Checked:
    """What was checked of one table.

    Attributes:
        table: The table.
        chains: Chains checked in it (runs, for signals; 1 for a service table).
        entries: Entries whose hash matched.
        unchained: Entries written before the trail was chained (no hash, not checked).
        keyed: Of the entries that matched, those chained with a key.
    """

    table: str
    chains: int = 0
    entries: int = 0
    unchained: int = 0
    keyed: int = 0

    def add(self, walk: Walk) -> None:
        """Count one chain, as ``walk`` checked it."""
        self.chains += 1
        self.entries += walk.checked
        self.unchained += walk.unchained
        self.keyed += walk.keyed

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form."""
        return dataclasses.asdict(self)

    def __str__(self) -> str:
        chains = (
            f"{self.chains:,} run{'s' if self.chains != 1 else ''}, "
            if (self.table == "signals")
            else ""
        )
        entries = "entry" if self.entries == 1 else "entries"
        line = f"{self.table}: {chains}{self.entries:,} {entries} chained"
        if self.keyed:
            line += f" ({self.keyed:,} with the key)"
        if self.unchained:
            line += f", {self.unchained:,} written before the trail was chained (not checked)"
        return line


@dataclasses.dataclass
class Report:
    """What ``reactor audit verify`` (and ``GET /api/audit/verify``) found.

    Attributes:
        checked: What was checked, per table.
        broken: The first entry that failed its check (``None``: the trail is intact).
        key: Whether ``REACTOR_AUDIT_KEY`` was set (keyed chains checked with it).
        notes: What could not be checked, and why (a sentence each).
    """

    checked: list[Checked] = dataclasses.field(default_factory=list)
    broken: Break | None = None
    key: bool = False
    notes: list[str] = dataclasses.field(default_factory=list)

    @property
    def intact(self) -> bool:
        """Whether every chain checked is sound."""
        return self.broken is None

    def table(self, name: str) -> Checked:
        """The count of ``name`` (added on first use)."""
        for checked in self.checked:
            if checked.table == name:
                return checked
        self.checked.append(Checked(name))
        return self.checked[-1]

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (what ``GET /api/audit/verify`` answers)."""
        return {
            "intact": self.intact,
            "key": self.key,
            "checked": [checked.to_dict() for checked in self.checked],
            "broken": None if self.broken is None else self.broken.to_dict(),
            "notes": list(self.notes),
        }

    def lines(self) -> list[str]:
        """The first broken entry; else what was checked, a line per table, and the verdict."""
        if self.broken is not None:
            return [f"Broken: {self.broken}."]
        lines = [str(checked) for checked in self.checked] + self.notes
        if self.key:
            lines.append("The trail is intact (checked with REACTOR_AUDIT_KEY).")
        else:
            lines.append(
                "The trail is intact. Without REACTOR_AUDIT_KEY this shows edits, not a "
                "writer who recomputed the chain (see docs/audit.md)."
            )
        return lines

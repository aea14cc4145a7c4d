"""Retention: the service deletes what ended longer ago than ``REACTOR_RETENTION``.

Unset (the default), everything is kept. Set (``30d``, ``12h``, ``2w``), the service's
scheduler prunes once when it starts and then every day:

* the runs of its signal store that ended (with any status) longer ago than that,
  deleted whole; runs still running or waiting never are;
* the processing log's entries that are done (``completed``, ``failed``, ``skipped``,
  ``abandoned``, ``superseded``, ``merged``) and last changed before then; entries
  pending, processing or held never are;
* the processing history's lines older than that, and the object events older than
  that which nothing still needs: an event stays while an entry of the processing log
  refers to it, or while an agent has yet to be given it. Both are hash chains: only
  their oldest rows go, and the last row deleted becomes the chain's anchor
  (``audit_chains``), so that ``reactor audit verify`` checks what is kept from it and
  the next row written links to it. Each prune is logged with the anchor (table, last
  id deleted, its hash): shipped with the logs, the anchors let an auditor check that
  what retention deleted is what the service deleted.

Objects themselves (their current data) are never deleted by retention. Several
serving processes may all prune: deleting what is already gone deletes nothing.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa

from reactor._signals.diagnostics import log
from reactor._signals.settings import settings_from
from reactor.service._objects.db import Database
from reactor.service._objects.history import lock_history, prune_chain
from reactor.service._objects.schema import (
    audit_chains,
    object_events,
    processing_history,
    processing_log,
    reaction_cursors,
)

__all__ = ["CHUNK", "DONE", "RETENTION_ENV", "Retention", "prune_tables"]

DONE = ("completed", "failed", "skipped", "abandoned", "superseded", "merged")
"""The processing log's statuses an entry never leaves: retention may delete it."""

RETENTION_ENV = "REACTOR_RETENTION"
CHUNK = 5_000
"""Rows of each table a prune deletes per transaction (the service's writes wait meanwhile)."""


@dataclasses.dataclass(frozen=True)
class Retention:
    """How long the service keeps runs after they end.

    Attributes:
        older_than: Runs that ended longer ago than this are deleted.
    """

    older_than: timedelta

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Retention | None:
        """``REACTOR_RETENTION``, or ``None`` when it is unset (keep everything).

        ``environ``: read this variable there instead of in the process's environment.

        Raises:
            ServiceConfigError: A ``REACTOR_*`` value is bad (one line per bad variable).
        """
        older_than = settings_from(environ).retention
        return None if older_than is None else cls(older_than)

    async def prune(self, store: Any, db: Database | None = None) -> int:
        """Delete the ended runs of ``store`` older than :attr:`older_than`; how many.

        ``db``: the service's database, whose processing log, history and object events
        are pruned too (:func:`prune_tables`).
        """
        days = round(self.older_than.total_seconds() / 86400, 3)
        if db is not None:
            try:
                await prune_tables(db, self.older_than)
            except Exception as exc:  # the database is away: the next day tries again
                log("reactor.service", "error", "service tables not pruned", error=repr(exc))
        try:
            count = int(
                await asyncio.to_thread(store.prune, older_than=self.older_than, status=None)
            )
        except Exception as exc:  # the store is away: the next day tries again
            log("reactor.service", "error", "runs not pruned", error=repr(exc))
            return 0
        log("reactor.service", "info", "runs pruned", runs=count, older_than_days=days)
        return count


async def prune_tables(
    db: Database,
    older_than: timedelta | None = None,
    *,
    before: datetime | None = None,
    chunk: int = CHUNK,
) -> dict[str, int]:
    """Delete what the service's tables keep of what ended ``older_than`` ago; how many.

    ``before``: an instant instead (what ended before it goes). The rows go ``chunk``
    at a time per table, each chunk one transaction under the locks that order object
    writes and history writes (see the module's docstring): the service's writes wait
    for a chunk at most, never for a whole prune. Each chained table's new anchor is
    logged once, at the end.

    Raises:
        ValueError: Neither ``older_than`` nor ``before`` is given, or ``chunk`` < 1.
    """
    if before is None and older_than is None:
        raise ValueError("prune_tables needs older_than (a timedelta) or before (a datetime).")
    if chunk < 1:
        raise ValueError(f"prune_tables deletes at least one row at a time (chunk={chunk!r}).")
    cutoff = before if before is not None else datetime.now(UTC) - (older_than or timedelta())
    counts = dict.fromkeys(("processing_log", "history", "events"), 0)
    while True:
        done = await db.run_write(functools.partial(_prune, cutoff=cutoff, chunk=chunk))
        for name, count in done.items():
            counts[name] += count
        if max(done.values()) < chunk:  # every table had less left than a chunk
            break
    for table, count in (
        (processing_history, counts["history"]),
        (object_events, counts["events"]),
    ):
        if count:
            await db.run_read(functools.partial(_logged_anchor, table=table.name, count=count))
    log("reactor.service", "info", "service tables pruned", **counts, before=cutoff.isoformat())
    return counts


def _prune(conn: sa.Connection, *, cutoff: datetime, chunk: int) -> dict[str, int]:
    """One chunk: at most ``chunk`` rows of each table, in one transaction."""
    done = (
        sa.select(processing_log.c.id)
        .where(processing_log.c.status.in_(DONE), processing_log.c.updated_at < cutoff)
        .order_by(processing_log.c.id)
        .limit(chunk)
    )
    log_rows = conn.execute(
        processing_log.delete().where(processing_log.c.id.in_(done.scalar_subquery()))
    ).rowcount
    lock_history(conn)
    history_through = conn.scalar(
        sa.select(sa.func.max(processing_history.c.id)).where(
            processing_history.c.created_at < cutoff
        )
    )
    history = prune_chain(
        conn,
        processing_history,
        _within(conn, processing_history, int(history_through or 0), chunk),
    )
    events = prune_chain(
        conn, object_events, _within(conn, object_events, _events_through(conn, cutoff), chunk)
    )
    return {"processing_log": int(log_rows or 0), "history": history, "events": events}


def _within(conn: sa.Connection, table: sa.Table, through: int, chunk: int) -> int:
    """The id up to which ``chunk`` rows of ``table`` go (at most ``through``)."""
    key = next(iter(table.primary_key.columns))
    last = conn.scalar(
        sa.select(key).where(key <= through).order_by(key).offset(chunk - 1).limit(1)
    )
    return through if last is None else int(last)


def _events_through(conn: sa.Connection, cutoff: datetime) -> int:
    """The last object event retention may delete: old, and needed by nothing."""
    bounds = [
        conn.scalar(
            sa.select(sa.func.max(object_events.c.event_id)).where(
                object_events.c.created_at < cutoff
            )
        )
        or 0
    ]
    referred = conn.scalar(sa.select(sa.func.min(processing_log.c.event_id)))
    if referred is not None:  # an entry still kept refers to it
        bounds.append(int(referred) - 1)
    dispatched = conn.scalar(sa.select(sa.func.min(reaction_cursors.c.event_id)))
    if dispatched is not None:  # an agent has yet to be given what follows its cursor
        bounds.append(int(dispatched))
    return max(0, min(int(bound) for bound in bounds))


def _logged_anchor(conn: sa.Connection, *, table: str, count: int) -> None:
    """Log where a pruned chain is anchored now (shipped with the logs: an outside record)."""
    anchor = conn.execute(
        sa.select(audit_chains.c.pruned_through, audit_chains.c.pruned_hash).where(
            audit_chains.c.table_name == table
        )
    ).one()
    log(
        "reactor.audit",
        "info",
        "chain pruned",
        table=table,
        rows=count,
        through=anchor.pruned_through,
        anchor=anchor.pruned_hash,
    )

"""The processing log's history, and the hash chains of the service's audit trail.

The processing log says what became of each event an agent was given; its history says
what became of what the agent proposed. A person's decision is ``suggestion:decided``,
with its provenance (the suggestion and the run that proposed it, the object and the
version it was based on, a digest of the changes decided on, the principal with its
roles and authenticator, the decision, its outcome and justification; see
:class:`~reactor._signals.payloads.SuggestionDecided`); a pending suggestion that gave
way to a newer one of its agent for its object is ``suggestion:superseded`` (see
:class:`~reactor._signals.payloads.SuggestionSuperseded`). A row is written in the
transaction that makes it true: the newer suggestion's insert, a rejection's change of
status, an approval's changes of objects (when the service keeps its tables in the
objects' database, the default; otherwise right after them). So the history never
shows an approval whose changes were not applied (a stale one refused, say). Rows are
never changed or deleted.

The history and the object events are each a hash chain (``reactor._recording.chain``:
each row's ``hash`` links it to the row before it in id order), linked in the
transaction that writes the rows, under the lock that orders that table's writes, so
that two writers, in any number of processes, never fork a chain: object writes take
theirs (``Database.run_write``: the write lock of SQLite, an advisory lock on
PostgreSQL) and the history takes :data:`_HISTORY_LOCK` on PostgreSQL. A row is
inserted, read back as the database holds it (``RETURNING``), and its hash set from
the previous row's: :class:`RowChain`. :func:`verify_tables` checks both chains, a
page at a time.
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pydantic
import sqlalchemy as sa

from reactor._recording.chain import Break, Chain, Report, Walk, configured, row_entry
from reactor._signals.payloads import SuggestionDecided, SuggestionSuperseded
from reactor.exceptions import DatabaseError
from reactor.service._objects.db import Database, describe_url
from reactor.service._objects.schema import audit_chains, object_events, processing_history

__all__ = [
    "CHAINED",
    "History",
    "HistoryEntry",
    "Line",
    "RowChain",
    "history_row",
    "history_rows",
    "lock_history",
    "prune_chain",
    "verify_database",
    "verify_tables",
]

_HISTORY_LOCK = 0x52454145
"""The PostgreSQL advisory lock key that orders writes of the history ("REAE")."""

PAGE = 1_000
"""Rows read at a time when verifying."""


def _chained_columns(table: sa.Table) -> list[sa.Column[Any]]:
    return [column for column in table.c if column.name != "hash"]


class RowChain:
    """The rows of one table a transaction writes, linked into the table's chain.

    Call :meth:`add` with each row as inserted (``RETURNING`` :meth:`columns`), then
    :meth:`link` in the same transaction, under the lock that orders the table's
    writes. A change rolled back to a savepoint takes its rows out (:meth:`mark`,
    :meth:`rollback`). A writer that keeps its chain from one transaction to the next
    says when one was committed (:meth:`committed`) or not (:meth:`discarded`): it then
    knows the table's last row, and reads it again only when the first row it links
    does not follow it (another process wrote since, or a transaction's ids went unused).

    Args:
        table: The chained table (its first primary key column orders it).
        chain: How to link (``None``: chaining is off, nothing is linked).
    """

    def __init__(self, table: sa.Table, chain: Chain | None) -> None:
        self.table, self.chain = table, chain
        self.key = next(iter(table.primary_key.columns))
        self.rows: list[tuple[int, bytes]] = []
        self.head: tuple[int, str | None] | None = None  # the last row committed: id, hash
        self._linked: tuple[int, str | None] | None = None

    @staticmethod
    def columns(table: sa.Table) -> list[sa.Column[Any]]:
        """What an insert returns for :meth:`add`: every column but ``hash``."""
        return _chained_columns(table)

    def add(self, row: sa.Row[Any]) -> None:
        """Take a row just inserted, as the database returned it."""
        if self.chain is not None:
            fields = dict(row._mapping)
            self.rows.append((int(fields[self.key.name]), row_entry(fields)))

    def mark(self) -> int:
        """Where the rows stand (before a savepoint)."""
        return len(self.rows)

    def rollback(self, mark: int) -> None:
        """Forget the rows taken since ``mark`` (their savepoint was rolled back)."""
        del self.rows[mark:]

    def link(self, conn: sa.Connection) -> None:
        """Set the hash of each row taken, in id order, from the row before the first."""
        if self.chain is None or not self.rows:
            return
        rows = sorted(self.rows)
        self.rows.clear()
        before, update = _statements(self.table, conn.dialect.paramstyle)
        previous: str | None
        if self.head is not None and self.head[0] + 1 == rows[0][0]:
            previous = self.head[1]
        else:
            found = conn.exec_driver_sql(before, (rows[0][0],)).first()
            previous = found[1] if found is not None else _anchor(conn, self.table)[1]
        hashes = []
        for row_id, entry in rows:
            previous = self.chain.link(previous, entry)
            hashes.append((previous, row_id))
        conn.exec_driver_sql(update, hashes)
        self._linked = (rows[-1][0], previous)

    def committed(self) -> None:
        """The transaction that linked the last rows committed: the last of them is the head."""
        if self._linked is not None:
            self.head, self._linked = self._linked, None

    def discarded(self) -> None:
        """The transaction did not commit: what it linked is not there."""
        self.rows.clear()
        self._linked = None


@functools.cache
def _statements(table: sa.Table, paramstyle: str) -> tuple[str, str]:
    """A chained table's two statements: the row before an id (its id, its hash), a hash set.

    Plain SQL in the driver's own style: the two run with every write, and SQLAlchemy's
    statements cost more than the writes.
    """
    key, mark = next(iter(table.primary_key.columns)).name, "?" if paramstyle == "qmark" else "%s"
    return (
        f"SELECT {key}, hash FROM {table.name} WHERE {key} < {mark} ORDER BY {key} DESC LIMIT 1",
        f"UPDATE {table.name} SET hash = {mark} WHERE {key} = {mark}",
    )


def _anchor(conn: sa.Connection, table: sa.Table) -> tuple[int, str | None]:
    """Where retention left the chain of ``table``: the last id it deleted and that row's hash.

    ``(0, None)`` when nothing was pruned (the chain starts at its first row).
    """
    found = conn.execute(
        sa.select(audit_chains.c.pruned_through, audit_chains.c.pruned_hash).where(
            audit_chains.c.table_name == table.name
        )
    ).first()
    if found is None or found.pruned_through is None:
        return 0, None
    return int(found.pruned_through), found.pruned_hash


def prune_chain(conn: sa.Connection, table: sa.Table, through: int) -> int:
    """Delete the rows of a chained ``table`` with ids up to ``through``; how many.

    Only a prefix of the chain goes, so what is kept still links: the last row deleted
    becomes the chain's anchor (``audit_chains.pruned_through``/``pruned_hash``), from
    which the first row kept is verified and the next row written is linked. Call it
    under the lock that orders the table's writes (history: :data:`_HISTORY_LOCK`).
    """
    key = next(iter(table.primary_key.columns))
    last = conn.execute(
        sa.select(key, table.c.hash).where(key <= through).order_by(key.desc()).limit(1)
    ).first()
    if last is None:
        return 0
    deleted = conn.execute(table.delete().where(key <= last[0])).rowcount
    conn.execute(
        audit_chains.update()
        .where(audit_chains.c.table_name == table.name)
        .values(pruned_through=int(last[0]), pruned_hash=last[1])
    )
    return int(deleted or 0)


def lock_history(conn: sa.Connection) -> None:
    """Take the lock that orders writes of the history (PostgreSQL; SQLite's writer is one)."""
    if conn.dialect.name == "postgresql":
        conn.execute(sa.select(sa.func.pg_advisory_xact_lock(_HISTORY_LOCK)))


class HistoryEntry(pydantic.BaseModel):
    """One decision in the processing log's history.

    Attributes:
        id: Its position in the history (increasing).
        name: What it records: ``suggestion:decided`` or ``suggestion:superseded``.
        suggestion_id: The suggestion decided on.
        object_id: The object the suggestion was about, if any.
        payload: The decision with its provenance (``SuggestionDecided``), or what
            superseded the suggestion (``SuggestionSuperseded``).
        created_at: When (UTC).
    """

    model_config = pydantic.ConfigDict(frozen=True)

    id: int
    name: str
    suggestion_id: str | None
    object_id: str | None
    payload: dict[str, Any]
    created_at: datetime


Line = SuggestionDecided | SuggestionSuperseded
"""What a line of the history says (its payload)."""

_INSERT_HISTORY = processing_history.insert().returning(
    *_chained_columns(processing_history), sort_by_parameter_order=True
)


def history_row(name: str, line: Line) -> Callable[[sa.Connection], None]:
    """The write of one line: call it with the connection of the transaction that makes it true.

    The row is linked into the history's chain there, under the history's lock.
    """
    return history_rows([(name, line)])


def history_rows(lines: Sequence[tuple[str, Line]]) -> Callable[[sa.Connection], None]:
    """The write of many lines at once (one insert), linked as :func:`history_row` links one."""

    def write(conn: sa.Connection) -> None:
        if not lines:
            return
        lock_history(conn)
        chain = RowChain(processing_history, configured())
        now = datetime.now(UTC)
        rows = [
            {
                "name": name,
                "suggestion_id": line["suggestion_id"],
                "object_id": line["object_id"],
                "payload": dict(line),
                "created_at": now,
            }
            for name, line in lines
        ]
        for row in conn.execute(_INSERT_HISTORY, rows):
            chain.add(row)
        chain.link(conn)

    return write


class History:
    """The processing log's history in one database."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def add(self, name: str, decided: SuggestionDecided) -> None:
        """Write one decision in a transaction of its own."""
        async with self.db.write() as conn:
            await conn.run_sync(history_row(name, decided))

    async def list(
        self,
        *,
        suggestion_id: str | None = None,
        object_id: str | None = None,
        after: int | None = None,
        limit: int | None = 1000,
        newest_first: bool = False,
    ) -> list[HistoryEntry]:
        """Decisions, oldest first (about one suggestion or object, or all).

        Args:
            suggestion_id: Only those about this suggestion.
            object_id: Only those about this object.
            after: Only those after this ``id`` (the last one of the page before).
            limit: At most this many.
            newest_first: The newest first instead (the latest ``limit`` of them).
        """
        order = processing_history.c.id.desc() if newest_first else processing_history.c.id
        query = sa.select(processing_history).order_by(order).limit(limit)
        if suggestion_id is not None:
            query = query.where(processing_history.c.suggestion_id == suggestion_id)
        if object_id is not None:
            query = query.where(processing_history.c.object_id == object_id)
        if after is not None:
            query = query.where(processing_history.c.id > after)
        async with self.db.read() as conn:
            rows = (await conn.execute(query)).all()
        return [
            HistoryEntry(
                id=row.id,
                name=row.name,
                suggestion_id=row.suggestion_id,
                object_id=row.object_id,
                payload=row.payload,
                created_at=row.created_at,
            )
            for row in rows
        ]


CHAINED = (processing_history, object_events)
"""The service's hash-chained tables."""


def verify_tables(conn: sa.Connection, report: Report, key: bytes | None) -> None:
    """Check the chains of the history and the object events into ``report``, page by page.

    Stops at the first row that fails its check (``report.broken``).
    """
    rows = {row.table_name: row for row in conn.execute(sa.select(audit_chains))}
    since: Mapping[str, datetime] = {name: row.since for name, row in rows.items()}
    for table in CHAINED:
        began = since.get(table.name)
        if began is None:
            report.broken = Break(
                audit_chains.name,
                table.name,
                None,
                None,
                f"the record of when {table.name} began to be chained was removed, so a row "
                "without a hash cannot be told from one whose hash was removed",
            )
            return
        walk = Walk(key, began.timestamp())
        pruned = rows[table.name].pruned_through
        if pruned is not None:  # retention deleted a prefix: the kept rows link from its end
            walk.previous = rows[table.name].pruned_hash
            report.notes.append(
                f"{table.name}: the entries through id {pruned} were deleted by retention "
                "(REACTOR_RETENTION); what is kept is verified from that anchor"
            )
        report.broken = _verify_table(conn, table, walk)
        if report.broken is not None:
            return
        report.table(table.name).add(walk)


def _verify_table(conn: sa.Connection, table: sa.Table, walk: Walk) -> Break | None:
    key = next(iter(table.primary_key.columns))
    after = 0
    while True:
        page = conn.execute(sa.select(table).where(key > after).order_by(key).limit(PAGE)).all()
        for row in page:
            fields = row._mapping
            entry = row_entry({name: fields[name] for name in fields if name != "hash"})
            problem = walk.step(fields["hash"], entry, fields["created_at"].timestamp())
            if problem is not None:
                return Break(table.name, fields[key.name], None, None, problem)
            after = fields[key.name]
        if len(page) < PAGE:
            return None


def verify_database(where: Path | str, report: Report, key: bytes | None) -> None:
    """Check the chains of the service database at ``where`` (a SQLite file, a URL), read only.

    Raises:
        DatabaseError: The database cannot be read, or its tables are of a revision
            before the chains (``reactor db upgrade`` brings them up to date).
    """
    if isinstance(where, Path):
        uri = f"{where.resolve().as_uri()}?mode=ro"
        engine = sa.create_engine("sqlite://", creator=lambda: sqlite3.connect(uri, uri=True))
        shown = str(where)
    else:
        url = sa.make_url(where)
        engine = sa.create_engine(url.set(drivername="postgresql+psycopg"))
        shown = describe_url(where)
    try:
        with engine.connect() as conn:
            inspector = sa.inspect(conn)
            chained = (
                inspector.has_table(audit_chains.name)
                and all(
                    "hash" in {column["name"] for column in inspector.get_columns(table.name)}
                    for table in CHAINED
                )
                and "pruned_through"
                in {column["name"] for column in inspector.get_columns(audit_chains.name)}
            )
            if not chained:
                raise DatabaseError(
                    f"The service's tables in {shown} are of a revision before they were "
                    f"hash-chained; run `reactor db upgrade --db {shown}` first."
                )
            verify_tables(conn, report, key)
    except sa.exc.SQLAlchemyError as exc:
        reason = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0]
        raise DatabaseError(f"Reading the service's tables in {shown} failed ({reason}).") from exc
    finally:
        engine.dispose()

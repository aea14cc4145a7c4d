"""What differs between the SQL databases a SQL signal store records to: its dialect.

The store's queries are written once, with ``?`` for a parameter and ``{runs}``,
``{signals}``, ... for the tables; :meth:`Dialect.sql` makes one into the database's
own text (its table names, its placeholder) and keeps it. What a query cannot say the
same way in both is a fragment of the dialect (a JSON column read as text, the greater
of two numbers, membership in a list given as one parameter). A dialect also opens the
connections, runs a write transaction, migrates the schema, and tells which errors of
its driver pass (a lock, a lost connection) and which a batch's own values caused.

DBOS keeps its system database the same way: every query in one module, and per
database only the engine, the migrations and the translation of errors.
"""

from __future__ import annotations

import abc
import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

__all__ = ["SCHEMA_VERSION", "TABLES", "Dialect", "describe"]

SCHEMA_VERSION = 9
"""The schema both dialects reach: one version line from 9 on (see :meth:`Dialect.migrate`)."""

TABLES = ("runs", "run_tags", "signals", "requests", "inbox", "timers", "audit_chain")
"""The store's tables, by the names its queries give them."""


class Dialect(abc.ABC):
    """One SQL database's side of a signal store: connections, SQL text, errors, schema.

    Attributes:
        shown: The database as messages name it (a path, a URL without its password).
        prefix: What the database's table names begin with.
        mark: The driver's placeholder.
        errors: The driver's errors (what a store turns into a ``RecordingError``).
        retry_for: Seconds a write is retried while :meth:`transient` says it may pass.
        readonly: Only read (nothing is created, migrated or written).
        text: A JSON column read as text (``{}``: the column).
        greatest: The function giving the greater of two numbers.
        tags_object: The tags of run ``r`` (from ``{run_tags} t``) as one JSON text.
        snapshot: A snapshot's payload's ``seq`` and ``needs`` (as JSON text).
        each: The values of a list given as one parameter (:meth:`array`), as a table
            ``ids`` of one column ``value``.
        for_update: What locks the rows a ``SELECT`` reads until the transaction ends.
        json_mark: A parameter that a JSON column takes.
    """

    shown: str
    prefix: str = ""
    mark: str = "?"
    errors: tuple[type[BaseException], ...] = ()
    retry_for: float = 30.0
    readonly: bool = False
    text = "{}"
    greatest = "MAX"
    tags_object = "json_group_object(t.key, t.value)"
    snapshot = "json_extract(payload, '$.seq'), json_extract(payload, '$.needs')"
    each = "json_each(?) AS ids"
    for_update = ""
    json_mark = "?"

    def __init__(self) -> None:
        self._compiled: dict[str, str] = {}

    def sql(self, template: str) -> str:
        """``template`` in this database's SQL: its tables and placeholder (kept once made)."""
        found = self._compiled.get(template)
        if found is None:
            names = {table: self.prefix + table for table in TABLES}
            found = template.format(
                **names,
                each=self.each,
                for_update=self.for_update,
                greatest=self.greatest,
                json_mark=self.json_mark,
                snapshot=self.snapshot,
                tags_object=self.tags_object,
            )
            if self.mark != "?":
                found = found.replace("%", "%%").replace("?", self.mark)
            self._compiled[template] = found
        return found

    def column(self, name: str) -> str:
        """A JSON column read as its text."""
        return self.text.format(name)

    def member(self, column: str) -> str:
        """``column`` is one of a list given as one parameter (:meth:`array`)."""
        return f"{column} IN (SELECT ids.value FROM {self.each})"

    def array(self, values: Sequence[Any]) -> Any:
        """``values`` as the one parameter of :meth:`member` or :attr:`each`."""
        return list(values)

    # -- what each database does its own way ------------------------------------------

    @abc.abstractmethod
    @contextlib.contextmanager
    def connection(self, *, wait: float | None = None, writing: bool = False) -> Iterator[Any]:
        """A connection (autocommit) for the time of the block.

        Args:
            wait: Seconds to wait for one when all are busy (``None``: the default).
            writing: For the writer thread: when none is to be had in ``wait``, one of
                its own (after an outage a pool may be slow to reconnect).
        """
        raise NotImplementedError

    @abc.abstractmethod
    @contextlib.contextmanager
    def transaction(self, conn: Any) -> Iterator[Any]:
        """A write transaction on ``conn``, committed at the end of the block; its cursor.

        Rows read in it stay what they were read as until it ends (SQLite takes the
        write lock at once, PostgreSQL locks what is read ``{for_update}``).
        """
        raise NotImplementedError

    @abc.abstractmethod
    def insert_signals(
        self, cur: Any, rows: list[list[Any]], *, again: bool
    ) -> dict[str, int] | None:
        """Insert signal rows (columns of ``SIGNAL_COLUMNS``); the new ones per run.

        ``again``: some rows may be there already (a batch written again after a commit
        whose answer was lost); they are skipped, and the new ones counted per run.
        Without it, a row there already raises :attr:`duplicate`, and ``None`` says
        every row was new.
        """
        raise NotImplementedError

    duplicate: tuple[type[BaseException], ...] = ()
    """What :meth:`insert_signals` raises for a row that is there already."""

    def transient(self, error: BaseException) -> str | None:
        """Why a write that failed with ``error`` may pass when tried again (``None``: it won't)."""
        return None

    def refused(self, error: BaseException) -> bool:
        """Whether a write failed for a value it held (the database is fine)."""
        return False

    @abc.abstractmethod
    def migrate(self) -> None:
        """Create or upgrade the tables to :data:`SCHEMA_VERSION`.

        Versions below 9 were each database's own (SQLite reached 8, PostgreSQL 7, by
        different steps); each dialect brings its own past to 8 or 7, then the shared
        steps from 9 on run on both.
        """
        raise NotImplementedError

    @abc.abstractmethod
    def close(self) -> None:
        """Close the connections (those in use close when they come back)."""
        raise NotImplementedError


def describe(error: BaseException) -> str:
    """An error in one line, for messages: its type and the first line of its text."""
    text = str(error).strip()
    first = text.splitlines()[0].rstrip(".") if text else ""
    return f"{type(error).__name__}: {first}" if first else type(error).__name__

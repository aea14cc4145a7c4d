"""Scratch PostgreSQL databases for the tests of the signal stores.

The server is the one at ``REACTOR_TEST_POSTGRES`` (by default
``postgresql://postgres@127.0.0.1:5432``, trust authentication); each test module makes
its own database there and drops it at the end. When the server cannot be reached the
tests fail: a skipped PostgreSQL suite would pass while testing nothing.
"""

from __future__ import annotations

import dataclasses
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest
from psycopg import sql

from reactor import PostgresSignalStore, SignalStoreBase, SQLiteSignalStore

SERVER = os.environ.get("REACTOR_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432")


@dataclasses.dataclass(frozen=True)
class StorePlace:
    """Where a test keeps its runs: a SQLite file or a PostgreSQL database."""

    kind: str
    where: str

    def open(self) -> SignalStoreBase:
        """A new store on this database (several may be open at once)."""
        if self.kind == "sqlite":
            return SQLiteSignalStore(self.where)
        return PostgresSignalStore(self.where)


@contextmanager
def admin() -> Iterator[psycopg.Connection[tuple[Any, ...]]]:
    """A connection to the server's ``postgres`` database, to create and drop databases."""
    try:
        conn = psycopg.connect(f"{SERVER}/postgres", autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as exc:
        pytest.fail(
            f"PostgreSQL is not reachable at {SERVER} ({exc}). Start it "
            "(`pg_ctlcluster --skip-systemctl-redirect 15 main start`, as .ci/run does) or "
            "point REACTOR_TEST_POSTGRES at a server.",
            pytrace=False,
        )
    with conn:
        yield conn


def create_database() -> str:
    """Make an empty database; return its URL."""
    name = f"reactor_test_{uuid.uuid4().hex[:12]}"
    with admin() as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return f"{SERVER}/{name}"


def drop_database(dsn: str) -> None:
    """Drop the database of ``dsn``, whoever is still connected to it."""
    name = dsn.rsplit("/", 1)[1]
    with admin() as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


def drop_reactor_tables(dsn: str) -> None:
    """Drop the store's tables (``reactor_*``), leaving the database as new."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        tables = [
            row[0]
            for row in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() "
                "AND starts_with(tablename, 'reactor_')"
            )
        ]
        if tables:
            conn.execute(
                sql.SQL("DROP TABLE {} CASCADE").format(
                    sql.SQL(", ").join(sql.Identifier(table) for table in tables)
                )
            )


def execute(dsn: str, statement: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Run one statement on its own connection (as another program would); return its rows."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        cursor = conn.execute(statement, params)
        return cursor.fetchall() if cursor.description else []


SQLITE_SINCE_7 = ("ALTER TABLE signals DROP COLUMN hash", "DROP TABLE audit_chain")
"""What schema 8 of a SQLite store added: undone, a file is as version 7 wrote it."""

SQLITE_SINCE_6 = (
    *SQLITE_SINCE_7,
    "DROP INDEX signals_asking",
    "ALTER TABLE runs DROP COLUMN last_seq",
    "ALTER TABLE runs DROP COLUMN input_tokens",
    "ALTER TABLE runs DROP COLUMN output_tokens",
    "ALTER TABLE runs DROP COLUMN cost_usd",
    "ALTER TABLE runs DROP COLUMN state",
)
"""What schema 7 of a SQLite store added: undone, a file is as version 6 wrote it."""

POSTGRES_SINCE_6 = (
    "ALTER TABLE reactor_signals DROP COLUMN hash",
    "DROP TABLE reactor_audit_chain",
)
"""What schema 7 of a PostgreSQL store added: undone, the tables are as version 6 wrote them."""

POSTGRES_SINCE_5 = (
    *POSTGRES_SINCE_6,
    "DROP INDEX reactor_signals_asking",
    "ALTER TABLE reactor_runs DROP COLUMN last_seq",
    "ALTER TABLE reactor_runs DROP COLUMN input_tokens",
    "ALTER TABLE reactor_runs DROP COLUMN output_tokens",
    "ALTER TABLE reactor_runs DROP COLUMN cost_usd",
    "ALTER TABLE reactor_runs DROP COLUMN state",
)
"""What schema 6 of a PostgreSQL store added: undone, the tables are as version 5 wrote them."""

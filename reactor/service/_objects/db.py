"""One database of the service: its URL, an async engine, transactions, migrations.

SQLite (``sqlite:///path``, through aiosqlite) is the embedded default; PostgreSQL
(``postgresql://...``, through psycopg 3) is for production and for several processes.
The schema comes only from the Alembic revisions shipped in ``migrations/``; they run
when a database is opened (and with ``reactor db upgrade``).

Writes are serialized where it matters: on SQLite every write transaction starts with
``BEGIN IMMEDIATE`` (one writer at a time across processes) behind a lock of this
process (so its writers queue without spinning on the file lock); on PostgreSQL, the
writes of objects take a transaction-scoped advisory lock, so that change events
commit in the order of their ids and a reader that follows the ids misses none.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from reactor._signals.settings import masked_url
from reactor.exceptions import DatabaseError, ServiceConfigError
from reactor.exceptions._extras import require_extras

__all__ = ["DEFAULT_URL", "VERSION_TABLE", "Database", "describe_url", "upgrade_database"]

DEFAULT_URL = "sqlite:///.reactor/app.db"
"""Where the object store and the service keep their tables unless told otherwise."""

VERSION_TABLE = "reactor_service_version"
"""Alembic's version table, named apart from an application's own ``alembic_version``."""

T = TypeVar("T")

MIGRATIONS = Path(__file__).parent / "migrations"

_READERS = 2
"""Threads (and connections) that read an SQLite file for :meth:`Database.run_read`."""

_OBJECT_WRITES_LOCK = 0x52454143
"""The PostgreSQL advisory lock key that orders object writes ("REAC")."""


def describe_url(url: str) -> str:
    """The URL as it may be shown: its password and query-string secrets masked."""
    return masked_url(url)


ACCEPTED_SCHEMES = (
    "sqlite:///path/to/file.db (aiosqlite) or postgresql://user@host:5432/dbname (psycopg 3)"
)
"""What a database URL may look like (``postgres://`` is taken as ``postgresql://``)."""

_SQLITE_DRIVERS = ("", "pysqlite", "aiosqlite")
_POSTGRES_DRIVERS = ("", "psycopg", "psycopg2")


def _driver_url(url: str) -> sa.URL:
    """The SQLAlchemy URL of ``url`` with the async driver this package uses.

    The scheme is read from the text (no dialect is loaded), so an unusable URL is one
    line naming the accepted schemes, never a traceback of SQLAlchemy's plugin loader.
    """
    if "://" not in url:
        url = f"sqlite:///{url}"  # a bare path is an SQLite file
    try:
        parsed = sa.make_url(url)
    except sa.exc.ArgumentError:
        raise ServiceConfigError(
            f"Cannot read the database URL {describe_url(url)!r}; use {ACCEPTED_SCHEMES}."
        ) from None
    backend, _, driver = parsed.drivername.partition("+")
    if backend == "sqlite" and driver in _SQLITE_DRIVERS:
        return parsed.set(drivername="sqlite+aiosqlite")
    if backend in ("postgresql", "postgres") and driver in _POSTGRES_DRIVERS:
        require_extras("postgres", what="A postgresql:// database")
        return parsed.set(drivername="postgresql+psycopg")
    raise ServiceConfigError(
        f"Unsupported database URL {describe_url(url)!r}: use {ACCEPTED_SCHEMES}."
    )


class Database:
    """An open (or openable) database: ``await db.open()``, then ``read()`` / ``write()``.

    Args:
        url: ``sqlite:///path`` (a bare path works too), ``sqlite://`` for memory, or
            ``postgresql://user@host:port/dbname``.

    Raises:
        ServiceConfigError: The URL is not one of those.
    """

    def __init__(self, url: str) -> None:
        self.url = url
        self.driver_url = _driver_url(url)
        self.dialect = self.driver_url.get_backend_name()
        database = self.driver_url.database or ""
        self.memory = self.dialect == "sqlite" and database in ("", ":memory:")
        self.path = None if self.memory or self.dialect != "sqlite" else Path(database)
        self._engine: AsyncEngine | None = None
        self._opening = asyncio.Lock()
        self._writing = asyncio.Lock()
        self._writer: concurrent.futures.ThreadPoolExecutor | None = None
        self._sync_engine: sa.Engine | None = None
        self._readers: concurrent.futures.ThreadPoolExecutor | None = None
        self._read_engine: sa.Engine | None = None
        self._read_engine_made = threading.Lock()
        self.revision: str | None = None

    @property
    def engine(self) -> AsyncEngine:
        """The open engine.

        Raises:
            DatabaseError: The database is not open.
        """
        if self._engine is None:
            raise DatabaseError(
                f"The database {describe_url(self.url)} is not open; use `async with` on "
                "the object store (or the service) first."
            )
        return self._engine

    @property
    def is_open(self) -> bool:
        """Whether the engine is open."""
        return self._engine is not None

    async def open(self) -> None:
        """Create the engine and bring the schema up to date (once; later calls return).

        Raises:
            DatabaseError: The database cannot be reached or migrated.
        """
        async with self._opening:
            if self._engine is not None:
                return
            if self.path is not None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            engine = self._create_engine()
            try:
                async with self._transaction(engine, write=True) as conn:
                    self.revision = await conn.run_sync(upgrade, VERSION_TABLE)
            except (sa.exc.SQLAlchemyError, OSError) as exc:
                await engine.dispose()
                raise DatabaseError(
                    f"Cannot open the database {describe_url(self.url)}: "
                    f"{_reason(exc)}. Check the URL, and that the server runs and "
                    "accepts this user."
                ) from exc
            self._engine = engine

    async def close(self) -> None:
        """Close every connection (the database can be opened again)."""
        engine, self._engine = self._engine, None
        if engine is not None:
            await engine.dispose()
        writer, self._writer = self._writer, None
        sync_engine, self._sync_engine = self._sync_engine, None
        if writer is not None:
            await asyncio.get_running_loop().run_in_executor(writer, _dispose, sync_engine)
            writer.shutdown(wait=False)
        readers, self._readers = self._readers, None
        read_engine, self._read_engine = self._read_engine, None
        if readers is not None:
            readers.shutdown(wait=True)
            _dispose(read_engine)

    def _create_engine(self) -> AsyncEngine:
        options: dict[str, Any] = {}
        if self.dialect == "sqlite":
            options["connect_args"] = {"timeout": 30.0}
            options["pool_reset_on_return"] = None  # every transaction ends itself
        else:
            options["pool_pre_ping"] = True
        engine = create_async_engine(self.driver_url, **options)
        if self.dialect == "sqlite":
            _sqlite_transactions(engine.sync_engine)
        return engine

    @contextlib.asynccontextmanager
    async def read(self) -> AsyncIterator[AsyncConnection]:
        """A connection in a read transaction (a consistent snapshot)."""
        if self.memory:  # one shared connection: never read in the middle of a write
            async with self._writing, self._transaction(self.engine, write=False) as conn:
                yield conn
        else:
            async with self._transaction(self.engine, write=False) as conn:
                yield conn

    @contextlib.asynccontextmanager
    async def write(self, *, ordered: bool = False) -> AsyncIterator[AsyncConnection]:
        """A connection in a write transaction, committed on exit (rolled back on error).

        Args:
            ordered: Take the lock that orders object writes (PostgreSQL), so that the
                ids of change events commit in increasing order.
        """
        if self.dialect == "sqlite":
            async with self._writing, self._transaction(self.engine, write=True) as conn:
                yield conn
        else:
            async with self._transaction(self.engine, write=True) as conn:
                if ordered:
                    await conn.execute(
                        sa.select(sa.func.pg_advisory_xact_lock(_OBJECT_WRITES_LOCK))
                    )
                yield conn

    async def run_write(self, work: Callable[[sa.Connection], T]) -> T:
        """Run ``work(conn)`` in a write transaction (committed, or rolled back if it raises).

        ``work`` is synchronous. On an SQLite file it runs whole in this database's
        writer thread, on a connection of its own (``BEGIN IMMEDIATE``, behind the
        lock of this process's writers): one thread hop for the transaction, not
        several per statement. Elsewhere it runs on an async connection (with the
        lock that orders object writes on PostgreSQL).
        """
        if self.dialect != "sqlite" or self.memory:
            async with self.write(ordered=True) as conn:
                return await conn.run_sync(work)
        self.engine  # noqa: B018  (raises when the database is not open)
        if self._writer is None:
            self._writer = concurrent.futures.ThreadPoolExecutor(1, "reactor-db-writer")
        loop = asyncio.get_running_loop()
        async with self._writing:
            return await loop.run_in_executor(self._writer, self._write_here, work)

    async def run_read(self, work: Callable[[sa.Connection], T]) -> T:
        """Run ``work(conn)`` in a read transaction (a consistent snapshot); its result.

        ``work`` is synchronous. On an SQLite file it runs whole in one of this
        database's reader threads, on a connection of their own: one thread hop for the
        transaction, not several per statement (for the reads of every request, such
        as a page of suggestions and the session that asks for it). Elsewhere it runs
        on an async connection.
        """
        if self.dialect != "sqlite" or self.memory:
            async with self.read() as conn:
                return await conn.run_sync(work)
        self.engine  # noqa: B018  (raises when the database is not open)
        if self._readers is None:
            self._readers = concurrent.futures.ThreadPoolExecutor(_READERS, "reactor-db-reader")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._readers, self._read_here, work)

    def _read_here(self, work: Callable[[sa.Connection], T]) -> T:
        """In a reader thread: one read transaction on a pooled connection."""
        with self._read_engine_made:
            if self._read_engine is None:
                url = self.driver_url.set(drivername="sqlite+pysqlite")
                engine = sa.create_engine(
                    url,
                    connect_args={"timeout": 30.0, "check_same_thread": False},
                    pool_reset_on_return=None,
                    pool_size=_READERS,
                )
                _sqlite_transactions(engine)
                self._read_engine = engine
            engine = self._read_engine
        with engine.connect() as conn, conn.begin():
            return work(conn)

    def _write_here(self, work: Callable[[sa.Connection], T]) -> T:
        """In the writer thread: one transaction on its own connection."""
        if self._sync_engine is None:
            url = self.driver_url.set(drivername="sqlite+pysqlite")
            engine = sa.create_engine(
                url, connect_args={"timeout": 30.0}, pool_reset_on_return=None
            )
            _sqlite_transactions(engine)
            self._sync_engine = engine
        with self._sync_engine.connect() as conn:
            conn = conn.execution_options(reactor_write=True)
            with conn.begin():
                return work(conn)

    @contextlib.asynccontextmanager
    async def _transaction(
        self, engine: AsyncEngine, *, write: bool
    ) -> AsyncIterator[AsyncConnection]:
        async with engine.connect() as conn:
            if write and self.dialect == "sqlite":
                conn = await conn.execution_options(reactor_write=True)
            async with conn.begin():
                yield conn

    def __repr__(self) -> str:
        state = "open" if self.is_open else "closed"
        return f"<Database {describe_url(self.url)} {state}>"


async def upgrade_database(url: str = DEFAULT_URL) -> str | None:
    """Create or migrate the service's tables in the database at ``url``.

    What ``reactor db upgrade`` does; opening an object store or a service does it too.
    Returns the revision the database is at.

    Raises:
        ServiceConfigError: The URL is not a supported database.
        DatabaseError: The database cannot be reached or migrated.
    """
    db = Database(url)
    await db.open()
    await db.close()
    return db.revision


def _dispose(engine: sa.Engine | None) -> None:
    if engine is not None:
        engine.dispose()


def _sqlite_transactions(engine: sa.Engine) -> None:
    """Let SQLAlchemy, not the sqlite3 module, begin transactions (BEGIN IMMEDIATE to write)."""

    @sa.event.listens_for(engine, "connect")
    def _connect(dbapi_connection: Any, record: Any) -> None:
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    @sa.event.listens_for(engine, "begin")
    def _begin(conn: sa.Connection) -> None:
        write = conn.get_execution_options().get("reactor_write", False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")


def upgrade(conn: sa.Connection, version_table: str) -> str | None:
    """Run the shipped migrations up to the newest on ``conn``; return the revision."""
    from alembic import command
    from alembic.config import Config
    from alembic.runtime.migration import MigrationContext

    if conn.dialect.name == "postgresql":  # two processes starting at once migrate in turn
        conn.execute(sa.select(sa.func.pg_advisory_xact_lock(_OBJECT_WRITES_LOCK + 1)))
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["connection"] = conn
    config.attributes["version_table"] = version_table
    command.upgrade(config, "head")
    context = MigrationContext.configure(conn, opts={"version_table": version_table})
    return context.get_current_revision()


def _reason(exc: BaseException) -> str:
    """The first line of a database error, without SQLAlchemy's background link."""
    original = getattr(exc, "orig", None) or exc
    text = str(original).strip().splitlines()
    return text[0] if text else type(original).__name__

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from reactor import MemorySignalStore, SignalStoreBase
from tests.reactor.databases import (
    StorePlace,
    create_database,
    drop_database,
    drop_reactor_tables,
)
from tests.reactor.support import SlowProvider


@pytest.fixture
def slow_provider() -> SlowProvider:
    return SlowProvider(10.0)


@pytest.fixture(scope="module")
def postgres_database() -> Iterator[str]:
    """This test module's own PostgreSQL database, dropped when the module is done."""
    dsn = create_database()
    try:
        yield dsn
    finally:
        drop_database(dsn)


@pytest.fixture
def postgres_dsn(postgres_database: str) -> str:
    """The module's database without the store's tables: each test starts as on a new one."""
    drop_reactor_tables(postgres_database)
    return postgres_database


@pytest.fixture(
    params=[pytest.param("sqlite", id="sqlite"), pytest.param("postgres", id="postgres")]
)
def store_place(request: pytest.FixtureRequest, tmp_path: Path) -> StorePlace:
    """Each kind of store that keeps runs in a database, on an empty one per test."""
    if request.param == "sqlite":
        return StorePlace("sqlite", str(tmp_path / "nested" / "runs.db"))
    return StorePlace("postgres", request.getfixturevalue("postgres_dsn"))


@pytest.fixture
def signal_store(store_place: StorePlace) -> Iterator[SignalStoreBase]:
    """A store of each kind (SQLite, PostgreSQL) on an empty database, closed after the test."""
    with store_place.open() as store:
        yield store


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def any_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SignalStoreBase]:
    """Each store reactor ships, on an empty database."""
    if request.param == "memory":
        yield MemorySignalStore()
        return
    where = str(tmp_path / "runs.db")
    if request.param == "postgres":
        where = request.getfixturevalue("postgres_dsn")
    with StorePlace(request.param, where).open() as store:
        yield store

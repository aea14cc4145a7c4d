from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx2
import psycopg
import pytest
from playwright.sync_api import Browser, Page

from tests.reactor.databases import admin, create_database, drop_database
from tests.service.browsing import chromium, signed_in
from tests.service.server import Server


@pytest.fixture(scope="module")
def postgres_database() -> Iterator[str]:
    """This test module's own PostgreSQL database, dropped when the module is done."""
    dsn = create_database()
    try:
        yield dsn
    finally:
        drop_database(dsn)


@pytest.fixture
def postgres_url(postgres_database: str) -> str:
    """The module's database emptied (every table dropped): each test starts on a new one."""
    name = postgres_database.rsplit("/", 1)[1]
    with admin() as conn:
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = %s AND pid <> pg_backend_pid()",
            (name,),
        )
    with psycopg.connect(postgres_database, autocommit=True) as conn:
        conn.execute("DROP SCHEMA public CASCADE")
        conn.execute("CREATE SCHEMA public")
    return postgres_database


@pytest.fixture(
    params=[pytest.param("sqlite", id="sqlite"), pytest.param("postgres", id="postgres")]
)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """An empty database of each kind the service runs on: a SQLite file, PostgreSQL."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'data' / 'app.db'}"
    return str(request.getfixturevalue("postgres_url"))


@pytest.fixture
def api(server: Server) -> Iterator[httpx2.Client]:
    """An API client of the module's ``server``, as alice."""
    with server.client() as client:
        yield client


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """Debian's Chromium, one for the module."""
    with chromium() as launched:
        yield launched


@pytest.fixture
def page(browser: Browser, server: Server) -> Iterator[Page]:
    """A page of the module's ``server``, signed in as alice, in its own browser context."""
    with signed_in(browser, server) as opened:
        yield opened


def pytest_collection_finish(session: pytest.Session) -> None:
    """Install Debian's Chromium before the run when a collected test drives a browser."""
    if any("browser" in getattr(item, "fixturenames", ()) for item in session.items):
        from tests.service.browser import ensure_chromium

        ensure_chromium()

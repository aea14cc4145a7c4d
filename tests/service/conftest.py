from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx2
import psycopg
import pytest
import redis
from playwright.sync_api import Browser, Page

from reactor.service._scaleout.jobs import RedisKeys
from tests.reactor.databases import admin, create_database, drop_database
from tests.service.browsing import chromium, signed_in
from tests.service.server import Server

REDIS = os.environ.get("REACTOR_TEST_REDIS", "redis://127.0.0.1:6379")


@pytest.fixture
def redis_keys(monkeypatch: pytest.MonkeyPatch) -> RedisKeys:
    """The names this test's services keep in Redis: under a prefix of the test's own.

    Set as ``REACTOR_REDIS_PREFIX`` for this process and the servers and workers it
    starts, so that two test sessions on one Redis (CI's, a developer's beside it) never
    share a job stream, a consumer group or the workers' heartbeats.
    """
    prefix = f"t{uuid.uuid4().hex[:12]}"
    monkeypatch.setenv("REACTOR_REDIS_PREFIX", prefix)
    return RedisKeys(prefix)


@pytest.fixture
def redis_url(worker_id: str, redis_keys: RedisKeys) -> Iterator[str]:
    """A Redis database of this test process's, this test's keys deleted after it."""
    number = 8 + (0 if worker_id == "master" else int(worker_id.removeprefix("gw")))
    url = f"{REDIS}/{number}"
    client = redis.Redis.from_url(url, socket_connect_timeout=5)
    try:
        client.ping()
    except redis.ConnectionError as exc:
        pytest.fail(
            f"Redis is not reachable at {REDIS} ({exc}). Start it (`redis-server --daemonize "
            'yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no`, as .ci/run does).'
        )
    yield url
    for pattern in (f"{redis_keys.prefix}:*", f"{redis_keys.prefix}-*"):
        for key in client.scan_iter(match=pattern, count=500):
            client.delete(key)
    client.close()


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

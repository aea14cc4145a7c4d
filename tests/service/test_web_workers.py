"""The workers page of a service that queues its runs: real Redis, PostgreSQL and a worker."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from playwright.sync_api import Browser, expect

from reactor.service._scaleout.queue import QueueSettings, live_workers
from tests.service.browsing import WAIT_MS, signed_in, start
from tests.service.server import Server, ok, serving, wait_for

REDIS = os.environ.get("REACTOR_TEST_REDIS", "redis://127.0.0.1:6379")
APP = "tests.service.queued:make_service"
OLD_APP = "tests.service.rolling:make_old_service"
PATIENCE = 180
"""Seconds a worker is given to start (a bound on a hang, not a speed check)."""


@pytest.fixture
def queued(redis_url: str, postgres_url: str, tmp_path: Path) -> Iterator[Server]:
    """``reactor serve`` that only queues its runs (``REACTOR_REDIS_URL`` set)."""
    env = {"REACTOR_REDIS_URL": redis_url, "REACTOR_RECLAIM_AFTER": "2"}
    with serving(postgres_url, tmp_path / "server.log", app=APP, env=env) as server:
        yield server


def _worker(app: str, redis_url: str, postgres_url: str, tmp_path: Path) -> Iterator[int]:
    """One ``reactor worker`` process of ``app`` (its pid), killed at the end."""
    env = {
        **os.environ,
        "REACTOR_REDIS_URL": redis_url,
        "REACTOR_RECLAIM_AFTER": "2",
        "REACTOR_SERVICE_DB": postgres_url,
    }
    command = [sys.executable, "-m", "reactor", "worker", "--app", app, "--concurrency", "3"]
    with (tmp_path / "worker.log").open("wb") as log:
        process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        # Up once its heartbeat is in Redis: some 20 s after its start at a load of 10.
        # Read in a thread of its own: the browser's driver runs an event loop in this one.
        settings = QueueSettings(redis_url, prefix=os.environ["REACTOR_REDIS_PREFIX"])

        def up() -> bool:
            if process.poll() is not None:
                pytest.fail(f"the worker exited:\n{(tmp_path / 'worker.log').read_text()}")
            with ThreadPoolExecutor(1) as thread:
                found = thread.submit(lambda: asyncio.run(live_workers(settings))).result()
            return any(worker["pid"] == process.pid for worker in found)

        wait_for(up, timeout=PATIENCE)
        yield process.pid
    finally:
        process.kill()
        process.wait(10)


@pytest.fixture
def worker(queued: Server, redis_url: str, postgres_url: str, tmp_path: Path) -> Iterator[int]:
    """One ``reactor worker`` process of the service's app (its pid)."""
    yield from _worker(APP, redis_url, postgres_url, tmp_path)


@pytest.fixture
def old_worker(queued: Server, redis_url: str, postgres_url: str, tmp_path: Path) -> Iterator[int]:
    """One ``reactor worker`` of an older version of the app: it lacks the ``steps`` graph."""
    yield from _worker(OLD_APP, redis_url, postgres_url, tmp_path)


@pytest.mark.timeout(PATIENCE + 120)
def test_the_workers_page_lists_each_live_worker_and_the_runs_it_holds(
    browser: Browser, queued: Server, worker: int
) -> None:
    with signed_in(browser, queued) as page, queued.client() as api:
        page.goto("/workers")
        row = page.locator("#worker-rows tr", has_text=f"-{worker}-")
        expect(row).to_be_visible(timeout=WAIT_MS * 2)  # the table follows the heartbeats
        expect(row.locator('[data-label="PID"]')).to_have_text(str(worker))
        expect(row.locator('[data-label="Runs held"]')).to_contain_text("0 of 3")
        expect(row.locator('[data-label="Last heartbeat (UTC)"]')).to_contain_text(" s ago")
        run_id = start(api, "steps", {"seconds": 4})
        expect(row.locator('[data-label="Runs held"]')).to_contain_text("1 of 3")
        held = row.get_by_role("link", name=run_id)
        expect(held).to_be_visible()
        held.click()
        expect(page.locator("#run-status")).to_have_text("completed", timeout=WAIT_MS * 2)
        assert ok(api.get(f"/api/runs/{run_id}"))["info"]["status"] == "completed"
        page.goto("/workers")
        expect(page.locator("#in-process")).to_have_count(0)
        expect(row.locator('[data-label="Runs held"]')).to_contain_text("0 of 3")


@pytest.mark.timeout(PATIENCE + 120)
def test_the_workers_page_shows_a_job_waiting_for_a_worker_with_its_code(
    browser: Browser, queued: Server, old_worker: int
) -> None:
    """The only worker lacks the graph a run needs: the run stays queued, and the page
    says what it waits for."""
    with signed_in(browser, queued) as page, queued.client() as api:
        page.goto("/workers")
        expect(page.locator("#worker-rows tr", has_text=f"-{old_worker}-")).to_be_visible(
            timeout=WAIT_MS * 2
        )
        expect(page.locator("#waiting-rows")).to_contain_text("None")
        run_id = start(api, "steps", {"seconds": 0})
        row = page.locator("#waiting-rows tr", has_text=run_id)
        expect(row).to_be_visible(timeout=WAIT_MS * 2)  # the table follows the queue
        expect(row.locator('[data-label="Waiting for"]')).to_have_text(
            "a worker with graph 'steps'"
        )
        expect(row.locator('[data-label="Since (UTC)"]')).to_contain_text(" s ago")
        row.get_by_role("link", name=run_id).click()
        expect(page.locator("#run-status")).to_have_text("queued")
        assert ok(api.get(f"/api/runs/{run_id}"))["info"]["status"] == "queued"

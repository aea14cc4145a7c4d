"""The web UI mounted under ``/reactor`` in a user's app, in a real browser (Chromium).

What the page's script builds (the live timeline's links, its event stream) lives
under the prefix too, and no request of the page goes outside it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest
from playwright.sync_api import Browser, Response, expect

from tests.redis_server import free_port
from tests.service.browsing import WAIT_MS, chromium
from tests.service.server import ALICE, wait_for


@pytest.fixture
def mounted(tmp_path: Path) -> Iterator[str]:
    """``uvicorn tests.service.mounted:app`` on a free loopback port; its address."""
    port = free_port()
    env = {**os.environ, "PYTHONPATH": os.getcwd(), "MOUNTED_DB": f"sqlite:///{tmp_path}/m.db"}
    command = [sys.executable, "-m", "uvicorn", "tests.service.mounted:app", "--port", str(port)]
    with (tmp_path / "uvicorn.log").open("wb") as log:
        process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"

    def up() -> bool:
        assert process.poll() is None, (tmp_path / "uvicorn.log").read_text()
        try:
            return httpx2.get(f"{url}/reactor/healthz", timeout=2).status_code == 200
        except httpx2.TransportError:
            return False

    try:
        wait_for(up, timeout=60)
        yield url
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


@pytest.fixture
def browser() -> Iterator[Browser]:
    """Debian's Chromium (installed by the test set-up when missing)."""
    with chromium() as launched:
        yield launched


def test_the_mounted_ui_follows_a_run_live_under_the_prefix(mounted: str, browser: Browser) -> None:
    with httpx2.Client(base_url=mounted, headers={"Authorization": f"Bearer {ALICE}"}) as api:
        assert api.get("/").json() == {"app": "the user's"}
        started = api.post("/reactor/api/runs", json={"graph": "relay", "input": {"seconds": 120}})
        assert started.status_code == 202, started.text
        run_id = started.json()["run_id"]
        requested: list[str] = []
        failed: list[str] = []

        def seen(response: Response) -> None:
            requested.append(response.url)
            if response.status >= 400:
                failed.append(f"{response.status} {response.url}")

        context = browser.new_context(base_url=mounted)
        context.set_default_timeout(WAIT_MS)
        page = context.new_page()
        page.on("response", seen)
        page.goto("/reactor/")
        page.get_by_label("Token").fill(ALICE)
        page.get_by_role("button", name="Sign in").click()
        expect(page.get_by_role("heading", name="Runs")).to_be_visible()
        assert page.url == f"{mounted}/reactor/runs"
        page.get_by_role("link", name=run_id).click()
        expect(page.locator("#run-status")).to_have_text("running")
        sent = api.post(f"/reactor/api/runs/{run_id}/signals", json={"name": "go", "payload": {}})
        assert sent.status_code == 202, sent.text
        timeline = page.locator("#timeline")
        expect(timeline).to_contain_text("echoed")
        expect(timeline.locator("li").last).to_contain_text("harness:end", timeout=WAIT_MS * 2)
        links = timeline.locator("li.new a")  # made by the page's script as signals came
        assert links.count() > 0
        hrefs = [links.nth(i).get_attribute("href") or "" for i in range(links.count())]
        assert all(href.startswith(f"/reactor/runs/{run_id}") for href in hrefs), hrefs
        links.last.click()
        assert "/fork?at=" in hrefs[-1]
        expect(page).to_have_url(mounted + hrefs[-1])
        expect(page.get_by_role("button", name="Start the fork")).to_be_visible()
        context.close()
        assert not failed, failed
        assert any(url.endswith("/reactor/static/web.js") for url in requested)
        assert all(url.startswith(f"{mounted}/reactor/") for url in requested), requested

"""Take the screenshots of docs/web.md: every page of the web UI, in Debian's Chromium.

Run it from the repository's root with ``make screenshots`` (or ``.venv/bin/python
docs/images/make_screenshots.py``). It serves ``docs/images/screenshot_app.py`` (the
trading bot of ``examples/trading_bot``, a release graph that asks a person, the CRM's
reaction agents) on a fresh SQLite file, makes some runs through the API, and has Playwright
drive ``/usr/bin/chromium`` (installed with apt when it is missing, never a downloaded
browser) over each page. The workers page comes from a second service that queues its
runs on a private ``redis-server`` (started on a free port and stopped at the end) and
one ``reactor worker``. The pictures are written into this folder.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import httpx2  # noqa: E402
from playwright.sync_api import Page, ViewportSize, sync_playwright  # noqa: E402 (after the repository is on the path)

from examples.trading_bot.scripted import SCENARIOS  # noqa: E402
from tests.service.browser import ensure_chromium  # noqa: E402
from tests.service.server import ALICE, Server, free_port, serving, wait_for  # noqa: E402

HERE = Path(__file__).resolve().parent
APP = "docs.images.screenshot_app:make_service"
SIZE: ViewportSize = {"width": 1000, "height": 680}
"""The browser's window: wide enough for the tables, small enough for small pictures."""


def _sign_in(page: Page) -> None:
    page.goto("/")
    page.get_by_label("Token").fill(ALICE)
    page.get_by_role("button", name="Sign in").click()
    page.get_by_role("heading", name="Runs").wait_for()


def _shoot(page: Page, name: str, height: int = SIZE["height"]) -> None:
    """Take ``web-<name>.png`` of what the window shows, ``height`` pixels high."""
    page.set_viewport_size({"width": SIZE["width"], "height": height})
    page.wait_for_load_state("networkidle")
    page.screenshot(path=HERE / f"web-{name}.png")
    print(f"docs/images/web-{name}.png", flush=True)


def _runs(server: Server) -> dict[str, str]:
    """Runs to look at: trades of two symbols, releases (one waiting), a reaction."""
    made: dict[str, httpx2.Response] = {}
    with server.client() as api:
        person = {"name": "Ada Lovelace", "email": "ada@acme.io"}
        api.post("/api/objects", json={"type": "Person", "data": person})
        for symbol, scenario in (("AAPL", "bull"), ("NVDA", "bear"), ("MSFT", "flat")):
            given = {"symbol": symbol, "prices": SCENARIOS[scenario], "cash": 10_000.0}
            made[symbol] = api.post("/api/runs", json={"graph": "trading-bot", "input": given})
        made["v1.3"] = api.post(
            "/api/runs", json={"graph": "release", "input": {"version": "v1.3"}}
        )
        made["v1.4"] = api.post(
            "/api/runs", json={"graph": "release", "input": {"version": "v1.4"}}
        )
        ids = {key: response.json()["run_id"] for key, response in made.items()}
        for key in ("v1.3", "v1.4"):
            run = f"/api/runs/{ids[key]}"
            wait_for(lambda run=run: api.get(run).json()["info"]["status"] == "waiting")
        prompt = api.get(f"/api/runs/{ids['v1.3']}").json()["prompts"][0]["prompt_id"]
        reply = {"answer": "ship it"}
        api.post(f"/api/runs/{ids['v1.3']}/prompts/{prompt}/reply", json=reply)
        api.post("/api/agents/digest/run", json={"input": None})
        for key in ("AAPL", "NVDA", "MSFT", "v1.3"):
            run = f"/api/runs/{ids[key]}"
            wait_for(lambda run=run: api.get(run).json()["info"]["complete"], timeout=60)
    return ids


def _pages(server: Server, chromium: Path) -> None:
    ids = _runs(server)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(chromium), args=["--no-sandbox"])
        page = browser.new_page(base_url=server.url, viewport=SIZE)
        page.set_default_timeout(15_000)
        page.goto("/")
        _shoot(page, "sign-in", 300)
        _sign_in(page)
        _shoot(page, "runs", 860)
        page.goto("/graphs")
        _shoot(page, "graphs", 360)
        page.goto("/graphs/trading-bot")
        _shoot(page, "graph")
        page.goto(f"/runs/{ids['v1.4']}")
        page.locator("form.prompt").wait_for()
        _shoot(page, "run", 980)
        page.goto(f"/runs/{ids['v1.3']}#answered")
        _shoot(page, "run-answered", 600)
        page.goto("/suggestions")
        _shoot(page, "suggestions")
        page.goto("/agents")
        _shoot(page, "agents")
        page.goto("/processing-log")
        _shoot(page, "processing-log")
        browser.close()


@contextlib.contextmanager
def _redis() -> Iterator[str]:
    """A private ``redis-server`` on a free loopback port (stopped at the end)."""
    port = free_port()
    command = ["redis-server", "--port", str(port), "--bind", "127.0.0.1"]
    command += ["--save", "", "--appendonly", "no"]
    try:
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL)
    except FileNotFoundError:
        sys.exit("The workers page needs redis-server: apt-get install -y redis-server")
    try:
        time.sleep(0.5)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        process.terminate()
        process.wait(10)


def _workers(folder: Path, chromium: Path) -> None:
    """The workers page of a service that queues its runs, one worker holding a run."""
    db = f"sqlite:///{folder}/queued.db"
    with _redis() as url:
        env = {"REACTOR_REDIS_URL": url, "REACTOR_RECLAIM_AFTER": "5"}
        with serving(db, folder / "queued.log", app=APP, env=env) as server:
            worker_env = {**os.environ, **env, "REACTOR_SERVICE_DB": db, "PYTHONPATH": str(ROOT)}
            command = [sys.executable, "-m", "reactor", "worker", "--app", APP, "--grace", "1"]
            with (folder / "worker.log").open("wb") as log:
                worker = subprocess.Popen(command, env=worker_env, stdout=log, stderr=log)
            try:
                with server.client() as api:
                    given = {"version": "v2.0"}
                    api.post("/api/runs", json={"graph": "release", "input": given})
                with sync_playwright() as playwright:
                    browser = playwright.chromium.launch(
                        executable_path=str(chromium), args=["--no-sandbox"]
                    )
                    page = browser.new_page(base_url=server.url, viewport=SIZE)
                    page.set_default_timeout(30_000)
                    _sign_in(page)
                    page.goto("/workers")
                    page.locator("#worker-rows a").first.wait_for()  # it holds the run
                    _shoot(page, "workers", 340)
                    browser.close()
            finally:
                worker.terminate()  # its run waits for an answer: held for the next worker
                try:
                    worker.wait(30)
                except subprocess.TimeoutExpired:
                    worker.kill()
                    worker.wait(10)


def main() -> None:
    """Serve the app, make some runs, take a picture of each page."""
    chromium = ensure_chromium()
    os.chdir(ROOT)
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        with serving(f"sqlite:///{folder}/app.db", folder / "server.log", app=APP) as server:
            _pages(server, chromium)
        _workers(folder, chromium)


if __name__ == "__main__":
    main()

"""Take the screenshots of docs/web.md: the runs list and a run's page.

Run it from the repository's root: ``.venv/bin/python -m docs.images.make_screenshots``
(or ``python docs/images/make_screenshots.py``). It serves the HTTP tests' app
(``tests/service/served.py``) on a fresh SQLite file, starts a few runs through the
API, and has Debian's Chromium (``/usr/bin/chromium``, installed with apt when it is
missing) take the pictures into this folder.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from playwright.sync_api import sync_playwright  # noqa: E402 (after the repository is on the path)

from tests.service.browser import ensure_chromium  # noqa: E402
from tests.service.server import ALICE, serving, wait_for  # noqa: E402

HERE = Path(__file__).resolve().parent


def main() -> None:
    """Serve the app, make some runs, take the two screenshots."""
    chromium = ensure_chromium()
    with (
        tempfile.TemporaryDirectory() as folder,
        serving(f"sqlite:///{folder}/app.db", Path(folder) / "server.log") as server,
        server.client() as api,
    ):
        for number in (1, 2, 3):
            api.post("/api/runs", json={"graph": "count", "input": number})
        api.post("/api/objects", json={"type": "Person", "data": {"name": "Ada"}})
        relay = api.post("/api/runs", json={"graph": "relay", "input": {"seconds": 1}})
        api.post(f"/api/runs/{relay.json()['run_id']}/signals", json={"name": "go"})
        waiting = api.post("/api/runs", json={"graph": "approval", "input": "v1.2"})
        run_id = waiting.json()["run_id"]
        wait_for(lambda: api.get(f"/api/runs/{run_id}").json()["info"]["status"] == "waiting")
        time.sleep(1.5)
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=str(chromium), args=["--no-sandbox"]
            )
            page = browser.new_page(base_url=server.url, viewport={"width": 1100, "height": 640})
            page.set_default_timeout(15_000)
            page.goto("/")
            page.get_by_label("Token").fill(ALICE)
            page.get_by_role("button", name="Sign in").click()
            page.get_by_role("heading", name="Runs").wait_for()
            page.screenshot(path=HERE / "web-runs.png")
            page.goto(f"/runs/{run_id}")
            page.locator("form.prompt").wait_for()
            page.screenshot(path=HERE / "web-run.png", full_page=True)
            browser.close()


if __name__ == "__main__":
    main()

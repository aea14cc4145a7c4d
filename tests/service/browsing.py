"""What the web UI's browser tests share: Chromium, signed-in pages, and the API beside them.

Playwright drives Debian's ``/usr/bin/chromium`` (see :mod:`tests.service.browser`)
against a real ``reactor serve`` on 127.0.0.1; every wait is bounded.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx2
from playwright.sync_api import Browser, Page, expect, sync_playwright

from tests.service.browser import CHROMIUM
from tests.service.server import ALICE, Server, ok

WAIT_MS = 15_000
"""Every wait of the browser is bounded: a step that does not happen fails the test."""

expect.set_options(timeout=WAIT_MS)


@contextmanager
def chromium() -> Iterator[Browser]:
    """Debian's Chromium, headless, closed at the end."""
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=["--no-sandbox"], timeout=WAIT_MS * 2
        )
        try:
            yield launched
        finally:
            launched.close()


def open_page(browser: Browser, server: Server, width: int = 1280) -> Page:
    """A page in a browser context of its own (its own cookies)."""
    context = browser.new_context(base_url=server.url, viewport={"width": width, "height": 900})
    context.set_default_timeout(WAIT_MS)
    return context.new_page()


def sign_in(page: Page, token: str = ALICE) -> None:
    page.goto("/")
    page.get_by_label("Token").fill(token)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Runs")).to_be_visible()


@contextmanager
def signed_in(browser: Browser, server: Server, token: str = ALICE) -> Iterator[Page]:
    """A signed-in page of its own browser context, closed at the end."""
    page = open_page(browser, server)
    try:
        sign_in(page, token)
        yield page
    finally:
        page.context.close()


def start(api: httpx2.Client, graph: str, given: Any = None) -> str:
    """Start a graph through the API; its run's id."""
    run_id: str = ok(api.post("/api/runs", json={"graph": graph, "input": given}), 202)["run_id"]
    return run_id

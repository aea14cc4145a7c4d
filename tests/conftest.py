"""What every test shares: the process's settings are read afresh for each test.

``reactor._signals.settings.settings()`` reads the ``REACTOR_*`` variables once per
process; a test that sets one (``monkeypatch.setenv``) must not see the value an
earlier test left in the cache, nor leave its own for the next.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from reactor._signals.settings import settings


@pytest.fixture(autouse=True)
def fresh_settings() -> Iterator[None]:
    """Forget the settings read before the test, and those it read."""
    settings.cache_clear()
    yield
    settings.cache_clear()

"""What every test shares: the process's settings are read afresh for each test, a
test's structlog configuration ends with it, and property tests hold on a loaded
machine (no deadline, no "too slow" health check: a machine at load 10 generates inputs
slowly, which says nothing about the code).

``reactor._signals.settings.settings()`` reads the ``REACTOR_*`` variables once per
process; a test that sets one (``monkeypatch.setenv``) must not see the value an
earlier test left in the cache, nor leave its own for the next.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import structlog
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings

from reactor._signals.settings import settings

hypothesis_settings.register_profile(
    "loaded", deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
hypothesis_settings.load_profile("loaded")


@pytest.fixture(autouse=True)
def fresh_settings() -> Iterator[None]:
    """Forget the settings read before the test, and those it read."""
    settings.cache_clear()
    yield
    settings.cache_clear()


@pytest.fixture(autouse=True)
def own_structlog() -> Iterator[None]:
    """Put back structlog's configuration as the test found it.

    Code run in the test's process (a CLI command, an example's ``main``) configures
    logging for a whole process; left behind, a level filter would hide the next test's
    debug lines from ``structlog.testing.capture_logs``.
    """
    configured, config = structlog.is_configured(), structlog.get_config()
    yield
    if configured:
        structlog.configure(**config)
    else:
        structlog.reset_defaults()

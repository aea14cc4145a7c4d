"""What every test shares: the process's settings are read afresh for each test, a
test's structlog configuration ends with it, and property tests hold on a loaded
machine (no deadline, no "too slow" health check: a machine at load 10 generates inputs
slowly, which says nothing about the code). The collector leaves the collected suite
alone, as ``reactor serve`` does with what it loads at start.

``reactor._signals.settings.settings()`` reads the ``REACTOR_*`` variables once per
process; a test that sets one (``monkeypatch.setenv``) must not see the value an
earlier test left in the cache, nor leave its own for the next.
"""

from __future__ import annotations

import gc
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


def pytest_collection_finish(session: pytest.Session) -> None:
    """Freeze what collection made (modules, test items): it lives as long as the process.

    Each full collection would otherwise walk it again, and the young generation is
    collected less often: ~10% less CPU in a test process. Tests of the collector set
    their own thresholds, and put these back.
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(10_000, 20, 50)


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

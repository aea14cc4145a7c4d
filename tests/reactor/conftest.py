from __future__ import annotations

import pytest

from tests.reactor.support import SlowProvider


@pytest.fixture
def slow_provider() -> SlowProvider:
    return SlowProvider(10.0)

"""The pytest plugin of reactor (registered as the ``reactor`` entry point of ``pytest11``).

Fixtures:

* ``reactor_signals``: a :class:`~reactor.testing.CapturedSignals` collecting every
  signal of the runs the test starts.
* ``scripted_provider``: a factory, ``scripted_provider({"agent": [...]}, latency=...)``
  returning a :class:`~reactor.ScriptedProvider`.
* ``fake_anthropic``: a factory, ``fake_anthropic(brain, **options)`` returning an
  :class:`~reactor.AnthropicProvider` on the real SDK against an in-process fake
  endpoint (see :func:`reactor.testing.fake_anthropic`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import pytest

from reactor._providers.scripted import Script, ScriptedProvider
from reactor.testing._capture import CapturedSignals, capture_signals

if TYPE_CHECKING:
    from reactor._providers.anthropic import AnthropicProvider

__all__ = ["fake_anthropic", "reactor_signals", "scripted_provider"]


@pytest.fixture
def reactor_signals() -> Iterator[CapturedSignals]:
    """Every signal of the runs started by the test."""
    with capture_signals() as captured:
        yield captured


@pytest.fixture
def scripted_provider() -> Callable[..., ScriptedProvider]:
    """A factory of :class:`~reactor.ScriptedProvider` (same arguments)."""

    def make(responses: Mapping[str, Script] | None = None, **options: Any) -> ScriptedProvider:
        return ScriptedProvider(responses, **options)

    return make


@pytest.fixture
def fake_anthropic() -> Callable[..., AnthropicProvider]:
    """A factory of providers on a fake Messages endpoint (see :func:`fake_anthropic`)."""
    from reactor.testing._fake_anthropic import fake_anthropic as make

    return make

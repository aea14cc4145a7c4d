from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from reactor import (
    Budget,
    BudgetExceededError,
    End,
    Provider,
    ProviderEvent,
    ProviderRequest,
    agent,
    reactive,
    run_reactive,
)
from reactor._providers.base import as_provider


class Echo(Provider):
    """The least a provider is: a stream, every other member left to its default."""

    async def stream(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        yield End(output=request.prompt, cost_usd=0.001)


class Duck:
    """A provider that does not subclass Provider: it only has a stream."""

    model = "duck-1"  # not read: a duck-typed provider gets the defaults

    async def stream(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        yield End(output=f"quack {request.prompt}")


def request(**options: Any) -> ProviderRequest:
    return ProviderRequest.build(agent="a", system=None, prompt="hi", options=options)


async def test_a_subclass_gets_the_documented_defaults() -> None:
    echo = Echo()
    assert echo.model is None
    assert echo.model_for(request()) is None
    assert echo.price_known(request()) is None
    await echo.turn_to_start(request())  # starts at once


def test_model_for_is_the_requests_model_option_else_the_providers_model() -> None:
    echo = Echo()
    echo.model = "echo-1"
    assert echo.model_for(request()) == "echo-1"
    assert echo.model_for(request(model="echo-2")) == "echo-2"


def test_a_subclass_without_stream_cannot_be_made() -> None:
    class Silent(Provider):
        pass

    with pytest.raises(TypeError, match=r"abstract.*\bstream\b"):
        Silent()  # type: ignore[abstract]  # the point of the test


async def test_a_subclass_answers_and_starts_with_its_model() -> None:
    echo = Echo()
    echo.model = "echo-1"
    result = await run_reactive(agent(name="a", prompt="hi"), provider=echo)
    assert result.status == "completed"
    assert result.select("provider:start")[0].payload["model"] == "echo-1"
    assert result.select("provider:end")[0].payload["output"] == "hi"


async def test_a_subclass_that_knows_a_price_is_missing_is_refused_a_usd_budget() -> None:
    class Unpriced(Echo):
        def price_known(self, request: ProviderRequest) -> bool:
            return False

    result = await run_reactive(
        agent(name="a", prompt="hi"), provider=Unpriced(), budget=Budget(usd=1.0)
    )
    assert isinstance(result.error, BudgetExceededError)
    priced = await run_reactive(
        agent(name="a", prompt="hi"), provider=Echo(), budget=Budget(usd=1.0)
    )
    assert priced.status == "completed"


async def test_a_duck_typed_provider_still_answers_with_the_defaults() -> None:
    duck: Any = Duck()  # no Provider subclass: typed Any, as a third-party object is
    result = await run_reactive(agent(name="a", prompt="hi"), provider=duck)
    assert result.status == "completed"
    assert result.select("provider:end")[0].payload["output"] == "quack hi"
    assert result.select("provider:start")[0].payload["model"] is None


def test_as_provider_wraps_a_duck_and_keeps_a_subclass() -> None:
    echo, duck = Echo(), Duck()
    assert as_provider(echo) is echo
    wrapped = as_provider(duck)
    assert isinstance(wrapped, Provider)
    assert wrapped.model is None
    assert repr(wrapped) == repr(duck)


def test_as_provider_refuses_an_object_without_stream() -> None:
    with pytest.raises(TypeError, match=r"^A provider must subclass reactor\.Provider"):
        as_provider(object())


async def test_a_runs_provider_without_stream_is_refused_at_the_door() -> None:
    graph = reactive([agent(name="a", prompt="hi")])
    nothing: Any = object()
    with pytest.raises(TypeError, match=r"^A provider must subclass reactor\.Provider"):
        await graph.run(provider=nothing)

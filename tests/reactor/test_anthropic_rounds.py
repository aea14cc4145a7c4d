"""AnthropicProvider across rounds: paused turns, retried streams, forced-tool answers."""

from __future__ import annotations

import pydantic

from reactor import ProviderError, agent, run_reactive
from reactor.testing import Failure, FakeAnthropic, ToolUse, turn


class Verdict(pydantic.BaseModel):
    approve: bool


OVERLOADED = {"type": "overloaded_error", "message": "Overloaded"}


async def test_a_paused_turn_is_continued_and_its_text_kept() -> None:
    fake = FakeAnthropic(turn("Searching... ", stop_reason="pause_turn"), turn("found it."))
    result = await run_reactive(agent(name="w", prompt="Go."), provider=fake.provider())
    assert result.output == "Searching... found it."
    assert fake.bodies[1]["messages"][-1] == {
        "role": "assistant",
        "content": [{"type": "text", "text": "Searching... "}],
    }
    assert result.metrics.input_tokens == 20


async def test_a_stream_that_fails_midway_is_retried_without_repeating_its_text() -> None:
    fake = FakeAnthropic(
        turn("Hel", error_after=OVERLOADED),
        turn("Hello there."),
    )
    result = await run_reactive(agent(name="w", prompt="Go."), provider=fake.provider())
    assert result.output == "Hello there."
    deltas = [s.payload["content"] for s in result.select("text:delta")]
    assert "".join(deltas) == "Hello there."
    assert [s.payload["content"] for s in result.select("text:complete")] == ["Hello there."]
    assert len(fake.requests) == 2


async def test_stream_retries_can_be_turned_off() -> None:
    fake = FakeAnthropic(turn("Hel", error_after=OVERLOADED), turn("Hello."))
    provider = fake.provider(stream_retries=0)
    result = await run_reactive(agent(name="w", prompt="Go."), provider=provider)
    assert isinstance(result.error, ProviderError)
    assert len(fake.requests) == 1


async def test_a_model_without_native_structured_output_answers_through_a_forced_tool() -> None:
    refusal = Failure(
        400, "invalid_request_error", "output_config.format is not supported on this model."
    )
    fake = FakeAnthropic(
        refusal,
        turn(ToolUse("r1", "respond", {"approve": True})),
        turn(ToolUse("r2", "respond", {"approve": False})),
    )
    provider = fake.provider()
    judge = agent(name="judge", prompt="Approve?", output=Verdict)
    first = await run_reactive(judge, provider=provider)
    second = await run_reactive(judge, provider=provider)
    assert (first.output, second.output) == (Verdict(approve=True), Verdict(approve=False))
    forced = fake.bodies[1]
    assert "format" not in forced.get("output_config", {})
    assert forced["tool_choice"] == {"type": "tool", "name": "respond"}
    assert forced["tools"][-1]["input_schema"]["required"] == ["approve"]
    assert "output_config" not in fake.bodies[2]  # the model is remembered
    assert first.select("tool:call") == []


async def test_structured_output_through_a_tool_can_be_chosen_up_front() -> None:
    def price(symbol: str) -> float:
        """A price."""
        return 1.0

    fake = FakeAnthropic(
        turn(ToolUse("t1", "price", {"symbol": "A"})),
        turn(ToolUse("r1", "respond", {"approve": True})),
    )
    judge = agent(name="judge", prompt="Approve?", output=Verdict, tools=[price])
    result = await run_reactive(judge, provider=fake.provider(structured_output="tool"))
    assert result.output == Verdict(approve=True)
    assert fake.bodies[0]["tool_choice"] == {"type": "any"}
    assert [s.payload["name"] for s in result.select("tool:call")] == ["price"]

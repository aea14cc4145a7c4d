"""agent.prompt(): settings precedence, typed answers, reflection, hooks, skills, env."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pydantic
import pytest

import reactor
from reactor import (
    AgentConfigError,
    Deny,
    Hooks,
    NoProviderError,
    OutputValidationError,
    Prompt,
    SessionInfo,
    Skill,
    ToolCall,
    ToolResult,
    agent,
    reactive,
)
from reactor.testing import FakeAnthropic, ScriptedProvider, ToolUse, turn


class Rating(pydantic.BaseModel):
    score: int
    reason: str


def quote(symbol: str) -> float:
    """The last price of a stock."""
    return 187.5


def write_skill(folder: Path, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "SKILL.md").write_text(text)
    return folder


RISK = "---\nname: risk\ndescription: How to rate risk.\n---\nRate risk as low, medium or high.\n"


# -- Prompt values -------------------------------------------------------------------


def test_a_prompt_is_immutable_and_renders_its_data() -> None:
    ask = Prompt(user="Rate {{ symbol }}", data={"symbol": "AAPL"}, response_format=Rating)
    assert ask.render() == "Rate AAPL"
    with pytest.raises(pydantic.ValidationError, match="frozen"):
        ask.user = "other"


def test_validate_response_returns_the_typed_value_or_says_what_is_wrong() -> None:
    ask = Prompt(user="Rate it", response_format=Rating)
    assert ask.validate_response('{"score": 3, "reason": "ok"}') == Rating(score=3, reason="ok")
    with pytest.raises(
        OutputValidationError,
        match=r"^The response does not match Rating: reason: Field required\.$",
    ):
        ask.validate_response({"score": 3})
    assert Prompt(user="free text").validate_response("anything") == "anything"


def test_a_prompt_template_with_a_syntax_error_is_refused_when_it_is_made() -> None:
    with pytest.raises(pydantic.ValidationError, match="syntax error on line 1"):
        Prompt(user="Rate {{ symbol ")


# -- precedence -----------------------------------------------------------------------


async def test_prompt_fields_win_over_call_overrides_which_win_over_the_agent() -> None:
    fake = FakeAnthropic(brain=lambda body: "ok")
    analyst = agent(
        name="analyst",
        system="agent system",
        options={"model": "claude-haiku-5-5", "max_tokens": 100},
        provider=fake.provider(),
    )
    await analyst.prompt("hi")
    await analyst.prompt("hi", system="call system", model="claude-opus-5-5", max_tokens=50)
    await analyst.prompt(Prompt(user="hi", system="prompt system"), system="call system")
    first, second, third = fake.bodies
    assert (first["system"], first["model"], first["max_tokens"]) == (
        "agent system",
        "claude-haiku-5-5",
        100,
    )
    assert (second["system"], second["model"], second["max_tokens"]) == (
        "call system",
        "claude-opus-5-5",
        50,
    )
    assert third["system"] == "prompt system"


async def test_tools_follow_the_same_precedence() -> None:
    def news(topic: str) -> str:
        """Headlines about a topic."""
        return "calm"

    fake = FakeAnthropic(brain=lambda body: "ok")
    analyst = agent(name="analyst", tools=[quote], provider=fake.provider())
    await analyst.prompt("hi")
    await analyst.prompt("hi", tools=[news])
    await analyst.prompt(Prompt(user="hi", tools=()), tools=[news])
    named = [[tool["name"] for tool in body.get("tools", [])] for body in fake.bodies]
    assert named == [["quote"], ["news"], []]


async def test_stop_temperature_and_cache_reach_the_request() -> None:
    fake = FakeAnthropic(brain=lambda body: "ok")
    analyst = agent(name="analyst", system="Be terse.", enable_cache=True, provider=fake.provider())
    await analyst.prompt("hi", stop="END", temperature=0)
    await analyst.prompt("hi", disable_cache=True)
    cached, plain = fake.bodies
    assert cached["stop_sequences"] == ["END"]
    assert cached["temperature"] == 0
    assert cached["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert plain["system"] == "Be terse."


async def test_an_unknown_override_names_the_one_it_probably_meant() -> None:
    analyst = agent(name="analyst", provider=ScriptedProvider(default=["ok"]))
    message = (
        r"^Agent 'analyst': prompt\(\) got unknown override 'temprature' \(did you mean "
        r"'temperature'\?\); it takes system, tools, mcps, skills, hooks, temperature, "
        r"max_tokens, stop, model, disable_cache, enable_reflection, max_reflections, env\.$"
    )
    with pytest.raises(TypeError, match=message):
        await analyst.prompt("hi", temprature=0)  # type: ignore[call-arg]  # the point


async def test_a_prompt_without_a_provider_says_how_to_give_one() -> None:
    with pytest.raises(NoProviderError, match=r"^Agent 'lonely' has no provider"):
        await agent(name="lonely").prompt("hi")


# -- typed answers, retries, reflection ------------------------------------------------


async def test_an_invalid_answer_is_sent_back_and_the_typed_answer_returned() -> None:
    fake = FakeAnthropic('{"score": "high"}', '{"score": 4, "reason": "steady"}')
    analyst = agent(name="analyst", provider=fake.provider())
    rating = await analyst.prompt(Prompt(user="Rate AAPL", response_format=Rating))
    assert rating == Rating(score=4, reason="steady")
    assert fake.bodies[0]["output_config"]["format"]["type"] == "json_schema"
    retry = fake.bodies[1]["messages"]
    assert retry[1] == {"role": "assistant", "content": '{"score":"high"}'}
    assert "score: Input should be a valid integer" in retry[2]["content"]


async def test_answers_that_never_validate_fail_after_the_retries() -> None:
    analyst = agent(
        name="analyst", output_retries=1, provider=ScriptedProvider({"analyst": ["no", "nope"]})
    )
    with pytest.raises(OutputValidationError, match=r"after 2 attempts"):
        await analyst.prompt(Prompt(user="Rate", response_format=Rating))


async def test_reflection_sends_the_first_answer_back_to_be_checked() -> None:
    fake = FakeAnthropic('{"score": 9, "reason": "hype"}', '{"score": 5, "reason": "fair"}')
    analyst = agent(name="analyst", enable_reflection=True, provider=fake.provider())
    async with reactor.trace() as trace:
        rating = await analyst.prompt(Prompt(user="Rate AAPL", response_format=Rating))
    assert rating == Rating(score=5, reason="fair")
    second = fake.bodies[1]["messages"]
    assert second[0] == {"role": "user", "content": "Rate AAPL"}
    assert second[1] == {"role": "assistant", "content": '{"score":9,"reason":"hype"}'}
    assert second[2]["content"].startswith("Check your answer above against my request")
    assert [
        (s.name, s.payload.get("success")) for s in trace.signals if "reflection" in s.name
    ] == [
        ("reflection:start", None),
        ("reflection:end", True),
    ]


async def test_reflect_checks_until_the_answer_stays_the_same() -> None:
    provider = ScriptedProvider({"analyst": ["draft", "better", "better"]})
    analyst = agent(name="analyst", max_reflections=5, provider=provider)
    assert await analyst.reflect("Write a title") == "better"
    assert len(provider.requests) == 3


async def test_a_reflection_that_does_not_validate_keeps_the_first_answer() -> None:
    provider = ScriptedProvider({"analyst": ['{"score": 3, "reason": "ok"}', "garbage"]})
    analyst = agent(name="analyst", output_retries=0, provider=provider)
    async with reactor.trace() as trace:
        rating = await analyst.reflect(Prompt(user="Rate", response_format=Rating))
    assert rating == Rating(score=3, reason="ok")
    assert trace.bus.history[-2].payload == {
        "agent": "analyst",
        "attempt": 1,
        "success": False,
        "changed": False,
    }


# -- hooks ------------------------------------------------------------------------------


async def test_a_denied_tool_never_runs_and_the_model_sees_the_reason() -> None:
    ran: list[str] = []

    def place_order(symbol: str) -> str:
        """Buy a stock."""
        ran.append(symbol)
        return "filled"

    def guard(call: ToolCall) -> Deny | None:
        return Deny("Orders need a person's approval.") if call.name == "place_order" else None

    fake = FakeAnthropic(turn(ToolUse("t1", "place_order", {"symbol": "AAPL"})), "I could not.")
    trader = agent(
        name="trader",
        tools=[place_order],
        hooks=Hooks(pre_tool_use=[guard]),
        provider=fake.provider(),
    )
    assert await trader.prompt("Buy AAPL") == "I could not."
    assert ran == []
    assert fake.bodies[1]["messages"][-1]["content"] == [
        {
            "type": "tool_result",
            "tool_use_id": "t1",
            "content": "Orders need a person's approval.",
            "is_error": True,
        }
    ]


async def test_a_pre_hook_may_replace_the_input_and_a_post_hook_sees_the_result() -> None:
    seen: list[tuple[str, Any]] = []

    async def upper(call: ToolCall) -> dict[str, Any]:
        return {"symbol": call.input["symbol"].upper()}

    def audit(call: ToolCall, result: ToolResult) -> None:
        seen.append((call.input["symbol"], result.result))

    def echo(symbol: str) -> str:
        """Echo a symbol."""
        return symbol

    fake = FakeAnthropic(turn(ToolUse("t1", "echo", {"symbol": "aapl"})), "done")
    hooks = Hooks(pre_tool_use=[upper], post_tool_use=[audit])
    await agent(name="a", tools=[echo], hooks=hooks, provider=fake.provider()).prompt("go")
    assert seen == [("AAPL", "AAPL")]


async def test_session_hooks_fire_once_each_around_the_whole_prompt() -> None:
    events: list[Any] = []
    hooks = Hooks(
        session_start=[lambda info: events.append(("start", info))],
        session_end=[lambda info, result: events.append(("end", result))],
    )
    fake = FakeAnthropic(turn(ToolUse("t1", "quote", {"symbol": "A"})), "187.5")
    analyst = agent(name="analyst", tools=[quote], hooks=hooks, provider=fake.provider())
    assert await analyst.prompt("Price of A?") == "187.5"
    assert events == [("start", SessionInfo("analyst", None, "Price of A?")), ("end", "187.5")]


def test_before_tool_and_after_tool_are_shorthands_for_hooks() -> None:
    def block(call: ToolCall) -> None:
        return None

    trader = agent(name="t", prompt="go", before_tool=block, hooks=Hooks(session_start=print))
    assert len(trader.hooks.pre_tool_use) == 1
    assert trader.hooks.session_start == (print,)


def test_hooks_must_be_functions() -> None:
    with pytest.raises(TypeError, match=r"^Hooks\(pre_tool_use=\.\.\.\) takes a list of functions"):
        Hooks(pre_tool_use=["nope"])  # type: ignore[list-item]


# -- skills -----------------------------------------------------------------------------


async def test_a_skill_is_added_to_the_system_prompt(tmp_path: Path) -> None:
    skill = Skill(write_skill(tmp_path / "risk", RISK))
    assert (skill.name, skill.description) == ("risk", "How to rate risk.")
    fake = FakeAnthropic(brain=lambda body: "low")
    analyst = agent(name="a", system="You are terse.", skills=[skill], provider=fake.provider())
    await analyst.prompt("Risk of AAPL?")
    system = fake.bodies[0]["system"]
    assert system.startswith("You are terse.\n\n## Skill: risk\n\nHow to rate risk.")
    assert system.endswith("Rate risk as low, medium or high.")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param(None, r"has no readable SKILL\.md", id="missing"),
        pytest.param("Just text.", r"has no front matter", id="no-front-matter"),
        pytest.param("---\nname: x\n", r"does not close its front matter", id="unclosed"),
        pytest.param("---\nname: [x\n---\n", r"is not valid YAML", id="bad-yaml"),
        pytest.param("---\nname: x\n---\nBody", r"lacks description", id="no-description"),
    ],
)
def test_a_missing_or_malformed_skill_is_an_error_where_it_is_defined(
    tmp_path: Path, text: str | None, message: str
) -> None:
    folder = tmp_path / "broken"
    if text is not None:
        write_skill(folder, text)
    with pytest.raises(AgentConfigError, match=message):
        agent(name="a", skills=[str(folder)])


# -- env ----------------------------------------------------------------------------------


async def test_agents_running_at_once_each_see_their_own_env(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("REGION", "process")

    def region() -> str:
        """Where this runs (a plain function: it runs in a worker thread)."""
        return f"{reactor.getenv('REGION')}/{reactor.getenv('TZ', 'none')}"

    def brain(body: dict[str, Any]) -> Any:
        if len(body["messages"]) == 1:
            return turn(ToolUse("t1", "region", {}))
        return body["messages"][-1]["content"][0]["content"]

    endpoint = FakeAnthropic(brain=brain)
    eu = agent(name="eu", tools=[region], env={"REGION": "eu"}, provider=endpoint.provider())
    us = agent(name="us", tools=[region], env={"TZ": "UTC"}, provider=endpoint.provider())
    answers = await asyncio.gather(eu.prompt("Where?"), us.prompt("Where?"))
    assert list(answers) == ["eu/none", "process/UTC"]
    assert reactor.getenv("TZ", "unset") == "unset"


# -- inside a run ----------------------------------------------------------------------------


async def test_inside_a_handler_a_prompt_streams_through_the_run() -> None:
    analyst = agent(name="analyst", system="Be terse.")

    async def desk(ctx: reactor.AgentContext) -> Any:
        return await analyst.prompt(Prompt(user="Rate {{ s }}", data={"s": ctx.input}))

    graph = reactive({"desk": agent(run=desk, updates="rating")}, state={"rating": None})
    provider = ScriptedProvider({"analyst": ["steady"]}, pricing=(1.0, 1.0))
    store = reactor.MemorySignalStore()
    result = await graph.run(input="AAPL", provider=provider, record=store)
    assert result.state["rating"] == "steady"
    activated = result.select("agent:desk:activated")[0]
    start = result.select("prompt:start")[0]
    assert start.caused_by == activated.id
    assert result.select("provider:start")[0].caused_by == start.id
    assert result.metrics.input_tokens > 0
    assert result.select("prompt:end")[0].payload["usage"]["output_tokens"] > 0
    replayed = await graph.run(replay=store.load(result.run_id))
    assert replayed.state["rating"] == "steady"
    assert replayed.select("provider:end")[0].payload["output"] == "steady"


async def test_a_graph_agent_uses_its_hooks_skills_and_reflection(tmp_path: Path) -> None:
    events: list[str] = []
    skill = Skill(write_skill(tmp_path / "risk", RISK))
    hooks = Hooks(
        session_start=[lambda info: events.append(f"start {info.prompt}")],
        session_end=[lambda info, result: events.append(f"end {result}")],
    )
    fake = FakeAnthropic("high", "medium", "medium")
    graph = reactive(
        {
            "risk": agent(
                prompt="Risk of {{ input }}?",
                skills=[skill],
                hooks=hooks,
                enable_reflection=True,
                max_reflections=3,
                updates="risk",
            )
        },
        state={"risk": None},
    )
    result = await graph.run(input="AAPL", provider=fake.provider())
    assert result.state["risk"] == "medium"
    assert events == ["start Risk of AAPL?", "end medium"]
    assert "## Skill: risk" in fake.bodies[0]["system"]
    assert fake.bodies[1]["messages"][1] == {"role": "assistant", "content": "high"}
    assert [s.payload["changed"] for s in result.select("reflection:end")] == [True, False]


def test_an_agent_with_neither_prompt_nor_run_cannot_join_a_graph() -> None:
    with pytest.raises(reactor.GraphValidationError, match=r"Agent 'a' has none of prompt="):
        reactive({"a": agent()})


@pytest.mark.parametrize("name", ["prompt:end", "reflection:end", "mcp:result", "spawn:end"])
async def test_outside_input_cannot_forge_the_new_namespaces(name: str, tmp_path: Path) -> None:
    graph = reactive({"a": agent(run=lambda ctx: None)}, external=["user:*"])
    handle = graph.start()
    with pytest.raises(reactor.SignalNameError, match=rf"^Cannot send '{name}'"):
        handle.send(name, {})
    handle.close()
    await handle.result()
    with (
        reactor.SQLiteSignalStore(tmp_path / "runs.db") as store,
        pytest.raises(reactor.SignalNameError),
    ):
        store.post("run_x", name, {})

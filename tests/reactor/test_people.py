"""People in the loop: questions and replies, messages to one agent, phases and tasks."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from pydantic import BaseModel

from reactor import (
    AgentContext,
    AgentNotFoundError,
    GraphValidationError,
    MemorySignalStore,
    PendingPrompt,
    PromptNotFoundError,
    PromptTimeoutError,
    Reactive,
    ReplyValidationError,
    RunHandle,
    RunSuspendedError,
    Signal,
    agent,
    reactive,
)


class Review(BaseModel):
    score: int
    note: str = ""


async def approve(ctx: AgentContext[Any]) -> bool:
    answer = await ctx.ask("Place {{ state.order }}?", choices=["yes", "no"])
    return bool(answer == "yes")


def desk(**agents: Any) -> Reactive:
    return reactive(
        agents or {"approve": agent(run=approve, updates="approved")},
        state={"order": "AAPL x10", "approved": None, "review": None, "note": None},
        name="desk",
    )


async def prompted(handle: RunHandle, count: int = 1) -> list[PendingPrompt]:
    """The run's pending prompts, once there are ``count`` of them (60 s bound a hang)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if len(handle.prompts()) >= count:
            return handle.prompts()
        await asyncio.sleep(0.01)
    raise AssertionError(f"the run asked {len(handle.prompts())} questions, not {count}")


def names(signals: tuple[Signal, ...]) -> list[str]:
    return [s.name for s in signals]


async def test_a_question_with_choices_is_answered_by_a_reply() -> None:
    handle = desk().start()
    [prompt] = await prompted(handle)
    assert (prompt.agent, prompt.question, prompt.choices, prompt.schema) == (
        "approve",
        "Place AAPL x10?",
        ("yes", "no"),
        None,
    )
    handle.reply(prompt.prompt_id, "yes")
    handle.close()
    result = await handle.result()
    assert result.state["approved"] is True
    asked = next(s for s in result.signals if s.name == "session:prompt")
    assert dict(asked.payload) == {
        "prompt_id": prompt.prompt_id,
        "agent": "approve",
        "question": "Place AAPL x10?",
        "choices": ["yes", "no"],
        "schema": None,
    }
    replied = next(s for s in result.signals if s.name == "session:reply")
    assert dict(replied.payload) == {"prompt_id": prompt.prompt_id, "answer": "yes"}
    assert replied.source == "user"
    assert handle.prompts() == []


async def test_an_answer_typed_by_a_model_is_validated_and_returned_as_the_model() -> None:
    async def review(ctx: AgentContext[Any]) -> str:
        answer = await ctx.ask("Rate {{ state.order }}", output=Review)
        assert isinstance(answer, Review)
        return f"{answer.score}: {answer.note}"

    handle = desk(review=agent(run=review, updates="note")).start()
    [prompt] = await prompted(handle)
    assert prompt.schema == Review.model_json_schema()
    handle.reply(prompt.prompt_id, {"score": 4, "note": "fine"}, source="alice")
    handle.close()
    result = await handle.result()
    assert result.state["note"] == "4: fine"
    replied = next(s for s in result.signals if s.name == "session:reply")
    assert replied.payload["answer"] == {"score": 4, "note": "fine"}
    assert replied.source == "alice"


async def test_a_bad_reply_raises_and_leaves_the_prompt_pending() -> None:
    handle = desk().start()
    [prompt] = await prompted(handle)
    with pytest.raises(
        ReplyValidationError,
        match=rf"^Prompt {prompt.prompt_id} takes one of 'yes', 'no'; got 'maybe'\. "
        r"Reply again with one of them\.$",
    ):
        handle.reply(prompt.prompt_id, "maybe")
    assert handle.prompts() == [prompt]
    handle.reply(prompt.prompt_id, "no")
    handle.close()
    assert (await handle.result()).state["approved"] is False


async def test_a_model_answer_that_does_not_fit_names_the_problem() -> None:
    handle = desk(review=agent(ask="Rate it", output=Review, updates="review")).start()
    [prompt] = await prompted(handle)
    with pytest.raises(ReplyValidationError, match=r"score: Field required"):
        handle.reply(prompt.prompt_id, {"note": "no score"})
    with pytest.raises(ReplyValidationError, match=r"takes an answer matching its schema"):
        handle.reply(prompt.prompt_id, "five")
    handle.reply(prompt.prompt_id, Review(score=5))
    handle.close()
    assert (await handle.result()).state["review"] == {"score": 5, "note": ""}


async def test_a_question_without_choices_or_model_takes_text() -> None:
    async def name_it(ctx: AgentContext[Any]) -> Any:
        return await ctx.ask("Name the trade")

    handle = desk(name=agent(run=name_it, updates="note")).start()
    [prompt] = await prompted(handle)
    with pytest.raises(ReplyValidationError, match=r"takes text; got int 7\. Reply with a string"):
        handle.reply(prompt.prompt_id, 7)
    handle.reply(prompt.prompt_id, "the big one")
    handle.close()
    assert (await handle.result()).state["note"] == "the big one"


async def test_unknown_and_answered_prompts_are_not_found() -> None:
    handle = desk().start()
    [prompt] = await prompted(handle)
    with pytest.raises(PromptNotFoundError, match=r"^Run run_\w+ has no pending prompt 'nope'"):
        handle.reply("nope", "yes")
    handle.reply(prompt.prompt_id, "yes")
    with pytest.raises(PromptNotFoundError) as raised:
        handle.reply(prompt.prompt_id, "yes")
    assert raised.value.prompt_id == prompt.prompt_id
    assert isinstance(raised.value, LookupError)
    handle.close()
    await handle.result()


async def test_a_pending_prompt_keeps_the_run_from_ending_at_quiescence() -> None:
    task = asyncio.ensure_future(desk().run())
    await asyncio.sleep(0.2)
    assert not task.done()  # waiting for a person, not quiescent
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_a_closed_run_still_takes_the_reply_it_waits_for() -> None:
    handle = desk().start()
    [prompt] = await prompted(handle)
    handle.close()
    await asyncio.sleep(0.1)  # time to end, if closing wrongly dropped the question
    assert not handle.done
    handle.reply(prompt.prompt_id, "yes")
    result = await handle.result()
    assert (result.status, result.state["approved"]) == ("completed", True)


async def test_nobody_answering_in_time_is_a_timeout_in_the_agent() -> None:
    async def hurry(ctx: AgentContext[Any]) -> str:
        try:
            return str(await ctx.ask("Quick?", choices=["yes"], timeout=0.05))
        except PromptTimeoutError as exc:
            return f"timed out: {exc.prompt_id}"

    result = await desk(hurry=agent(run=hurry, updates="note")).run()
    timeout = next(s for s in result.signals if s.name == "session:timeout")
    prompt_id = timeout.payload["prompt_id"]
    assert result.state["note"] == f"timed out: {prompt_id}"
    assert isinstance(PromptTimeoutError("x", prompt_id="p"), TimeoutError)


async def test_an_ask_agent_is_answered_by_a_person_then_updates_and_emits() -> None:
    graph = desk(
        review=agent(
            ask="How good is {{ state.order }}?",
            output=Review,
            updates="review",
            emits=["review:done"],
        ),
        note=agent(
            run=lambda ctx: ctx.signal.payload.note, activate_on="review:done", updates="note"
        ),
    )
    handle = graph.start()
    [prompt] = await prompted(handle)
    assert (prompt.agent, prompt.question) == ("review", "How good is AAPL x10?")
    handle.reply(prompt.prompt_id, {"score": 3, "note": "ok"})
    handle.close()
    result = await handle.result()
    assert result.state["review"] == {"score": 3, "note": "ok"}
    assert result.state["note"] == "ok"


def test_an_ask_agent_takes_neither_a_prompt_nor_a_provider() -> None:
    with pytest.raises(Exception, match=r"give exactly one of prompt=.*not several"):
        agent(name="x", ask="Why?", prompt="Why?")
    with pytest.raises(Exception, match=r"choices= is for ask agents"):
        agent(name="x", run=lambda ctx: 1, choices=["a"])


async def test_a_message_sent_to_one_agent_reaches_that_agent_only() -> None:
    seen: dict[str, list[Any]] = {"a": [], "b": []}

    def note(who: str) -> Any:
        return lambda ctx: seen[who].append(ctx.signal.payload)

    graph = reactive(
        {
            "a": agent(run=note("a"), activate_on=["inbox:a"]),
            "b": agent(run=note("b"), activate_on=["inbox:*"]),
        },
        name="hub",
    )
    handle = graph.start()
    handle.send_to("a", {"n": 1})
    handle.send_to("b", {"n": 2})
    with pytest.raises(AgentNotFoundError, match=r"has no agent 'c' \(agents: a, b\)"):
        handle.send_to("c", {})
    handle.close()
    await handle.result()
    assert seen == {"a": [{"n": 1}], "b": [{"n": 2}]}


async def test_an_agent_receives_its_messages_in_its_handler() -> None:
    async def collect(ctx: AgentContext[Any]) -> list[Any]:
        return [await ctx.receive(), await ctx.receive()]

    handle = desk(collector=agent(run=collect, updates="note")).start()
    handle.send_to("collector", "first")
    await asyncio.sleep(0.05)
    handle.send_to("collector", "second")
    handle.close()
    assert (await handle.result()).state["note"] == ["first", "second"]


async def test_receive_gives_up_after_its_timeout() -> None:
    async def wait(ctx: AgentContext[Any]) -> str:
        try:
            return str(await ctx.receive(timeout=0.05))
        except TimeoutError as exc:
            return str(exc)

    result = await desk(waiter=agent(run=wait, updates="note")).run()
    assert result.state["note"].startswith("No message came within 0.05 seconds")


def test_an_agent_cannot_activate_on_another_agents_messages() -> None:
    with pytest.raises(GraphValidationError, match=r"messages to 'b' reach 'b' only"):
        reactive(
            {
                "a": agent(run=lambda ctx: None, activate_on=["inbox:b"]),
                "b": agent(run=lambda ctx: None),
            }
        )


async def test_phases_and_tasks_nest_in_the_causal_tree() -> None:
    async def work(ctx: AgentContext[Any]) -> str:
        async with ctx.phase("research"):
            async with ctx.task("fetch") as started:
                ctx.emit("data:fetched", {"by": started.name})
            try:
                with ctx.task("parse"):
                    raise ValueError("bad page")
            except ValueError:
                pass
        return "done"

    result = await desk(worker=agent(run=work, emits=["data:fetched"], updates="note")).run()
    by_name = {s.name: s for s in result.signals}
    activated = by_name["agent:worker:activated"]
    phase = by_name["phase:start"]
    fetch = next(s for s in result.signals if s.name == "task:start")
    parse = [s for s in result.signals if s.name == "task:start"][1]
    assert phase.caused_by == activated.id
    assert fetch.caused_by == phase.id
    assert parse.caused_by == phase.id
    assert by_name["data:fetched"].caused_by == fetch.id
    assert by_name["data:fetched"].payload == {"by": "task:start"}
    assert by_name["task:complete"].caused_by == fetch.id
    failed = by_name["task:failed"]
    assert failed.caused_by == parse.id
    assert failed.payload["error"] == {"type": "ValueError", "message": "bad page"}
    assert failed.payload["name"] == "parse"
    assert failed.payload["agent"] == "worker"
    assert by_name["phase:complete"].caused_by == phase.id
    assert by_name["phase:complete"].payload["duration_ms"] >= 0
    assert dict(phase.payload) == {
        "name": "research",
        "agent": "worker",
        "duration_ms": None,
        "error": None,
    }
    assert by_name["agent:worker:completed"].caused_by == activated.id
    tree = result.tree()
    assert tree.index("phase:start") < tree.index("task:start") < tree.index("data:fetched")


async def test_a_suspended_run_is_waiting_in_its_store_and_resumes_waiting() -> None:
    store = MemorySignalStore()
    graph = desk()
    handle = graph.start(record=store)
    [prompt] = await prompted(handle)
    await handle.suspend()
    with pytest.raises(RunSuspendedError, match=r"was suspended: it stopped without ending"):
        await handle.result()
    [info] = store.runs()
    assert info.status == "waiting"
    assert "harness:end" not in names(store.load(info.run_id).signals)

    resumed = graph.start(resume=info.run_id, record=store)
    assert resumed.prompts() == [prompt]  # waiting again at once, not asked twice
    resumed.reply(prompt.prompt_id, "yes")
    resumed.close()
    result = await resumed.result()
    log = names(store.load(info.run_id).signals)
    assert result.state["approved"] is True
    assert (log.count("session:prompt"), log.count("session:reply")) == (1, 1)
    assert store.runs()[0].status == "completed"


async def test_a_reply_posted_while_the_run_is_stopped_is_applied_on_resume() -> None:
    store = MemorySignalStore()
    graph = desk()
    handle = graph.start(record=store)
    [prompt] = await prompted(handle)
    await handle.suspend()
    store.post(handle.run_id, "session:reply", {"prompt_id": prompt.prompt_id, "answer": "no"})
    result = await graph.resume(handle.run_id, record=store)
    assert result.state["approved"] is False
    log = names(store.load(handle.run_id).signals)
    assert (log.count("session:prompt"), log.count("session:reply")) == (1, 1)


async def test_a_replay_gets_the_replies_at_their_recorded_places() -> None:
    store = MemorySignalStore()
    handle = desk().start(record=store)
    [prompt] = await prompted(handle)
    handle.reply(prompt.prompt_id, "yes")
    handle.close()
    await handle.result()
    recording = store.load(handle.run_id)
    replayed = await desk().run(replay=recording)
    assert replayed.state["approved"] is True
    assert replayed.diff(recording) is None


async def test_a_handle_on_a_run_that_ends_at_quiescence_takes_input_while_it_runs() -> None:
    handle = desk().start(keep_open=False)
    [prompt] = await prompted(handle)
    handle.send_to("approve", "a note")  # still running: input is taken
    handle.reply(prompt.prompt_id, "yes")
    result = await handle.result()  # no close(): it ended at quiescence
    assert (result.status, result.state["approved"]) == ("completed", True)
    assert "inbox:approve" in names(result.signals)

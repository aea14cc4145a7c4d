"""Values the log cannot hold are refused where they enter, naming the bad value's path."""

from __future__ import annotations

import asyncio
import dataclasses
import math
from pathlib import Path
from typing import Any

import pytest

from reactor import (
    AgentContext,
    MemorySignalStore,
    PayloadError,
    ReactorError,
    SQLiteSignalStore,
    agent,
    reactive,
)
from reactor.exceptions import PayloadError as PayloadErrorFromExceptions
from reactor.testing import signal_names as names
from stores import Store

LONE = "\ud800"


@dataclasses.dataclass
class Opaque:
    """A dataclass holding something with no JSON form."""

    handle: object


BAD_VALUES = [
    pytest.param(
        {"items": [{}, {}, {}, {"name": f"a{LONE}"}]},
        "input.items[3].name",
        "lone surrogate",
        id="surrogate-in-string",
    ),
    pytest.param({LONE: 1}, "input (a key)", "lone surrogate", id="surrogate-in-key"),
    pytest.param({"x": [1.0, math.nan]}, "input.x[1]", "nan", id="nan"),
    pytest.param({"x": math.inf}, "input.x", "inf", id="infinity"),
    pytest.param({"x": object()}, "input.x", "of type object", id="no-json-form"),
    pytest.param(
        {"x": Opaque(object())}, "input.x.handle", "of type object", id="inside-a-dataclass"
    ),
]


def echo_graph() -> Any:
    return reactive({"echo": agent(run=lambda ctx: None, activate_on="go")}, external=["go"])


def test_payload_error_is_a_reactor_error_and_a_value_error() -> None:
    assert PayloadError is PayloadErrorFromExceptions
    assert issubclass(PayloadError, ReactorError)
    assert issubclass(PayloadError, ValueError)


@pytest.mark.parametrize(("value", "path", "reason"), BAD_VALUES)
async def test_run_input_the_log_cannot_hold_is_refused_with_its_path(
    value: Any, path: str, reason: str, tmp_path: Path
) -> None:
    with SQLiteSignalStore(tmp_path / "runs.db") as store:
        with pytest.raises(PayloadError) as caught:
            await echo_graph().run(input=value, record=store)
        assert caught.value.path == path
        assert str(caught.value).startswith(f"{path} cannot be recorded: it is ")
        assert reason in str(caught.value)
        assert "Nothing was emitted or stored." in str(caught.value)
        assert store.runs() == []


async def test_an_input_changed_since_the_last_run_is_checked_again() -> None:
    """A run given the very objects of the run before reuses its checked options, but
    its input is checked at every run: the caller may have changed it in between."""
    graph, given = echo_graph(), {"x": 1.0}
    first = await graph.run(input=given)
    given["x"] = math.nan
    with pytest.raises(PayloadError) as caught:
        await graph.run(input=given)
    assert first.status == "completed"
    assert caught.value.path == "input.x"


async def test_good_values_pass_every_door() -> None:
    value = {"text": "héllo ✓ 😀", "n": 1.5, "nan": "NaN", "rows": [(1, 2)], "ok": None}
    result = await echo_graph().run(input=value)
    assert result.status == "completed"


async def test_send_and_send_to_refuse_a_bad_payload_and_emit_nothing() -> None:
    handle = echo_graph().start()
    before = len(handle._run.bus.history)
    with pytest.raises(PayloadError, match=r"^payload\.x cannot be recorded: it is nan"):
        handle.send("go", {"x": math.nan})
    with pytest.raises(PayloadError, match=r"^payload cannot be recorded: it is a string"):
        handle.send_to("echo", LONE)
    assert len(handle._run.bus.history) == before
    handle.send("go", {"x": 1.0})
    handle.close()
    result = await handle.result()
    assert result.status == "completed"
    assert names(result.signals).count("go") == 1


async def test_reply_refuses_an_answer_the_log_cannot_hold_and_the_prompt_stays() -> None:
    async def asker(ctx: AgentContext) -> Any:
        return await ctx.ask("Name?")

    handle = reactive({"asker": agent(run=asker)}).start()
    prompt = await handle.next_prompt(timeout=5)
    with pytest.raises(PayloadError, match=r"^answer cannot be recorded"):
        handle.reply(prompt.prompt_id, f"Bob{LONE}")
    assert [p.prompt_id for p in handle.prompts()] == [prompt.prompt_id]
    handle.reply(prompt.prompt_id, "Bob")
    handle.close()
    result = await handle.result()
    (completed,) = [s for s in result.signals if s.name == "agent:asker:completed"]
    assert completed.payload["output"] == "Bob"


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_store_post_refuses_a_bad_payload_and_stores_nothing(kind: str, tmp_path: Path) -> None:
    store: Any = MemorySignalStore() if kind == "memory" else SQLiteSignalStore(tmp_path / "r.db")
    with store:
        with pytest.raises(PayloadError, match=r"^payload\.note cannot be recorded"):
            store.post("run_x", "nudge", {"note": LONE})
        assert store.undelivered(["run_x"]) == []


async def test_ctx_emit_refuses_a_bad_payload_and_the_agent_fails_with_the_path() -> None:
    def emitter(ctx: AgentContext) -> None:
        ctx.emit("found", {"rows": [{"v": math.inf}]})

    graph = reactive({"emitter": agent(run=emitter, emits=["found"])})
    result = await graph.run()
    assert "found" not in names(result.signals)
    (failure,) = result.failures
    assert isinstance(failure.error, PayloadError)
    assert failure.error.path == "payload.rows[0].v"


def test_a_store_write_the_log_cannot_hold_changes_nothing() -> None:
    store = Store({"notes": [], "count": 0})
    seen: list[Any] = []
    store.subscribe("state:**", seen.append)
    with pytest.raises(PayloadError, match=r"^state\.notes\[0\] cannot be recorded"):
        store.set("notes", [f"x{LONE}"])
    with pytest.raises(PayloadError, match=r"^state\.count cannot be recorded"):
        store.update(count=math.nan)
    assert store.snapshot() == {"notes": [], "count": 0}
    assert seen == []
    store.set("notes", ["fine"])
    assert store.snapshot()["notes"] == ["fine"]


async def test_a_refused_value_leaves_the_signal_store_working(tmp_path: Path) -> None:
    with SQLiteSignalStore(tmp_path / "runs.db") as store:
        with pytest.raises(PayloadError):
            await echo_graph().run(input=LONE, record=store)
        handle = echo_graph().start(record=store)
        with pytest.raises(PayloadError):
            handle.send("go", LONE)
        handle.send("go", "ok")
        handle.close()
        result = await handle.result()
        await asyncio.sleep(0)
        assert result.status == "completed"
        assert store.load(result.run_id).signals == result.signals


async def test_object_data_the_log_cannot_hold_is_refused_and_nothing_is_stored(
    tmp_path: Path,
) -> None:
    from reactor.service import ObjectStore

    async with ObjectStore(f"sqlite+aiosqlite:///{tmp_path / 'objects.db'}") as objects:
        seen: list[Any] = []
        objects.bus.subscribe("object:**", seen.append)
        with pytest.raises(PayloadError, match=r"^data\.name cannot be recorded: it is a string"):
            await objects.create("Contact", {"name": f"Ann{LONE}"})
        stored = await objects.create("Contact", {"name": "Ann"})
        with pytest.raises(PayloadError, match=r"^data\.score cannot be recorded: it is nan"):
            await objects.update(stored.id, {"score": math.nan})
        assert (await objects.get(stored.id)).data == {"name": "Ann"}
        assert [s.name for s in seen] == ["object:Contact:created"]

"""Accepted means recorded: an answer the log cannot hold fails its activation, once.

A model's answer (or a tool's result) with a lone surrogate cannot be written to any
store. It used to reach the store anyway: the recording failed, the run's log stopped
there with the run still ``running``, and every resume called the model again. Now the
call is checked where its events become signals: the activation fails with
``PayloadError`` naming the bad value, and the run ends ``failed``, recorded.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from reactor import (
    PayloadError,
    Reactive,
    RunFinishedError,
    SQLiteSignalStore,
    agent,
    reactive,
)
from reactor.testing import FakeAnthropic, ScriptedProvider, ToolUse, turn

LONE = "\ud800"


def writer(**options: Any) -> Reactive:
    return reactive(
        {"writer": agent(prompt="Write about {{ input }}", updates="text", **options)},
        state={"text": None},
        name="writing",
    )


def names(store: SQLiteSignalStore, run_id: str) -> list[str]:
    return [s.name for s in store.load(run_id).signals]


def failure(store: SQLiteSignalStore, run_id: str) -> dict[str, Any]:
    [failed] = store.load(run_id).select("agent:writer:failed")
    error: dict[str, Any] = failed.payload["error"]
    return error


def test_a_model_answer_with_a_lone_surrogate_fails_the_run_and_is_never_asked_again(
    tmp_path: Path,
) -> None:
    endpoint = FakeAnthropic(turn(f"A word {LONE} too far."))
    graph = writer()
    with SQLiteSignalStore(tmp_path / "runs.db") as store:
        result = graph.run_sync(record=store, provider=endpoint.provider(), input="rain")
        assert result.status == "failed"
        assert isinstance(result.error, PayloadError)
        assert result.error.path == "text:delta.content"
        assert str(result.error).startswith(
            "Agent 'writer': what its model answered cannot be recorded, so the activation "
            "fails (a resume does not call the model again for it). text:delta.content "
            r"cannot be recorded: it is a string with a lone surrogate ('\ud800' at index 7)."
        )
        log = names(store, result.run_id)
        assert log[-3:] == ["provider:error", "agent:writer:failed", "harness:end"]
        assert "provider:end" not in log
        assert failure(store, result.run_id)["type"] == "PayloadError"
        info = store.info(result.run_id)
        assert (info.status, info.last_seq) == ("failed", len(log))
        with pytest.raises(RunFinishedError):
            graph.resume_sync(result.run_id, record=store, provider=endpoint.provider())
    assert len(endpoint.requests) == 1


def test_a_tool_result_the_log_cannot_hold_fails_before_the_model_sees_it(
    tmp_path: Path,
) -> None:
    def lookup(city: str) -> str:
        """The weather in a city."""
        return f"{city}: {LONE}"

    endpoint = FakeAnthropic(turn(ToolUse("t1", "lookup", {"city": "Oslo"})), turn("Sunny."))
    with SQLiteSignalStore(tmp_path / "runs.db") as store:
        result = writer(tools=[lookup]).run_sync(
            record=store, provider=endpoint.provider(), input="Oslo"
        )
        assert result.status == "failed"
        assert isinstance(result.error, PayloadError)
        assert result.error.path == "tool:result.result"
        log = names(store, result.run_id)
        assert "tool:call" in log
        assert "tool:result" not in log
        assert log[-2:] == ["agent:writer:failed", "harness:end"]
        assert store.info(result.run_id).status == "failed"
    assert len(endpoint.requests) == 1  # the result never went back to the model


def test_a_structured_answer_with_nan_fails_naming_the_field(tmp_path: Path) -> None:
    provider = ScriptedProvider({"writer": [{"score": math.nan}]})
    with SQLiteSignalStore(tmp_path / "runs.db") as store:
        result = writer().run_sync(record=store, provider=provider, input="x")
        assert isinstance(result.error, PayloadError)
        assert result.error.path == "provider:end.output.score"
        assert failure(store, result.run_id)["type"] == "PayloadError"
        assert store.info(result.run_id).status == "failed"


def test_the_failed_run_replays_to_the_same_failure(tmp_path: Path) -> None:
    graph = writer()
    with SQLiteSignalStore(tmp_path / "runs.db") as store:
        result = graph.run_sync(
            record=store, provider=FakeAnthropic(turn(f"{LONE}")).provider(), input="x"
        )
        recording = store.load(result.run_id)
    replayed = graph.run_sync(replay=recording, input="x")
    assert replayed.status == "failed"
    assert recording.diff(replayed) is None

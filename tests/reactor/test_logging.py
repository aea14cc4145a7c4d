from __future__ import annotations

import io
import json
import logging
import subprocess
import sys
import warnings
from collections.abc import Iterator

import pytest
import structlog
from pydantic import BaseModel

import reactor.logging
from reactor import (
    Budget,
    BudgetExceededError,
    CycleWarning,
    MetricsReporter,
    ProgressReporter,
    Reactive,
    ScriptedProvider,
    StructlogReporter,
    agent,
    reactive,
)
from reactor.logging import level_of
from reactor.testing import FakeAnthropic, turn


class Verdict(BaseModel):
    approve: bool


def graph() -> Reactive:
    return reactive(
        {
            "judge": agent(prompt="Judge {{ input }}", output=Verdict, emits=["verdict:given"]),
            "clerk": agent(run=lambda ctx: "filed", activate_on="verdict:given"),
        },
        name="court",
    )


def provider() -> ScriptedProvider:
    return ScriptedProvider({"judge": [Verdict(approve=True)]}, pricing=(3.0, 15.0))


@pytest.mark.parametrize(
    ("name", "level"),
    [
        pytest.param("agent:judge:failed", "error", id="failed"),
        pytest.param("provider:error", "error", id="error"),
        pytest.param("bus:handler_error", "error", id="handler-error"),
        pytest.param("harness:start", "info", id="harness"),
        pytest.param("agent:judge:completed", "info", id="completed"),
        pytest.param("agent:judge:activated", "debug", id="activated"),
        pytest.param("state:x:changed", "debug", id="state"),
        pytest.param("verdict:given", "debug", id="custom"),
    ],
)
def test_levels_follow_the_signal(name: str, level: str) -> None:
    assert level_of(name) == level


def test_structlog_reporter_logs_each_signal_with_its_fields() -> None:
    with structlog.testing.capture_logs() as logs:
        result = graph().run_sync(
            input="case 7", provider=provider(), reporters=[StructlogReporter()], tags=["t"]
        )
    names = [log["event"] for log in logs]
    assert "text:delta" not in names
    assert names == [s.name for s in result.signals if s.name != "text:delta"]
    completed = next(log for log in logs if log["event"] == "agent:judge:completed")
    signal = result.select("agent:judge:completed")[0]
    assert completed == {
        "event": "agent:judge:completed",
        "log_level": "info",
        "run_id": result.run_id,
        "graph": "court",
        "tags": {"t": ""},
        "seq": signal.seq,
        "signal": "agent:judge:completed",
        "source": "judge",
        "caused_by": signal.caused_by,
        "depth": 1,
        "agent": "judge",
        "output": {"approve": True},
        "duration_ms": signal.payload["duration_ms"],
    }
    given = next(log for log in logs if log["event"] == "verdict:given")
    assert given["approve"] is True  # a model payload's fields become log fields
    assert given["log_level"] == "debug"


def test_reserved_payload_keys_do_not_clobber_the_context() -> None:
    from reactor import Signal

    with structlog.testing.capture_logs() as logs:
        StructlogReporter().on_signal(
            Signal("custom:x", {"seq": 99, "event": "mine", "other": 1}, seq=3, run_id="r")
        )
    (log,) = logs
    assert (log["seq"], log["payload_seq"], log["payload_event"], log["other"]) == (
        3,
        99,
        "mine",
        1,
    )
    assert log["event"] == "custom:x"


def test_json_logs_parse_back(capsys: pytest.CaptureFixture[str]) -> None:
    stream = io.StringIO()
    reactor.logging.configure(json=True, level="debug", stream=stream)
    result = graph().run_sync(input="case 8", provider=provider(), reporters=[StructlogReporter()])
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert [line["event"] for line in lines if "signal" in line] == [
        s.name for s in result.signals if s.name != "text:delta"
    ]
    start = lines[0]
    assert start["level"] == "info"
    assert start["run_id"] == result.run_id
    assert start["graph"] == "court"
    assert start["input"] == "case 8"
    assert start["timestamp"].endswith("Z")
    assert capsys.readouterr().out == ""


def test_the_level_filters_debug_signals() -> None:
    stream = io.StringIO()
    reactor.logging.configure(json=True, level="info", stream=stream)
    graph().run_sync(provider=provider(), reporters=[StructlogReporter()])
    events = [json.loads(line)["event"] for line in stream.getvalue().splitlines()]
    assert events == [
        "harness:start",
        "agent:judge:completed",
        "agent:clerk:completed",
        "harness:end",
    ]


def test_console_logs_are_readable_lines() -> None:
    stream = io.StringIO()
    reactor.logging.configure(level="info", stream=stream, colors=False)
    graph().run_sync(provider=provider(), reporters=[StructlogReporter()])
    first = stream.getvalue().splitlines()[0]
    assert "harness:start" in first
    assert "[info" in first


def test_importing_reactor_configures_nothing() -> None:
    # In a new interpreter: this one's other tests configure logging on purpose.
    code = (
        "import logging, structlog, reactor, reactor.logging\n"
        "print(structlog.is_configured(), logging.getLogger().handlers)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["False", "[]"]


def test_metrics_reporter_aggregates_tokens_cost_durations_and_activations() -> None:
    metrics = MetricsReporter()
    for _ in range(2):
        graph().run_sync(provider=provider(), reporters=[metrics])
    data = metrics.snapshot()
    judge = data["agents"]["judge"]
    assert (judge["activations"], judge["completed"], judge["provider_calls"]) == (2, 2, 2)
    assert judge["input_tokens"] > 0
    assert judge["cost_usd"] == pytest.approx(
        (judge["input_tokens"] * 3 + judge["output_tokens"] * 15) / 1e6
    )
    assert data["agents"]["clerk"]["provider_calls"] == 0
    assert data["runs"] == {"completed": 2}
    assert data["totals"]["activations"] == 4
    table = str(metrics)
    assert table.splitlines()[0].split()[:2] == ["agent", "runs"]
    assert "judge" in table
    metrics.reset()
    assert metrics.snapshot()["totals"]["activations"] == 0


def test_progress_reporter_draws_and_summarizes() -> None:
    stream = io.StringIO()
    graph().run_sync(
        provider=provider(), reporters=[ProgressReporter(stream, live=True, interval=0)]
    )
    text = stream.getvalue()
    assert "running: judge" in text
    assert text.rsplit("\x1b[2K", 1)[-1].startswith("✓ completed in ")
    quiet = io.StringIO()
    graph().run_sync(provider=provider(), reporters=[ProgressReporter(quiet)])
    assert quiet.getvalue().count("\n") == 1
    assert "2 activations" in quiet.getvalue()


class _ClosedStream:
    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    def flush(self) -> None:
        raise BrokenPipeError(32, "Broken pipe")


def test_a_broken_log_output_never_breaks_the_run() -> None:
    reactor.logging.configure(json=True, stream=_ClosedStream())  # type: ignore[arg-type]
    reporter = StructlogReporter()
    failing = reactive({"a": agent(run=lambda ctx: 1 / 0)})
    result = failing.run_sync(reporters=[reporter])
    assert result.status == "failed"
    assert isinstance(reporter.broken, OSError)
    assert result.select("bus:handler_error") == []


def test_a_reporter_without_patterns_is_a_clear_error() -> None:
    class Printer:
        def on_signal(self, signal: object) -> None:
            print(signal)

    with pytest.raises(TypeError, match=r"is not a reporter: it has no patterns\. A reporter"):
        graph().run_sync(reporters=[Printer()])  # type: ignore[list-item]


@pytest.fixture
def root_logger() -> Iterator[logging.Logger]:
    """The standard library's root logger, put back as it was afterwards."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield root
    for handler in [h for h in root.handlers if h not in handlers]:
        root.removeHandler(handler)
    root.setLevel(level)
    logging.captureWarnings(False)


def test_stdlib_lines_and_warnings_join_the_json_lines(root_logger: logging.Logger) -> None:
    stream = io.StringIO()
    reactor.logging.configure(json=True, stream=stream, stdlib=True)
    structlog.get_logger("mine").info("from structlog", n=1)
    logging.getLogger("somelib.part").info("from %s", "stdlib")
    logging.getLogger("somelib.part").debug("below the level")
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.warn("an old way", UserWarning, stacklevel=1)
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert [(line["logger"], line["level"]) for line in lines] == [
        ("mine", "info"),
        ("somelib.part", "info"),
        ("py.warnings", "warning"),
    ]
    assert (lines[0]["event"], lines[0]["n"], lines[1]["event"]) == (
        "from structlog",
        1,
        "from stdlib",
    )
    assert "UserWarning: an old way" in lines[2]["event"]
    assert all(line["timestamp"].endswith("Z") for line in lines)


def test_json_tracebacks_keep_no_local_variables(root_logger: logging.Logger) -> None:
    """A frame's locals (here a token) would be shipped with every logged exception."""
    stream = io.StringIO()
    reactor.logging.configure(json=True, stream=stream, stdlib=True)

    def authenticate(token: str) -> None:
        raise PermissionError("no such token")

    try:
        authenticate("s3cret-token-value")
    except PermissionError:
        structlog.get_logger("mine").exception("refused")
        logging.getLogger("somelib").exception("refused too")
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert [line["event"] for line in lines] == ["refused", "refused too"]
    for line in lines:
        [exception] = line["exception"]
        assert exception["exc_type"] == "PermissionError"
        assert exception["frames"][-1]["name"] == "authenticate"
    assert "s3cret-token-value" not in stream.getvalue()


def test_configuring_again_replaces_the_route_of_stdlib_lines(root_logger: logging.Logger) -> None:
    first, second = io.StringIO(), io.StringIO()
    reactor.logging.configure(json=True, stream=first, stdlib=True)
    reactor.logging.configure(stream=second, colors=False, stdlib=True)
    logging.getLogger("somelib").warning("said once")
    assert first.getvalue() == ""
    [line] = second.getvalue().splitlines()
    assert "said once" in line
    assert "[warning" in line
    assert "[somelib]" in line


async def test_metrics_count_the_prompt_caches_input_tokens_as_budgets_do() -> None:
    cached = turn(
        "a", input_tokens=10, cache_read_input_tokens=4_000, cache_creation_input_tokens=1_000
    )
    fake = FakeAnthropic(cached, turn("b"))
    writer = agent(prompt="Write.", activate_on=["harness:start", "part:done"], emits=["part:done"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CycleWarning)  # the loop is the point
        looping = reactive({"writer": writer}, max_depth=None)
    metrics = MetricsReporter()
    try:
        result = await looping.run(
            provider=fake.provider(), budget=Budget(input_tokens=5_000), reporters=[metrics]
        )
    finally:
        await fake.aclose()
    assert isinstance(result.error, BudgetExceededError)
    assert result.error.spent == 5_010  # the second call was refused
    snapshot = metrics.snapshot()
    assert snapshot["agents"]["writer"]["input_tokens"] == 5_010
    assert snapshot["totals"]["input_tokens"] == 5_010

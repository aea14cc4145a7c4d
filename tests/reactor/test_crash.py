"""Runs survive ``kill -9``: a real subprocess records, dies, and the run is resumed here."""

from __future__ import annotations

import importlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

from reactor import Recording, ScriptedProvider
from tests.reactor.cli_support import CliResult, reactor_cli
from tests.reactor.databases import StorePlace

DESK = textwrap.dedent(
    """
    import os
    import sys
    import time

    from reactor import PostgresSignalStore, ProviderRequest, SQLiteSignalStore
    from reactor import ScriptedProvider, agent, reactive

    ORDERS = os.environ["DESK_ORDERS"]


    def place(ctx):
        with open(ORDERS, "a") as orders:  # the side effect: an order, placed once
            orders.write(f"buy {ctx.state.analysis}\\n")
        return f"order for {ctx.state.analysis}"


    async def check(ctx):
        reply = None
        request = ProviderRequest.build(agent="risk", system=None, prompt="risk?")
        async for event in ctx.provider.stream(request):
            reply = getattr(event, "output", reply)
        if os.environ.get("DESK_SLOW_CHECK"):
            time.sleep(60)  # dies here: the answer is recorded, the handler is not done
        return f"risk {reply}"


    graph = reactive(
        {
            "analyst": agent(prompt="Analyse {{ input }}", updates="analysis"),
            "trader": agent(run=place, activate_on="state:analysis:changed", updates="order"),
            "risk": agent(run=check, activate_on="state:order:changed", updates="risk"),
            "reviewer": agent(
                prompt="Review {{ state.order }} at {{ state.risk }}",
                activate_on="state:risk:changed",
                updates="review",
            ),
        },
        state={"analysis": None, "order": None, "risk": None, "review": None},
        name="desk",
    )


    def provider(review_latency=0.0):
        return ScriptedProvider(
            {"analyst": ["up"], "risk": ["low"], "reviewer": ["approved"]},
            latency=lambda request: review_latency if request.agent == "reviewer" else 0.0,
        )


    scripted_provider = provider()


    def store(kind, where):
        return SQLiteSignalStore(where) if kind == "sqlite" else PostgresSignalStore(where)


    if __name__ == "__main__":
        kind, where = sys.argv[1], sys.argv[2]
        with store(kind, where) as runs:
            graph.run_sync(input="AAPL", provider=provider(review_latency=60), record=runs)
    """
)


@pytest.fixture
def desk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    (tmp_path / "crash_desk.py").write_text(DESK)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("DESK_ORDERS", str(tmp_path / "orders.txt"))
    sys.modules.pop("crash_desk", None)
    return importlib.import_module("crash_desk")


def run_until(
    place: StorePlace, tmp_path: Path, ready: Callable[[Recording], bool], **env: str
) -> Recording:
    """Run the desk in a subprocess, ``kill -9`` it once ``ready(recording)``; the cut log."""
    errors = tmp_path / "stderr.txt"
    with errors.open("w") as stderr:
        process = subprocess.Popen(
            [sys.executable, str(tmp_path / "crash_desk.py"), place.kind, place.where],
            env={**os.environ, **env, "PYTHONPATH": os.pathsep.join(sys.path)},
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    try:
        deadline = time.monotonic() + 30
        with place.open() as store:
            while time.monotonic() < deadline:
                runs = store.runs()
                if runs:
                    recording = store.load(runs[0].run_id)
                    if ready(recording):
                        break
                time.sleep(0.05)
            else:
                pytest.fail(f"the subprocess never got there: {errors.read_text()}")
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
    with place.open() as store:
        return store.load(store.runs()[0].run_id)


def names(recording: Recording) -> list[str]:
    return [s.name for s in recording.signals]


def assert_one_clean_log(recording: Recording) -> None:
    seqs = [s.seq for s in recording.signals]
    assert seqs == sorted(set(seqs))
    assert names(recording).count("harness:start") == 1
    assert names(recording).count("harness:end") == 1
    assert recording.status == "completed"


def test_killed_during_a_model_call_resumes_exactly_once(
    desk: ModuleType, store_place: StorePlace, tmp_path: Path
) -> None:
    uninterrupted = desk.graph.run_sync(input="AAPL", provider=desk.provider())
    (tmp_path / "orders.txt").unlink()

    def reviewing(recording: Recording) -> bool:
        return any(s.name == "provider:start" and s.source == "reviewer" for s in recording.signals)

    cut = run_until(store_place, tmp_path, reviewing)
    assert "agent:reviewer:completed" not in names(cut)
    provider: ScriptedProvider = desk.provider()
    with store_place.open() as store:
        result = desk.graph.resume_sync(cut.run_id, record=store, provider=provider)
        resumed = store.load(cut.run_id)
    assert result.state == uninterrupted.state
    assert (tmp_path / "orders.txt").read_text() == "buy up\n"  # placed once
    assert [r.agent for r in provider.requests] == ["reviewer"]  # the call in flight, again
    assert_one_clean_log(resumed)


def test_killed_in_a_handler_after_its_answer_reuses_the_answer(
    desk: ModuleType, store_place: StorePlace, tmp_path: Path
) -> None:
    def answered(recording: Recording) -> bool:
        return any(s.name == "provider:end" and s.source == "risk" for s in recording.signals)

    cut = run_until(store_place, tmp_path, answered, DESK_SLOW_CHECK="1")
    assert "agent:risk:completed" not in names(cut)
    provider: ScriptedProvider = desk.provider()
    with store_place.open() as store:
        result = desk.graph.resume_sync(cut.run_id, record=store, provider=provider)
        resumed = store.load(cut.run_id)
    assert result.state["risk"] == "risk low"
    assert result.state["review"] == "approved"
    assert [r.agent for r in provider.requests] == ["reviewer"]  # risk's answer was reused
    assert names(resumed).count("provider:end") == 3
    assert (tmp_path / "orders.txt").read_text() == "buy up\n"
    assert_one_clean_log(resumed)


def test_reactor_resume_picks_up_the_run_from_the_command_line(
    desk: ModuleType, tmp_path: Path
) -> None:
    place = StorePlace("sqlite", str(tmp_path / "runs.db"))

    def reviewing(recording: Recording) -> bool:
        return any(s.name == "provider:start" and s.source == "reviewer" for s in recording.signals)

    cut = run_until(place, tmp_path, reviewing)

    def reactor(*args: str) -> CliResult:
        return reactor_cli(tmp_path, *args, "--db", place.where, "--plain", env=dict(os.environ))

    running = reactor("runs", "--status", "running")
    assert cut.run_id in running.stdout
    resumed = reactor("resume", "last", "--provider", "scripted", "--quiet")
    assert resumed.returncode == 0, resumed.stderr
    assert f"run {cut.run_id} (desk): completed" in resumed.stdout
    assert (tmp_path / "orders.txt").read_text() == "buy up\n"
    assert reactor("runs", "--status", "running").stdout.startswith("No runs with status")

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from examples.trading_bot.app import broker, describe, graph
from examples.trading_bot.scripted import SCENARIOS, scripted_provider
from reactor import MemorySignalStore, Recording, RunResult, SQLiteSignalStore
from reactor.exceptions import RecordingError
from tests.reactor.cli_support import reactor_cli


def run(scenario: str, **market: object) -> tuple[RunResult, MemorySignalStore]:
    store = MemorySignalStore()
    result = graph.run_sync(
        input={"symbol": "TEST", "prices": SCENARIOS[scenario], "cash": 10_000.0, **market},
        provider=scripted_provider(latency=0),
        record=store,
    )
    return result, store


@pytest.mark.parametrize(
    ("scenario", "decision", "agents"),
    [
        pytest.param(
            "bull",
            "Decision: BUY 24 TEST",
            ["market", "analyst", "risk", "trader", "reviewer", "executor"],
            id="bull-buys",
        ),
        pytest.param(
            "bear",
            "Decision: SELL 11 TEST",
            ["market", "analyst", "risk", "trader", "reviewer", "executor"],
            id="bear-sells",
        ),
        pytest.param(
            "choppy",
            "Decision: no trade, the reviewer rejected it",
            ["market", "analyst", "risk", "trader", "reviewer"],
            id="choppy-rejected",
        ),
        pytest.param(
            "flat",
            "Decision: no trade, analysis confidence 0.52",
            ["market", "analyst", "risk"],
            id="flat-waits",
        ),
    ],
)
def test_each_market_gets_its_own_sensible_decision(
    scenario: str, decision: str, agents: list[str]
) -> None:
    result, _ = run(scenario)
    assert result.ok
    assert describe(dict(result.state))[0].startswith(decision)
    ran = [name for name, count in result.metrics.activations_by_agent.items() if count]
    assert ran == agents


def test_analyst_and_risk_run_concurrently_and_trader_joins_them() -> None:
    result = graph.run_sync(
        input={"symbol": "T", "prices": SCENARIOS["bull"]}, provider=scripted_provider(latency=0.02)
    )
    names = [s.name for s in result.signals]
    assert names.index("agent:risk:activated") < names.index("agent:analyst:completed")
    trader = [(s.name, s.payload.get("reason")) for s in result.select("agent:trader:*")]
    assert trader[0] == ("agent:trader:skipped", "guard")  # one input was not there yet
    assert [s.name for s in result.select("agent:trader:activated")] == ["agent:trader:activated"]


def test_every_agent_has_structured_output() -> None:
    assert all(a.output is not None for a in graph.agents.values())


def test_the_run_ends_on_execution() -> None:
    result, _ = run("bull")
    assert result.status == "ended"
    assert result.state["ledger"] == [result.state["execution"]]
    actor = result.select("state:execution:changed")[0].payload["actor"]
    assert actor == "agent:executor"


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_a_recorded_run_replays_exactly(scenario: str) -> None:
    result, store = run(scenario)
    recording = store.load(result.run_id)
    replayed = graph.run_sync(replay=recording)
    assert replayed.state == result.state
    assert recording.diff(Recording.from_signals(replayed.signals)) is None


def test_the_demo_runs_end_to_end_offline(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    env.pop("ANTHROPIC_API_KEY", None)
    completed = subprocess.run(
        [sys.executable, "-m", "examples.trading_bot", "--db", str(db), "--latency", "0.05"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert completed.returncode == 0, completed.stderr
    out = completed.stdout
    assert out.startswith("reactor trading bot · AAPL · scenario bull · offline")
    assert "Decision: BUY" in out
    assert "What happened (causal tree):\nharness:start" in out
    assert " tokens in / " in out
    assert re.search(rf"^  replay:  reactor replay run_\w+ --db {re.escape(str(db))}$", out, re.M)
    assert "✓ ended in" in completed.stderr
    replay = reactor_cli(Path.cwd(), "replay", "last", "--db", str(db), "--quiet", env=env)
    assert replay.returncode == 0, replay.stdout + replay.stderr
    assert replay.stdout.splitlines()[-1].startswith("Replay matches run_")


def test_live_mode_needs_a_key() -> None:
    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
    env["PYTHONPATH"] = os.getcwd()
    completed = subprocess.run(
        [sys.executable, "-m", "examples.trading_bot", "--live", "--no-record"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert completed.returncode == 2
    assert completed.stderr.startswith("--live asks Claude: set ANTHROPIC_API_KEY")


def test_the_bot_killed_mid_run_resumes_from_the_command_line_to_the_same_decision(
    tmp_path: Path,
) -> None:
    root = Path(__file__).resolve().parents[2]
    db = tmp_path / "runs.db"
    env = {**os.environ, "PYTHONPATH": str(root)}
    with subprocess.Popen(
        [sys.executable, "-m", "examples.trading_bot", "--latency", "5", "--db", str(db)],
        cwd=root,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    ) as bot:
        try:
            deadline = time.monotonic() + 120
            started = False
            while time.monotonic() < deadline and not started:
                time.sleep(0.1)
                if db.exists():
                    try:
                        with SQLiteSignalStore(db, readonly=True) as store:
                            runs = store.runs()
                            started = bool(runs) and any(
                                s.name == "provider:start"
                                for s in store.load(runs[0].run_id).signals
                            )
                    except RecordingError:  # the file is there, its tables not yet
                        continue
            assert started, "the bot did not start its model calls in time"
        finally:
            bot.send_signal(signal.SIGKILL)
    resumed = reactor_cli(root, "resume", "last", "--db", str(db), "--quiet", env=env)
    assert resumed.returncode == 0, resumed.stderr
    with SQLiteSignalStore(db, readonly=True) as store:
        recording = store.load(store.resolve("last"))
    uninterrupted, _ = run("bull", symbol="AAPL")
    assert recording.status == "ended"
    # The same decision; its order has the id the broker gave this run's key.
    assert _unkeyed(describe(recording.state)) == _unkeyed(describe(dict(uninterrupted.state)))
    assert [s.name for s in recording.signals].count("harness:resumed") == 1


def _unkeyed(lines: list[str]) -> list[str]:
    """The decision without its order's id (each run's orders have their own keys)."""
    return [re.sub(r"ord_[0-9a-f]{10}", "ord_<key>", line) for line in lines]


def test_an_executor_run_again_after_a_crash_places_its_order_once() -> None:
    result, store = run("bull")
    recorded = store.load(result.run_id)
    cut = MemorySignalStore()  # the process died after the order went out
    cut.start_run(recorded.info)
    for signal_ in recorded.signals:
        if signal_.name == "agent:executor:completed":
            break
        cut.append(signal_)
    placed = dict(broker.orders)
    resumed = graph.resume_sync(result.run_id, record=cut, provider=scripted_provider(latency=0))
    execution = result.state["execution"]
    assert resumed.state["execution"] == execution  # the order already placed
    assert broker.orders == placed  # the broker saw the key again: no second order
    [key] = [k for k, order in broker.orders.items() if order.order_id == execution["order_id"]]
    assert execution["order_id"] == f"ord_{key[:10]}"


def test_the_eval_example_shows_the_decisions_a_stricter_trader_flips(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from xml.etree import ElementTree

    from examples.trading_bot.evaluate import main

    db, junit = tmp_path / "eval.db", tmp_path / "eval.xml"
    assert main(["--db", str(db), "--junit", str(junit)]) == 0
    shown = capsys.readouterr().out
    assert "16 recorded runs: 1 same, 15 changed; 15 model calls" in shown
    flipped = re.findall(r"^  (\w+) +(buy|sell) -> hold +(\d+)% confidence", shown, re.M)
    assert len(flipped) == 4
    assert all(int(confidence) < 90 for _, _, confidence in flipped)
    suite = ElementTree.parse(junit).getroot()
    assert (suite.get("tests"), suite.get("failures")) == ("16", "4")
    with SQLiteSignalStore(db) as store:  # the golden set is kept, and tagged
        assert len(store.runs(tag="dataset=golden")) == 16
    assert main(["--db", str(db)]) == 0  # again: the golden set is not recorded twice
    assert "16 recorded runs" in capsys.readouterr().out

"""The trading desk: a quote feed faster than the model, the analyst admitted per symbol."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from examples.trading_bot.desk import answer, run_desk
from reactor import Message, ProviderRequest
from reactor.service import ObjectStore
from tests.reactor.databases import create_database, drop_database


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The desk's database: a SQLite file, or a PostgreSQL database of its own."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'desk.db'}"
        return
    dsn = create_database()
    try:
        yield dsn
    finally:
        drop_database(dsn)


async def test_the_analyst_answers_each_symbols_latest_quote_not_every_quote(url: str) -> None:
    symbols, seconds, latency = 5, 3.0, 0.5
    # a flood: more than ten quotes per symbol, however busy the machine (past `seconds`)
    done = await run_desk(
        url, symbols=symbols, rate=300.0, seconds=seconds, latency=latency, at_least=11 * symbols
    )
    async with ObjectStore(url) as objects:
        events = await objects.events(limit=100_000)
    assert len(events) >= done.updates + symbols  # every update is in a quote's history
    assert done.latest_seen  # the last run of each symbol saw its last quote
    assert done.outcomes["superseded"] > 0
    assert done.outcomes["completed"] + done.outcomes["superseded"] == done.updates + symbols
    # about one call per symbol per model latency: far fewer than the quotes
    assert done.model_calls <= symbols * (done.fed_for / latency + 4)
    assert done.model_calls == done.outcomes["completed"]


def test_the_analyst_proposes_an_order_only_on_a_clear_move() -> None:
    calm = answer(asked("Quote S01: 100.01 (was 100.0). Propose an order, or nothing."))
    dip = answer(asked("Quote S01: 99.0 (was 100.0). Propose an order, or nothing."))
    assert calm.operations == ()
    (order,) = dip.operations
    assert order.model_dump()["data"] == {
        "symbol": "S01",
        "side": "buy",
        "quantity": 10,
        "limit": 99.0,
    }


def asked(prompt: str) -> ProviderRequest:
    return ProviderRequest(
        agent="analyst", prompt=prompt, system=None, messages=(Message("user", prompt),)
    )


def test_the_desk_runs_offline_from_the_command_line(tmp_path: Path) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "examples.trading_bot.desk",
            "--db",
            f"sqlite:///{tmp_path / 'desk.db'}",
            "--symbols",
            "4",
            "--rate",
            "200",
            "--seconds",
            "2",
            "--latency",
            "0.3",
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
        timeout=180,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "reactor trading desk · 4 symbols · 200 quotes/s · offline"
    assert lines[-1] == "  the analyst saw every symbol's last quote"


def test_bad_numbers_are_refused_with_a_sentence() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "examples.trading_bot.desk", "--rate", "0"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
        timeout=60,
    )
    assert result.returncode == 2
    assert "--rate" in result.stderr

"""Durable timers in the service: held at once on SIGTERM, resumed when they are due.

Through a real ``reactor serve`` (stopped with SIGTERM and started again) and in
process for the wakeup of a run suspended while the service runs.
"""

from __future__ import annotations

import asyncio
import re
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx2

from reactor import AgentContext, SQLiteSignalStore, agent, reactive
from reactor._signals.signal import iso_time
from reactor.service import ObjectStore, ReactionService
from tests.service.server import ALICE, Server, serving, wait_for
from tests.service.support import TYPES


def _run(api: httpx2.Client, run_id: str) -> dict[str, Any]:
    response = api.get(f"/api/runs/{run_id}")
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def _names(run: dict[str, Any]) -> list[str]:
    return [s["name"] for s in run["signals"]]


def _timers(run: dict[str, Any]) -> list[tuple[str, Any]]:
    return [(s["name"], s["payload"]) for s in run["signals"] if s["name"].startswith("timer:")]


def test_sigterm_holds_a_sleeping_run_at_once_and_the_next_start_wakes_it_on_time(
    tmp_path: Path,
) -> None:
    db = f"sqlite:///{tmp_path / 'app.db'}"
    log = tmp_path / "server.log"
    with serving(db, log, grace=300) as server, server.client() as api:
        body = {"graph": "sleeper", "input": {"seconds": 4}}
        run_id = api.post("/api/runs", json=body).json()["run_id"]
        run = wait_for(lambda: _timers(_run(api, run_id)) and _run(api, run_id))
        assert run["info"]["status"] == "waiting"
        ((name, timer),) = _timers(run)
        assert name == "timer:set"
        until = datetime.fromisoformat(timer["until"])
        assert run["timers"] == [
            {"timer_id": timer["timer_id"], "agent": "sleeper", "until": iso_time(until)}
        ]
        page = _page(server, f"/runs/{run_id}")
        assert "Waiting for a time" in page
        shown = until.strftime("%Y-%m-%d %H:%M:%S")
        when = f'<time datetime="{iso_time(until)}">{shown} UTC</time>'
        assert f'<strong class="agent">sleeper</strong> sleeps until {when}' in page
        started = time.monotonic()
        assert server.stop(timeout=120) == 0
        assert time.monotonic() - started < 120, server.output()  # not the 300 s of grace
    with serving(db, log) as again, again.client() as api:
        ready = datetime.now(UTC)  # a loaded machine may restart after the timer was due
        run = wait_for(
            lambda: _run(api, run_id)["info"]["status"] == "completed" and _run(api, run_id),
            timeout=60,
        )
    woke = datetime.fromtimestamp(run["state"]["woke"], UTC)
    assert woke >= until
    assert woke < max(until, ready) + timedelta(seconds=30)  # woken by the service, not later
    names = [s["name"] for s in run["signals"]]
    assert names.count("timer:set") == 1
    assert names.count("timer:fired") == 1
    assert "harness:resumed" in names


def _page(server: Server, path: str) -> str:
    """A page of the web UI, as a browser signed in with a token sees it."""
    with server.client(None) as browser:
        form = browser.get("/").text
        found = re.search(r'name="csrf" value="([^"]*)"', form)
        assert found is not None, form
        signed = browser.post("/", data={"token": ALICE, "csrf": found.group(1)})
        assert signed.status_code == 303, signed.text
        return browser.get(path).text


async def _doze(ctx: AgentContext[Any]) -> float:
    await ctx.sleep(1.0)
    return time.time()


def test_the_service_wakes_a_run_suspended_while_it_runs_when_its_timer_is_due(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'app.db'}"
    dozer = reactive({"doze": agent(run=_doze, updates="woke")}, state={"woke": None}, name="dozer")

    async def scenario() -> tuple[Any, Any, list[str]]:
        with SQLiteSignalStore(tmp_path / "runs.db") as store:
            async with (
                ObjectStore(url, types=TYPES) as objects,
                ReactionService(objects=objects, graphs={"dozer": dozer}, record=store) as service,
            ):
                service.host.wake_every, service.host.wake_margin = 0.1, 0.2
                # A run the service started, suspended by a process that went away.
                handle = dozer.start(record=store, tags={"service": "graph:dozer"})
                timers = aiter(handle.signals("timer:set"))
                await asyncio.wait_for(anext(timers), 60)  # suspended once it sleeps
                await handle.suspend()
                assert store.runs()[0].status == "waiting"
                (wakeup,) = store.wakeups()
                for _ in range(600):  # the service wakes it within seconds (60 s bound a hang)
                    if store.runs()[0].status == "completed":
                        break
                    await asyncio.sleep(0.1)
                recording = store.load(handle.run_id)
                return wakeup, recording, [s.name for s in recording.signals]

    wakeup, recording, names = asyncio.run(scenario())
    assert recording.info.status == "completed"
    assert datetime.fromtimestamp(recording.state["woke"], UTC) >= wakeup.due_at
    assert names.count("timer:set") == 1
    assert names.count("timer:fired") == 1
    assert names.count("harness:resumed") == 1


def test_a_signal_posted_over_http_for_later_is_delivered_then_and_the_run_waits_for_it(
    tmp_path: Path,
) -> None:
    db = f"sqlite:///{tmp_path / 'app.db'}"
    with serving(db, tmp_path / "server.log") as server, server.client() as api:
        run_id = api.post("/api/runs", json={"graph": "relay", "input": {"seconds": 1}}).json()[
            "run_id"
        ]
        at = datetime.now(UTC) + timedelta(seconds=10)  # well after the 1 s pause
        body = {"name": "go", "payload": {"n": 1}, "at": at.isoformat()}
        posted = api.post(f"/api/runs/{run_id}/signals", json=body)
        assert posted.status_code == 202, posted.text
        naive = {"name": "go", "at": datetime.now().isoformat()}
        assert api.post(f"/api/runs/{run_id}/signals", json=naive).status_code == 422
        paused = wait_for(lambda: _names(_run(api, run_id)).count("agent:pause:completed"))
        assert paused == 1  # the pause is over: the run waits for its message
        assert _run(api, run_id)["info"]["status"] == "waiting"
        page = _page(server, f"/runs/{run_id}")
        assert '<strong class="signal">go</strong> is delivered at' in page
        run = wait_for(
            lambda: _run(api, run_id)["info"]["status"] == "completed" and _run(api, run_id),
            timeout=90,
        )
    (go,) = [s for s in run["signals"] if s["name"] == "go"]
    assert datetime.fromisoformat(go["timestamp"]) >= at
    assert "echoed" in [s["name"] for s in run["signals"]]

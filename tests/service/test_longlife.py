"""Runs that live long in the service: deploys that block runs, forks, retention.

Through a real ``reactor serve`` (restarted on new code, as a deploy restarts it) and
in process for the daily retention.
"""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path
from typing import Any

import httpx2
import pytest

from reactor import MemorySignalStore, SQLiteSignalStore, agent, reactive
from reactor._signals.settings import settings
from reactor.service import ObjectStore, ReactionService, ServiceConfigError
from tests.service.server import ALICE, Server, serving, wait_for
from tests.service.support import TYPES


def _run(api: httpx2.Client, run_id: str) -> dict[str, Any]:
    response = api.get(f"/api/runs/{run_id}")
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def _listed(api: httpx2.Client, **params: str) -> dict[str, dict[str, Any]]:
    response = api.get("/api/runs", params=params)
    assert response.status_code == 200, response.text
    return {info["run_id"]: info for info in response.json()}


def test_a_deploy_that_changed_a_waiting_runs_agent_blocks_it_until_forced(
    tmp_path: Path,
) -> None:
    db = f"sqlite:///{tmp_path / 'app.db'}"
    log = tmp_path / "server.log"
    with serving(db, log) as server, server.client() as api:
        run_id = api.post("/api/runs", json={"graph": "approval", "input": "AAPL"}).json()["run_id"]
        wait_for(lambda: _run(api, run_id)["prompts"])
        assert server.stop(timeout=60) == 0
    changed = {"SERVED_APPROVAL": "Ship {{ input }} today?"}  # the new code asks otherwise
    with serving(db, log, env=changed) as server, server.client() as api:
        info = wait_for(
            lambda: _listed(api).get(run_id, {}).get("status") == "blocked" and _listed(api)[run_id]
        )
        assert info["reason"] == (
            "the graph changed what its log says was done (agent 'approve': its prompt "
            "templates changed, and it has 1 recorded activation)"
        )
        assert info["complete"] is False
        assert list(_listed(api, status="blocked")) == [run_id]
        assert run_id not in _listed(api, status="waiting")
        assert _run(api, run_id)["info"]["status"] == "blocked"
        page = _page(server, f"/runs/{run_id}")
        assert "Resume anyway" in page
        assert "its prompt templates changed" in page
        refused = api.post(f"/api/runs/{run_id}/resume")
        assert refused.status_code == 409, refused.text
        assert "agent 'approve': its prompt templates changed" in refused.json()["detail"]
        forced = api.post(f"/api/runs/{run_id}/resume", params={"force": "true"})
        assert forced.status_code == 202, forced.text
        assert forced.json() == {"run_id": run_id}
        run = wait_for(lambda: _run(api, run_id)["prompts"] and _run(api, run_id))
        assert run["info"]["status"] == "waiting"  # not blocked any more
        (prompt,) = run["prompts"]
        reply = f"/api/runs/{run_id}/prompts/{prompt['prompt_id']}/reply"
        assert api.post(reply, json={"answer": "yes"}).status_code == 200
        wait_for(lambda: _run(api, run_id)["info"]["status"] == "completed")
        again = api.post(f"/api/runs/{run_id}/resume", params={"force": "true"})
        assert again.status_code == 409
        assert "has ended (completed)" in again.json()["detail"]


def _blocked(api: httpx2.Client, run_id: str) -> dict[str, Any] | None:
    info = _listed(api).get(run_id)
    return info if info is not None and info["status"] == "blocked" else None


def _page(server: Server, path: str) -> str:
    """A page of the web UI, as a browser signed in with a token sees it."""
    with server.client(None) as browser:
        form = browser.get("/").text
        found = re.search(r'name="csrf" value="([^"]*)"', form)
        assert found is not None, form
        signed = browser.post("/", data={"token": ALICE, "csrf": found.group(1)})
        assert signed.status_code == 303, signed.text
        return browser.get(path).text


def test_a_run_forked_over_the_api_names_its_source_and_goes_on(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'app.db'}"
    with serving(db, tmp_path / "server.log") as server, server.client() as api:
        source = api.post("/api/runs", json={"graph": "count", "input": 41}).json()["run_id"]
        wait_for(lambda: _run(api, source)["info"]["status"] == "completed")
        signals = _run(api, source)["signals"]
        forked = api.post(f"/api/runs/{source}/fork", json={"at": 1, "state": {"seen": True}})
        assert forked.status_code == 202, forked.text
        new_id = forked.json()["run_id"]
        assert new_id != source
        run = wait_for(
            lambda: _run(api, new_id)["info"]["status"] == "completed" and _run(api, new_id)
        )
        assert run["info"]["forked_from"] == source
        names = [s["name"] for s in run["signals"]]
        assert names[0] == signals[0]["name"] == "harness:start"
        assert names[1] == "harness:forked"
        assert run["signals"][1]["payload"]["from_run_id"] == source
        changed = next(s for s in run["signals"] if s["name"] == "state:seen:changed")
        assert changed["payload"]["actor"] == "user"
        assert run["state"]["seen"] is True
        beyond = api.post(f"/api/runs/{source}/fork", json={"at": 999})
        assert beyond.status_code == 422
        assert beyond.json()["detail"].startswith(f"Run {source} has signals 1 to {len(signals)}")
        assert api.post("/api/runs/run_nope/fork", json={"at": 1}).status_code == 404
        assert api.post(f"/api/runs/{source}/fork", json={"at": 0}).status_code == 422


# -- retention, in process -------------------------------------------------------


def _service(objects: ObjectStore, store: Any) -> ReactionService:
    waits = reactive({"ask": agent(ask="Go?", choices=["yes"])}, name="waits")
    quick = reactive({"done": agent(run=lambda ctx: "done")}, name="quick")
    return ReactionService(objects=objects, graphs={"waits": waits, "quick": quick}, record=store)


def test_retention_prunes_ended_runs_daily_and_never_a_waiting_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path / 'app.db'}"
    runs = tmp_path / "runs.db"

    async def first() -> tuple[str, list[str]]:
        with SQLiteSignalStore(runs) as store:
            async with (
                ObjectStore(url, types=TYPES) as objects,
                _service(objects, store) as service,
            ):
                done = [await service.submit("quick") for _ in range(3)]
                waiting = await service.submit("waits")
                for _ in range(600):  # the quick runs end and the other waits (60 s bound a hang)
                    statuses = {info.run_id: info.status for info in store.runs()}
                    if statuses == {waiting: "waiting", **dict.fromkeys(done, "completed")}:
                        break
                    await asyncio.sleep(0.1)
                return waiting, done

    waiting, done = asyncio.run(first())
    time.sleep(1.1)  # not a wait for something: every run is now older than the 1 s kept
    monkeypatch.setenv("REACTOR_RETENTION", "1s")
    settings.cache_clear()  # as a restarted service would: it reads its settings again

    async def second() -> list[str]:
        with SQLiteSignalStore(runs) as store:
            async with ObjectStore(url, types=TYPES) as objects, _service(objects, store):
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline:
                    left = [info.run_id for info in store.runs()]
                    if not set(done) & set(left):
                        return left
                    await asyncio.sleep(0.1)
                return [info.run_id for info in store.runs()]

    assert asyncio.run(second()) == [waiting]


def test_a_retention_that_is_not_a_duration_is_refused_when_the_service_is_made(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("REACTOR_RETENTION", "a month")
    objects = ObjectStore("sqlite://", types=TYPES)
    with pytest.raises(ServiceConfigError, match=r"^REACTOR_RETENTION='a month': is not a dur"):
        _service(objects, MemorySignalStore())

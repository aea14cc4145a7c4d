"""Accepted means recorded, through a real ``reactor serve``: a run whose model answered
what the log cannot hold is ``failed``, streams to its end, and no restart pays again.

Before, the answer (a lone surrogate) failed the store's write: the run stayed
``running`` forever, its event stream raised on every signal, and each restart of the
server resumed it and called the model again.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx2
import pytest

from tests.service.server import serving, wait_for

APP = "tests.service.unrecordable:make_service"
ENDED = ("completed", "failed", "aborted")


def calls(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def ended(api: httpx2.Client, run_id: str) -> Any:
    response = api.get(f"/api/runs/{run_id}")
    assert response.status_code == 200, response.text
    run = response.json()
    return run if run["info"]["status"] in ENDED else None


@pytest.mark.timeout(180)  # two servers start and stop
def test_an_answer_the_log_cannot_hold_fails_the_run_once(url: str, tmp_path: Path) -> None:
    counted = tmp_path / "calls"
    env = {"UNRECORDABLE_CALLS": str(counted)}
    with serving(url, tmp_path / "first.log", app=APP, env=env) as server, server.client() as api:
        started = api.post("/api/runs", json={"graph": "writing", "input": "rain"})
        assert started.status_code == 202, started.text
        run_id = started.json()["run_id"]
        run = wait_for(lambda: ended(api, run_id), timeout=60)
        assert run["info"]["status"] == "failed"
        [failed] = [s for s in run["signals"] if s["name"] == "agent:writer:failed"]
        assert failed["payload"]["error"]["type"] == "PayloadError"
        assert "text:delta.content" in failed["payload"]["error"]["message"]
        with api.sse(f"/api/runs/{run_id}/events") as source:
            streamed = [json.loads(event.data)["name"] for event in source]
        assert streamed[-3:] == ["provider:error", "agent:writer:failed", "harness:end"]
    assert calls(counted) == 1

    again = tmp_path / "second.log"
    with serving(url, again, app=APP, env=env) as server, server.client() as api:
        run = ended(api, run_id)
        assert run is not None
        assert run["info"]["status"] == "failed"
        assert [s["name"] for s in run["signals"]][-1] == "harness:end"
    assert "run resumed" not in again.read_text()  # the service resumes before it is ready
    assert calls(counted) == 1

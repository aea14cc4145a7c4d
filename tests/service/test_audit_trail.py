"""An audit trail you can trust, through real ``reactor serve`` processes.

Acts on a run are in its log with their actors (an abort over HTTP or from the web UI
says who and why); a shutdown suspends runs (``harness:suspended``) and never ends
them ``aborted``, and a resumed run never gives a ``seq`` twice.
"""

from __future__ import annotations

import asyncio
import json
import re
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from reactor.service._hosting.controls import STOPPED
from tests.reactor.test_recording_failures import fill, tiny_disk
from tests.service.server import ALICE, BOB, Server, ok, serving, wait_for
from tests.service.test_scale_out import (
    ended,
    queued,
    recordings,
    submit,
    workers,
)

__all__ = ["queued", "tiny_disk"]  # fixtures: a real 3 MB disk, and a queue on Redis


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    folder = tmp_path_factory.mktemp("audit")
    with serving(f"sqlite:///{folder / 'app.db'}", folder / "server.log") as running:
        yield running


def start(api: httpx2.Client, graph: str, given: Any = None) -> str:
    return str(ok(api.post("/api/runs", json={"graph": graph, "input": given}), 202)["run_id"])


def log_of(api: httpx2.Client, run_id: str) -> list[dict[str, Any]]:
    """The run's whole log, page by page."""
    signals: list[dict[str, Any]] = []
    after = 0
    while True:
        page = ok(api.get(f"/api/runs/{run_id}/signals", params={"after": after}))
        if not page["signals"]:
            return signals
        signals += page["signals"]
        after = page["after"]


def named(signals: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [signal for signal in signals if signal["name"] == name]


# -- acts with their actors ----------------------------------------------------------


def test_an_abort_over_http_is_in_the_log_with_its_actor_and_reason(server: Server) -> None:
    with server.client(ALICE) as api, server.client(BOB) as bob:
        run_id = start(api, "nap", {"seconds": 60})
        answer = ok(bob.post(f"/api/runs/{run_id}/abort", json={"reason": "desk closed early"}))
        assert answer == {
            "run_id": run_id,
            "reason": "desk closed early",
            "status": "aborted",  # decided here, before the answer
            "message_id": None,
        }
        info = ok(api.get(f"/api/runs/{run_id}"))["info"]  # no waiting: it has ended
        assert (info["status"], info["reason"]) == ("aborted", "desk closed early")
        signals = log_of(api, run_id)
    (abort,) = named(signals, "session:abort")
    assert (abort["payload"], abort["source"]) == ({"reason": "desk closed early"}, "user:bob")
    assert signals[-1]["name"] == "harness:end"
    assert signals[-1]["payload"]["status"] == "aborted"
    assert signals[-1]["payload"]["reason"] == "desk closed early"
    assert "cancelled from outside" not in server.output()


def test_an_abort_whose_reason_the_log_cannot_hold_is_refused_and_aborts_nothing(
    server: Server,
) -> None:
    with server.client() as api:
        run_id = start(api, "nap", {"seconds": 60})
        refused = api.post(
            f"/api/runs/{run_id}/abort",
            content=b'{"reason": "\\ud800"}',
            headers={"Content-Type": "application/json"},
        )
        assert refused.status_code == 422, refused.text
        assert "reason" in refused.json()["detail"]
        info = ok(api.get(f"/api/runs/{run_id}"))["info"]
        assert (info["status"], info["live"]) == ("running", True)
        assert named(log_of(api, run_id), "session:abort") == []
        ok(api.post(f"/api/runs/{run_id}/abort", json={"reason": "done with it"}))
        assert ok(api.get(f"/api/runs/{run_id}"))["info"]["status"] == "aborted"


def _signed_in(browser: httpx2.Client) -> str:
    """Sign ``browser`` in as bob; its session's CSRF token."""
    form = browser.get("/").text
    csrf = re.search(r'name="csrf" value="([^"]*)"', form)
    assert csrf is not None
    assert browser.post("/", data={"token": BOB, "csrf": csrf.group(1)}).status_code == 303
    page = re.search(r'name="csrf" value="([^"]*)"', browser.get("/agents").text)
    assert page is not None
    return page.group(1)


def test_an_abort_from_the_web_ui_is_in_the_log_with_the_signed_in_user(server: Server) -> None:
    with server.client(None) as browser, server.client() as api:
        csrf = _signed_in(browser)
        run_id = start(api, "approval", "v7")
        wait_for(lambda: ok(api.get(f"/api/runs/{run_id}"))["prompts"])
        form = {"csrf": csrf, "reason": "not this week"}
        assert browser.post(f"/runs/{run_id}/abort", data=form).status_code == 303
        page = browser.get(f"/runs/{run_id}").text
        assert "The run was stopped." in page
        info = ok(api.get(f"/api/runs/{run_id}"))["info"]
        assert (info["status"], info["reason"]) == ("aborted", "not this week")
        (abort,) = named(log_of(api, run_id), "session:abort")
    assert (abort["payload"], abort["source"]) == ({"reason": "not this week"}, "user:bob")
    # An ended run's page offers no reply to its question any more.
    assert 'action="/runs/' + run_id + '/reply"' not in page


def test_the_run_page_says_why_a_signal_was_refused(server: Server) -> None:
    with server.client(None) as browser, server.client() as api:
        csrf = _signed_in(browser)
        run_id = start(api, "nap", {"seconds": 60})
        sent = {"csrf": csrf, "name": "harness:end", "payload": '{"n": 1}'}
        assert browser.post(f"/runs/{run_id}/signals", data=sent).status_code == 303
        page = browser.get(f"/runs/{run_id}").text
        assert "come from the runtime only" in page
        assert "The payload is not JSON" not in page
        sent = {"csrf": csrf, "name": "go", "payload": "{nope"}
        assert browser.post(f"/runs/{run_id}/signals", data=sent).status_code == 303
        assert "The payload is not JSON" in browser.get(f"/runs/{run_id}").text
        ok(api.post(f"/api/runs/{run_id}/abort"))


# -- a shutdown is not an abort ------------------------------------------------------


def _follow(server: Server, run_id: str, seen: list[tuple[int, str]]) -> threading.Thread:
    """Read the run's Server-Sent Events into ``seen`` until the stream ends."""

    def read() -> None:
        with (
            server.client() as client,
            client.stream("GET", f"/api/runs/{run_id}/events") as events,
        ):
            seq = 0
            for line in events.iter_lines():
                if line.startswith("id:"):
                    seq = int(line.removeprefix("id:").strip())
                elif line.startswith("data:"):
                    seen.append((seq, json.loads(line.removeprefix("data:"))["name"]))

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    return thread


def test_sigterm_suspends_runs_and_the_restart_goes_on_after_their_last_seq(
    tmp_path: Path,
) -> None:
    db = f"sqlite:///{tmp_path / 'app.db'}"
    log = tmp_path / "server.log"
    seen: list[tuple[int, str]] = []
    with serving(db, log, grace=2) as first, first.client() as api:
        waiting = start(api, "approval", "v8")
        busy = start(api, "nap", {"seconds": 600})
        wait_for(lambda: ok(api.get(f"/api/runs/{waiting}"))["prompts"])
        wait_for(lambda: ok(api.get(f"/api/runs/{busy}"))["info"]["signals"] >= 2)
        follower = _follow(first, busy, seen)
        wait_for(lambda: seen)
        assert first.stop(timeout=60) == 0
        follower.join(30)
    output = first.output()
    assert "aborted" not in output
    assert "cancelled from outside" not in output
    with serving(db, log) as again, again.client() as api:
        for run_id in (waiting, busy):
            wait_for(lambda run_id=run_id: named(log_of(api, run_id), "harness:resumed"))
            signals = log_of(api, run_id)
            seqs = [signal["seq"] for signal in signals]
            assert seqs == list(range(1, len(seqs) + 1))  # no seq twice, none missing
            (suspended,) = named(signals, "harness:suspended")
            assert suspended["payload"] == {"reason": STOPPED}
            assert named(signals, "harness:end") == []
            (resumed,) = named(signals, "harness:resumed")
            assert resumed["seq"] == suspended["seq"] + 1
            assert resumed["payload"]["from_seq"] == suspended["seq"]
            assert ok(api.get(f"/api/runs/{run_id}"))["info"]["status"] in ("running", "waiting")
        by_seq = {signal["seq"]: signal["name"] for signal in log_of(api, busy)}
        # What the follower saw before the stop is the log's, seq for seq.
        assert seen
        assert all(by_seq[seq] == name for seq, name in seen), (seen, by_seq)
        ok(api.post(f"/api/runs/{busy}/abort", json={"reason": "enough"}))
        ok(api.post(f"/api/runs/{waiting}/abort", json={"reason": "enough"}))


# -- accepted means recorded ---------------------------------------------------------

AUDITED = "tests.service.audited:make_service"


def test_on_a_full_disk_an_accepted_run_is_never_a_404_and_the_refused_say_why(
    tiny_disk: Path, tmp_path: Path
) -> None:
    db = f"sqlite:///{tiny_disk / 'app.db'}"
    log = tmp_path / "server.log"
    gate = tmp_path / "gate"
    with serving(db, log, app=AUDITED) as server, server.client() as api:
        warm = start(api, "count", 1)
        wait_for(lambda: ok(api.get(f"/api/runs/{warm}"))["info"]["status"] == "completed")
        chatty = start(api, "chatty", {"gate": str(gate), "count": 2000})
        filler = fill(tiny_disk)
        gate.touch()  # its signals now meet a full disk
        answers = [api.post("/api/runs", json={"graph": "count", "input": n}) for n in range(200)]
        assert {answer.status_code for answer in answers} <= {202, 503}, {
            answer.status_code: answer.text for answer in answers
        }
        refused = [answer.json() for answer in answers if answer.status_code == 503]
        assert refused, "the disk was full, yet every run was accepted"
        assert all("could not be recorded" in body["detail"] for body in refused)
        accepted = [chatty] + [a.json()["run_id"] for a in answers if a.status_code == 202]

        def ended() -> dict[str, dict[str, Any]]:
            infos = {run_id: ok(api.get(f"/api/runs/{run_id}"))["info"] for run_id in accepted}
            done = all(info["status"] in ("completed", "failed") for info in infos.values())
            return infos if done else {}

        infos = wait_for(ended, 60)  # every accepted id answers, and none stays running
        assert infos[chatty]["status"] == "failed"
        assert infos[chatty]["reason"].startswith("RecordingError: Recording run")
        listed = {info["run_id"]: info for info in ok(api.get("/api/runs", params={"limit": 1000}))}
        assert {run_id: listed[run_id]["status"] for run_id in accepted} == {
            run_id: info["status"] for run_id, info in infos.items()
        }
        assert chatty in [
            i["run_id"] for i in ok(api.get("/api/runs", params={"status": "failed"}))
        ]
        filler.unlink()

        def written() -> bool:  # its end is written once the disk has room again
            lines = server.output().splitlines()
            return any("run's end recorded" in line and chatty in line for line in lines)

        wait_for(written, 60)
    with serving(db, log, app=AUDITED) as again, again.client() as api:
        for run_id, before in infos.items():
            info = ok(api.get(f"/api/runs/{run_id}"))["info"]
            assert info["status"] == before["status"], (run_id, info)
        assert ok(api.get(f"/api/runs/{chatty}"))["info"]["reason"].startswith("RecordingError")


# -- nothing stays running for a dead process ----------------------------------------


def _notes(path: Path) -> list[list[str]]:
    return [line.split() for line in path.read_text().splitlines()] if path.exists() else []


def test_a_reaction_cut_off_by_kill_9_goes_on_as_the_same_run(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'app.db'}"
    log, notes, gate = tmp_path / "server.log", tmp_path / "notes.log", tmp_path / "gate"
    env = {"REACTOR_TEST_REACTIONS": str(notes)}
    with serving(db, log, app=AUDITED, env=env) as first, first.client() as api:
        note = {"type": "Note", "data": {"gate": str(gate)}}
        assert api.post("/api/objects", json=note).status_code == 201
        ((_, run_id),) = wait_for(lambda: _notes(notes))  # its reaction is under way
        wait_for(lambda: ok(api.get(f"/api/runs/{run_id}"))["info"]["signals"] >= 2)
        first.process.kill()  # kill -9, mid-reaction
        first.process.wait(30)
    gate.touch()
    with serving(db, log, app=AUDITED, env=env) as again, again.client() as api:

        def done() -> list[dict[str, Any]]:
            entries = ok(api.get("/api/processing-log"))
            return entries if entries[0]["status"] == "completed" else []

        (entry,) = wait_for(done, 60)
        assert (entry["run_id"], entry["attempts"]) == (run_id, 2)  # the same run, resumed
        info = ok(api.get(f"/api/runs/{run_id}"))["info"]
        assert info["status"] == "completed"
        signals = log_of(api, run_id)
        assert [s["name"] for s in signals].count("harness:resumed") == 1
        seqs = [signal["seq"] for signal in signals]
        assert seqs == list(range(1, len(seqs) + 1))
        assert ok(api.get("/api/runs", params={"status": "running"})) == []
    assert _notes(notes) == [["start", run_id], ["start", run_id], ["end", run_id]]


@pytest.mark.timeout(600)
def test_a_stopping_worker_suspends_its_run_and_the_next_goes_on_after_its_last_seq(
    queued: str, redis_url: str, tmp_path: Path
) -> None:
    db = queued
    with workers(1, db, redis_url, tmp_path, grace=5) as (worker,):
        release = tmp_path / "release"
        (run_id,) = asyncio.run(submit(db, 1, seconds=60, release=release))  # past the grace
        steps = tmp_path / "steps.log"
        wait_for(lambda: steps.exists() and run_id in steps.read_text())  # in its wait
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(60) == 0
    held = recordings(db, [run_id])[run_id]
    assert held.signals[-1].name == "harness:suspended"
    assert held.signals[-1].payload == {"reason": STOPPED}
    assert "harness:end" not in [s.name for s in held.signals]
    output = (tmp_path / "worker0.log").read_text()
    assert "aborted" not in output
    assert "cancelled from outside" not in output
    assert "Exception" not in output
    release.touch()  # the resumed run need not wait its minute again
    with workers(1, db, redis_url, tmp_path):
        wait_for(lambda: ended(db, [run_id]), 180)
    log = recordings(db, [run_id])[run_id]
    assert log.status == "completed"
    seqs = [s.seq for s in log.signals]
    assert seqs == list(range(1, len(seqs) + 1))
    (resumed,) = log.select("harness:resumed")
    assert resumed.seq == held.signals[-1].seq + 1

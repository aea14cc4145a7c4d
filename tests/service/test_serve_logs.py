"""Logs a machine can ship: every line `reactor serve` and `reactor worker` write is one
JSON object (``--log-format json``, the default off a terminal), uvicorn's, taskiq's, an
app's stdlib lines and warnings included; access lines carry the request and its caller.

Real processes on loopback ports (a private redis-server for the worker), stopped with
SIGTERM, read from what they wrote to stdout and stderr.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest

from tests.redis_server import free_port
from tests.service.server import ALICE, BOB, TOKENS, serve_command, wait_for
from tests.service.test_scale_out_faults import start_redis

NOISY_APP = textwrap.dedent(
    """
    import logging
    import warnings

    from tests.service.served import make_service

    logging.getLogger("noisy.app").info("loaded %s", "noisy")
    warnings.warn("noisy is old; use served", UserWarning, stacklevel=1)
    """
)
"""An app whose module logs through the standard `logging` module and warns on import."""


@contextmanager
def running(
    command: list[str], tmp_path: Path, name: str, env: Mapping[str, str]
) -> Iterator[subprocess.Popen[bytes]]:
    """``command`` with its stdout and stderr in ``<name>.out`` and ``<name>.err``; at the
    end SIGTERM (SIGKILL at the latest)."""
    environ = {**os.environ, "PYTHONPATH": f"{os.getcwd()}{os.pathsep}{tmp_path}", **env}
    with (tmp_path / f"{name}.out").open("wb") as out, (tmp_path / f"{name}.err").open("wb") as err:
        process = subprocess.Popen(command, stdout=out, stderr=err, env=environ)
    try:
        yield process
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)


def ready(url: str, process: subprocess.Popen[bytes]) -> None:
    def answers() -> bool:
        assert process.poll() is None, f"it exited with {process.returncode}"
        try:
            return httpx2.get(f"{url}/healthz", timeout=2).status_code == 200
        except httpx2.TransportError:
            return False

    wait_for(answers, timeout=60)


def stopped(process: subprocess.Popen[bytes]) -> int:
    process.send_signal(signal.SIGTERM)
    return process.wait(60)


def json_lines(tmp_path: Path, name: str) -> list[dict[str, Any]]:
    """Every line the process wrote, stdout's then stderr's, each parsed as a JSON object."""
    lines = []
    for stream in ("out", "err"):
        for line in (tmp_path / f"{name}.{stream}").read_text().splitlines():
            try:
                parsed = json.loads(line)
            except ValueError:
                pytest.fail(f"not a JSON line on std{stream} of {name}: {line!r}")
            assert isinstance(parsed, dict), line
            lines.append(parsed)
    return lines


def accesses(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [line for line in lines if line.get("logger") == "reactor.access"]


@pytest.mark.timeout(120)
def test_every_line_reactor_serve_writes_is_a_json_object(tmp_path: Path) -> None:
    (tmp_path / "noisy_app.py").write_text(NOISY_APP)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = serve_command(
        *("--db", f"sqlite:///{tmp_path / 'app.db'}", "--port", str(port), "--grace", "5"),
        *("--app", "noisy_app:make_service", "--log-format", "json"),
    )
    with running(command, tmp_path, "serve", {"REACTOR_API_TOKENS": TOKENS}) as process:
        ready(url, process)
        alice = {"Authorization": f"Bearer {ALICE}"}
        with httpx2.Client(base_url=url, timeout=30) as http:
            assert http.get("/api/runs", headers=alice).status_code == 200
            assert http.get("/api/nothing-here?token=s3cret-query").status_code == 404
            assert http.get("/api/runs").status_code == 401
            started = http.post(
                "/api/runs",
                json={"graph": "count", "input": 1},
                headers={"Authorization": f"Bearer {BOB}"},
            )
            assert started.status_code == 202, started.text
        assert stopped(process) == 0
    assert (tmp_path / "serve.err").read_text() == ""  # nothing beside the log
    lines = json_lines(tmp_path, "serve")
    for line in lines:
        assert {"event", "level", "timestamp"} <= line.keys(), line
    seen = [
        (line["method"], line["path"], line["status"], line.get("user"))
        for line in accesses(lines)
        if line["path"] != "/healthz"
    ]
    assert seen == [
        ("GET", "/api/runs", 200, "alice"),
        ("GET", "/api/nothing-here", 404, None),  # the query string is not logged
        ("GET", "/api/runs", 401, None),
        ("POST", "/api/runs", 202, "bob"),
    ]
    health = [line for line in accesses(lines) if line["path"] == "/healthz"]
    assert health
    assert all(line["status"] == 200 and "user" not in line for line in health)
    for line in accesses(lines):
        assert (line["event"], line["level"]) == ("request", "info")
        assert isinstance(line["duration_ms"], float)
        assert line["duration_ms"] >= 0
        assert line["client"].startswith("127.0.0.1:")
    said = {(line.get("logger"), line["event"]) for line in lines}
    assert ("uvicorn.error", "Application startup complete.") in said  # uvicorn's own
    assert ("noisy.app", "loaded noisy") in said  # an app's stdlib logger
    assert ("reactor.service", "service stopped") in said
    tuned = [line for line in lines if line["event"] == "garbage collector tuned"]
    assert [(t["logger"], t["busy_at"], t["full_threshold"]) for t in tuned] == [
        ("reactor.cli", 100, 1_000)
    ]
    warned = [line for line in lines if line.get("logger") == "py.warnings"]
    assert [line["level"] for line in warned] == ["warning"]
    assert "UserWarning: noisy is old; use served" in warned[0]["event"]
    assert "s3cret-query" not in (tmp_path / "serve.out").read_text()
    assert ALICE not in (tmp_path / "serve.out").read_text()


@pytest.mark.timeout(180)
def test_a_worker_and_its_server_log_json_lines_by_default_off_a_terminal(
    tmp_path: Path,
) -> None:
    """The worker is given no --log-format: its stdout is a file, so it writes JSON."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    redis_port = free_port()
    redis = start_redis(redis_port, tmp_path)
    env = {
        "REACTOR_API_TOKENS": TOKENS,
        "REACTOR_REDIS_URL": f"redis://127.0.0.1:{redis_port}/0",
        "REACTOR_SERVICE_DB": f"sqlite:///{tmp_path / 'app.db'}",
        "REACTOR_TEST_STEPS": str(tmp_path / "steps.log"),
    }
    app = ("--app", "tests.service.queued:make_service")
    serve = serve_command("--port", str(port), "--grace", "5", *app, "--log-format", "json")
    work = [sys.executable, "-m", "reactor", "worker", *app, "--grace", "5"]
    try:
        with ExitStack() as stack:
            server = stack.enter_context(running(serve, tmp_path, "serve", env))
            ready(url, server)
            worker = stack.enter_context(running(work, tmp_path, "worker", env))
            headers = {"Authorization": f"Bearer {ALICE}"}
            with httpx2.Client(base_url=url, headers=headers, timeout=30) as http:
                started = http.post("/api/runs", json={"graph": "steps", "input": {"seconds": 0}})
                assert started.status_code == 202, started.text
                run = f"/api/runs/{started.json()['run_id']}"

                def completed() -> bool:
                    assert worker.poll() is None, f"the worker exited with {worker.returncode}"
                    return bool(http.get(run).json()["info"]["status"] == "completed")

                wait_for(completed, timeout=90)
            assert stopped(worker) == 0
            assert stopped(server) == 0
    finally:
        redis.kill()
        redis.wait(10)
    assert (tmp_path / "worker.err").read_text() == ""
    worked = json_lines(tmp_path, "worker")
    taking = [line for line in worked if line["event"] == "taking jobs"]
    assert [line["concurrency"] for line in taking] == [32]
    assert [line["busy_at"] for line in worked if line["event"] == "garbage collector tuned"] == [
        100
    ]
    assert any(str(line.get("logger")).startswith("taskiq") for line in worked), worked
    assert ("reactor.worker", "worker stopped") in {
        (ln.get("logger"), ln["event"]) for ln in worked
    }
    served = json_lines(tmp_path, "serve")
    posted = [line for line in accesses(served) if line["method"] == "POST"]
    assert [(line["path"], line["status"], line["user"]) for line in posted] == [
        ("/api/runs", 202, "alice")
    ]


def test_console_lines_are_for_a_person(tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = serve_command(
        *("--db", f"sqlite:///{tmp_path / 'app.db'}", "--port", str(port), "--grace", "5"),
        *("--log-format", "console", "--no-tune-gc"),
    )
    with running(command, tmp_path, "serve", {"REACTOR_API_TOKENS": TOKENS}) as process:
        ready(url, process)
        headers = {"Authorization": f"Bearer {ALICE}"}
        assert httpx2.get(f"{url}/api/runs", headers=headers, timeout=30).status_code == 200
        assert stopped(process) == 0
    assert (tmp_path / "serve.out").read_text() == ""  # console lines go to stderr
    lines = (tmp_path / "serve.err").read_text().splitlines()
    assert not [line for line in lines if line.startswith("{")]
    request = [line for line in lines if "path=/api/runs" in line]
    assert len(request) == 1, lines
    assert "[info" in request[0]
    for part in ("request", "[reactor.access]", "method=GET", "status=200", "user=alice"):
        assert part in request[0]
    assert any("Application startup complete." in line for line in lines)
    assert any("garbage collector left as it is" in line for line in lines)
    assert not any("garbage collector tuned" in line for line in lines)

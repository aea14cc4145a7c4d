"""The service under faults, through a real `reactor serve`: restarts, hostile browsers, limits."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx2
import pydantic
import pytest

from reactor.exceptions import ServiceConfigError
from tests.redis_server import free_port
from tests.service.server import ALICE, serve_command, serving, wait_for


def _run(api: httpx2.Client, run_id: str) -> dict[str, Any]:
    response = api.get(f"/api/runs/{run_id}")
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def test_a_waiting_approval_survives_restarts_and_sigterm_does_not_wait_for_it(
    tmp_path: Path,
) -> None:
    db = f"sqlite:///{tmp_path / 'app.db'}"
    log = tmp_path / "server.log"
    with serving(db, log, grace=300) as server, server.client() as api:
        run_id = api.post("/api/runs", json={"graph": "approval", "input": "AAPL"}).json()["run_id"]
        wait_for(lambda: _run(api, run_id)["prompts"])
        began = time.monotonic()
        assert server.stop(timeout=120) == 0
        assert time.monotonic() - began < 120, server.output()  # not the 300 s grace
    for _ in range(2):  # any number of restarts
        with serving(db, log) as again, again.client() as api:
            run = wait_for(lambda: _run(api, run_id)["prompts"] and _run(api, run_id))
            assert run["info"]["status"] == "waiting"
            (prompt,) = run["prompts"]
            assert prompt["question"] == "Ship AAPL?"
    with serving(db, log) as last, last.client() as api:
        (prompt,) = wait_for(lambda: _run(api, run_id)["prompts"])
        reply = f"/api/runs/{run_id}/prompts/{prompt['prompt_id']}/reply"
        taken = api.post(reply, json={"answer": "yes"})
        assert taken.status_code == 200, taken.text
        wait_for(lambda: _run(api, run_id)["info"]["status"] == "completed")
        signals = _run(api, run_id)["signals"]
        (done,) = [s for s in signals if s["name"] == "agent:approve:completed"]
        assert done["payload"]["output"] == "yes"
        assert [s["name"] for s in signals].count("harness:end") == 1


def test_hostile_browsers_and_oversized_bodies_are_refused(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'app.db'}"
    with serving(db, tmp_path / "server.log") as server, server.client() as api:
        port = server.url.rsplit(":", 1)[1]
        rebound = api.get("/api/runs", headers={"Host": f"evil.example:{port}"})
        assert rebound.status_code == 403
        assert "does not answer to the host 'evil.example" in rebound.json()["detail"]
        assert api.get("/api/runs", headers={"Host": f"localhost:{port}"}).status_code == 200
        person = {"type": "Person", "data": {"name": "Eve"}}
        for header in ("Origin", "Referer"):
            cross = api.post(
                "/api/objects", json=person, headers={header: "https://evil.example/page"}
            )
            assert cross.status_code == 403, cross.text
        own = api.post("/api/objects", json=person, headers={"Origin": server.url})
        assert own.status_code == 201, own.text
        plain = api.post(
            "/api/objects", content=b'{"type": "Person", "data": {}}',
            headers={"Content-Type": "text/plain"},
        )  # fmt: skip
        assert plain.status_code == 415
        huge = api.post(
            "/api/objects", json={"type": "Person", "data": {"name": "x" * (2 * 1024 * 1024)}}
        )
        assert huge.status_code == 413
        assert "REACTOR_MAX_BODY" in huge.json()["detail"]
        assert api.get("/api/objects").status_code == 200  # nothing of them was stored
        assert [o["data"]["name"] for o in api.get("/api/objects").json()] == ["Eve"]


def test_serve_says_the_port_is_taken_before_starting_anything(tmp_path: Path) -> None:
    port = free_port()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", port))
        taken.listen()
        done = subprocess.run(
            serve_command(
                *("--db", f"sqlite:///{tmp_path / 'app.db'}", "--port", str(port)),
                *("--log-format", "console"),  # lines for a person, on stderr
            ),
            capture_output=True,
            text=True,
            timeout=60,
            env={"PATH": "/usr/bin:/bin", "REACTOR_API_TOKENS": f"{ALICE}:alice"},
        )
    assert done.returncode != 0
    assert f"Cannot listen on 127.0.0.1:{port}" in done.stderr
    assert "service started" not in done.stderr
    assert not (tmp_path / "app.db").exists()


def test_names_longer_than_their_column_are_refused_before_the_database() -> None:
    from reactor.service import Create, TokenAuth, User
    from reactor.service._objects.schema import agents, objects
    from reactor.service._objects.values import NAME_LENGTH, TYPE_LENGTH

    def length(column: Any) -> int:
        return int(column.type.length)

    assert (length(objects.c.type), length(objects.c.actor_id)) == (TYPE_LENGTH, NAME_LENGTH)
    assert length(agents.c.cron_schedule) == length(agents.c.name) == NAME_LENGTH
    with pytest.raises(pydantic.ValidationError, match="type"):
        Create("T" * 300, {})
    with pytest.raises(pydantic.ValidationError, match="id"):
        User("u" * 300)
    with pytest.raises(ServiceConfigError, match="at most 200"):
        TokenAuth({"s3cret": "u" * 300})


class Proxy:
    """A TCP proxy to PostgreSQL on a free port: ``cut()`` makes the database unreachable
    (the listener closed, every connection dropped), ``mend()`` brings it back."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target, self.port = target, free_port()
        self._sockets: list[socket.socket] = []
        self._listener: socket.socket | None = None
        self.mend()

    def mend(self) -> None:
        listener = socket.create_server(("127.0.0.1", self.port), reuse_port=True)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def cut(self) -> None:
        listener, self._listener = self._listener, None
        if listener is None:
            return
        with contextlib.suppress(OSError):  # wakes the accepting thread (close alone does not)
            listener.shutdown(socket.SHUT_RDWR)
        listener.close()
        for sock in list(self._sockets):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
        self._sockets.clear()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            if self._listener is not listener:  # cut meanwhile
                client.close()
                return
            server = socket.create_connection(self.target)
            self._sockets += [client, server]
            for one, other in ((client, server), (server, client)):
                threading.Thread(target=self._pipe, args=(one, other), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                sink.sendall(data)
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)


def test_while_the_database_is_unreachable_the_api_answers_503_with_retry_after(
    tmp_path: Path, postgres_url: str
) -> None:
    url = urlsplit(postgres_url)
    proxy = Proxy((url.hostname or "127.0.0.1", url.port or 5432))
    db = urlunsplit(url._replace(netloc=f"{url.username}@127.0.0.1:{proxy.port}"))
    try:
        with serving(db, tmp_path / "server.log") as server, server.client() as api:
            person = {"type": "Person", "data": {"name": "Ada"}}
            assert api.post("/api/objects", json=person).status_code == 201
            proxy.cut()
            for method, path, body in (
                ("GET", "/api/objects", None),
                ("POST", "/api/objects", person),
                ("GET", "/api/runs", None),
            ):
                down = api.request(method, path, json=body)
                assert down.status_code == 503, (path, down.text)
                assert down.headers["Retry-After"] == "5"
                assert "database cannot be reached" in down.json()["detail"]
            proxy.mend()
            back = wait_for(lambda: (r := api.get("/api/objects")).status_code == 200 and r)
            assert [o["data"]["name"] for o in back.json()] == ["Ada"]  # the refused one never was
    finally:
        proxy.cut()

"""Templates over HTTP are data: a hostile prompt never runs code in ``reactor serve``.

An agent defined over the API has a prompt anyone with a token wrote. The path a probe
found (``objects.store.db.engine.dialect.dbapi...os.popen``) and the known Jinja
escapes are refused with ``422`` naming the path when the definition shows them, and
fail the run, recorded, when the path is built at run time; the marker file a
successful escape would write never appears. What templates may do with ``objects``
(``get``, ``find``, ``list``: plain dicts) works.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from tests.service.server import DATABASES, Server, ok, serving_on, wait_for


@pytest.fixture(scope="module", params=DATABASES)
def server(request: pytest.FixtureRequest) -> Iterator[Server]:
    with serving_on(request) as running:
        yield running


def _escapes(marker: Path) -> list[tuple[str, str]]:
    popen = f"popen('touch {marker}').read()"
    return [
        (
            "{{ objects.store.db.engine.dialect.dbapi.aiosqlite.core.logging.os." + popen + " }}",
            "objects.store",
        ),
        ("{{ objects.store.db.engine.dialect.dbapi.logging.os." + popen + " }}", "objects.store"),
        ("{{ cycler.__init__.__globals__.os." + popen + " }}", "cycler.__init__"),
        ("{{ lipsum.__globals__['os']." + popen + " }}", "lipsum.__globals__"),
        ("{{ namespace.__init__.__globals__.os." + popen + " }}", "namespace.__init__"),
        ("{{ self.__init__.__globals__.__builtins__ }}", "self.__init__"),
        ("{{ object|attr('__class__') }}", "attr('__class__')"),
    ]


def _run_of(api: httpx2.Client, run_id: str) -> dict[str, Any]:
    def ended() -> Any:
        run = ok(api.get(f"/api/runs/{run_id}"))
        return run if run["info"]["status"] not in ("running", "queued") else None

    found: dict[str, Any] = wait_for(ended)
    return found


def test_a_prompt_that_shows_an_escape_is_refused_and_nothing_is_stored(
    api: httpx2.Client, tmp_path: Path
) -> None:
    marker = tmp_path / "pwned.txt"
    for number, (prompt, path) in enumerate(_escapes(marker)):
        name = f"probe{number}"
        for field in ("prompt", "role"):
            body = {"name": name, "prompt": prompt if field == "prompt" else "hi"}
            if field == "role":
                body["role"] = prompt
            refused = api.post("/api/agents", json=body)
            assert refused.status_code == 422, refused.text
            detail = refused.json()["detail"]
            assert detail.startswith(f"Agent {name!r}: {field}: "), detail
            assert f"reaches for {path!r}, which is not data" in detail
            assert api.get(f"/api/agents/{name}").status_code == 404
    ok(api.post("/api/agents", json={"name": "harmless", "prompt": "Hello {{ input }}"}), 201)
    for prompt, path in _escapes(marker):
        changed = api.patch("/api/agents/harmless", json={"prompt": prompt})
        assert changed.status_code == 422, changed.text
        assert f"reaches for {path!r}" in changed.json()["detail"]
    assert ok(api.get("/api/agents/harmless"))["prompt"] == "Hello {{ input }}"
    assert not marker.exists()


def test_a_path_built_at_run_time_fails_the_run_recorded_and_runs_nothing(
    api: httpx2.Client, server: Server, tmp_path: Path
) -> None:
    marker = tmp_path / "pwned.txt"
    built = (
        "{{ objects['st' ~ 'ore'].db.engine.dialect.dbapi.logging.os"
        f".popen('touch {marker}').read() }}}}"
    )
    ok(api.post("/api/agents", json={"name": "builder", "prompt": built}), 201)
    started = ok(api.post("/api/agents/builder/run", json={"input": "x"}), 202)
    run = _run_of(api, started["run_id"])
    assert run["info"]["status"] == "failed"
    (failed,) = [s for s in run["signals"] if s["name"] == "agent:builder:failed"]
    assert failed["payload"]["error"]["type"] == "TemplateSecurityError"
    assert "reaches for 'objects.store', which is not data" in failed["payload"]["error"]["message"]
    assert not marker.exists()
    assert "Traceback" not in server.output()


def test_templates_read_objects_as_plain_data(api: httpx2.Client) -> None:
    ada = ok(api.post("/api/objects", json={"type": "Person", "data": {"name": "Ada"}}), 201)
    prompt = (
        "{% for p in objects.find('Person', name='Ada') %}{{ p.data.name }} v{{ p.version }}"
        "{% endfor %}; {{ objects.get(input).type }}; "
        "{{ objects.list('Person')|map(attribute='id')|select('equalto', input)|list|length }}"
    )
    ok(api.post("/api/agents", json={"name": "reader", "prompt": prompt}), 201)
    started = ok(api.post("/api/agents/reader/run", json={"input": ada["id"]}), 202)
    run = _run_of(api, started["run_id"])
    assert run["info"]["status"] == "completed", run["info"]
    (completed,) = [s for s in run["signals"] if s["name"] == "agent:reader:completed"]
    assert completed["payload"]["output"] == "done: Ada v1; Person; 1"

"""The same answer on every backend, over HTTP against a real ``reactor serve``.

A NUL (``\\u0000``) in object data (keys or values, at any depth), an object's type, a
tag filter or a signal name is ``422`` naming the field on SQLite and PostgreSQL alike
(PostgreSQL cannot keep a NUL, SQLite could), and nothing is stored. A typed object
stays typed over HTTP too, and an object of a type nothing names comes with
``warnings``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import httpx2
import pytest

from reactor import PayloadError
from reactor.service import ObjectStore
from tests.service.server import DATABASES, Server, ok, serving_on, wait_for
from tests.service.support import TYPES

NUL = "\x00"


@pytest.fixture(scope="module", params=DATABASES)
def server(request: pytest.FixtureRequest) -> Iterator[Server]:
    """One server per database kind for the whole module."""
    with serving_on(request) as running:
        yield running


def invalid(response: httpx2.Response) -> str:
    """The detail of a 422 (never a 500, on any database)."""
    assert response.status_code == 422, response.text
    assert response.json()["error"] == "invalid"
    return str(response.json()["detail"])


@pytest.mark.parametrize(
    ("data", "field"),
    [
        pytest.param({"name": f"Ada{NUL}"}, "data.name", id="value"),
        pytest.param({f"na{NUL}me": "Ada"}, "data (a key)", id="key"),
        pytest.param({"list": [{"deep": [f"{NUL}"]}]}, "data.list[0].deep[0]", id="deep"),
    ],
)
def test_a_nul_in_object_data_is_422_naming_the_field_and_nothing_is_stored(
    api: httpx2.Client, data: dict[str, Any], field: str
) -> None:
    before = ok(api.get("/api/objects"))
    detail = invalid(api.post("/api/objects", json={"type": "Note", "data": data}))
    assert detail.startswith(f"{field} cannot be recorded: it is a string with a NUL character")
    assert ok(api.get("/api/objects")) == before


def test_a_nul_in_an_object_type_is_422_and_nothing_is_stored(api: httpx2.Client) -> None:
    before = ok(api.get("/api/objects"))
    detail = invalid(api.post("/api/objects", json={"type": f"No{NUL}te", "data": {}}))
    assert detail.startswith("type cannot be used: it is a string with a NUL character")
    assert ok(api.get("/api/objects")) == before


def test_a_nul_in_an_update_is_422_and_the_object_stays(api: httpx2.Client) -> None:
    note = ok(api.post("/api/objects", json={"type": "Note", "data": {"text": "hi"}}), 201)
    detail = invalid(api.patch(f"/api/objects/{note['id']}", json={"data": {"text": f"{NUL}"}}))
    assert detail.startswith("data.text cannot be recorded")
    assert ok(api.get(f"/api/objects/{note['id']}"))["version"] == 1


@pytest.mark.parametrize(
    ("path", "field"),
    [
        pytest.param(f"/api/runs?tag=nightly{NUL}", "tag", id="tag"),
        pytest.param(f"/api/runs?tag=env%3Dprod{NUL}", "tag", id="tag-value"),
        pytest.param(f"/api/runs?graph=count{NUL}", "graph", id="graph"),
        pytest.param(f"/api/runs/run_{NUL}", "run_id", id="run-id"),
        pytest.param(f"/api/runs/run_{NUL}/signals?limit=5", "run_id", id="run-signals"),
        pytest.param(f"/api/runs/run_1/compare/run_{NUL}", "b", id="compare"),
        pytest.param(f"/api/objects?type=Note{NUL}", "type", id="object-type"),
        pytest.param(f"/api/objects/obj_{NUL}", "object_id", id="object-id"),
        pytest.param(f"/api/processing-log?agent=enrich{NUL}", "agent", id="log-agent"),
        pytest.param(f"/api/processing-log/history?object_id={NUL}", "object_id", id="history"),
    ],
)
def test_a_nul_in_a_filter_or_an_id_is_422_naming_it(
    api: httpx2.Client, path: str, field: str
) -> None:
    detail = invalid(api.get(path.replace(NUL, "%00")))
    assert detail.startswith(f"{field} cannot be used: it is a string with a NUL character")


def test_a_nul_in_a_suggestion_id_is_422(api: httpx2.Client) -> None:
    detail = invalid(api.post("/api/suggestions/sug_%00/approve"))
    assert detail.startswith("suggestion_id cannot be used")


def test_a_nul_in_a_signal_name_is_422(api: httpx2.Client) -> None:
    run_id = ok(api.post("/api/runs", json={"graph": "relay", "input": {"seconds": 120}}), 202)[
        "run_id"
    ]
    name = f"go{NUL}"
    detail = invalid(api.post(f"/api/runs/{run_id}/signals", json={"name": name}))
    assert detail.startswith(
        "name cannot be used: it is a string with a NUL character ('\\x00' at index 2)"
    )
    ok(api.post(f"/api/runs/{run_id}/signals", json={"name": "go"}), 202)
    wait_for(lambda: ok(api.get(f"/api/runs/{run_id}"))["info"]["status"] == "completed")


def test_an_update_of_a_field_the_model_lacks_is_422_and_changes_nothing(
    api: httpx2.Client,
) -> None:
    ada = ok(api.post("/api/objects", json={"type": "Person", "data": {"name": "Ada"}}), 201)
    detail = invalid(api.patch(f"/api/objects/{ada['id']}", json={"data": {"nickname": "C"}}))
    assert detail.startswith("Person data is invalid: nickname: Person has no such field.")
    assert ok(api.get(f"/api/objects/{ada['id']}")) == {
        key: value for key, value in ada.items() if key != "warnings"
    }
    assert api.get(f"/api/objects/{ada['id']}?version=2").status_code == 404
    changed = ok(api.patch(f"/api/objects/{ada['id']}", json={"data": {"email": "a@x.org"}}))
    assert changed["version"] == 2


def test_an_update_that_changes_nothing_keeps_the_version(api: httpx2.Client) -> None:
    ada = ok(api.post("/api/objects", json={"type": "Person", "data": {"name": "Ada"}}), 201)
    same = ok(api.patch(f"/api/objects/{ada['id']}", json={"data": {"name": "Ada"}}))
    assert (same["version"], same["updated_at"]) == (1, ada["updated_at"])


def test_a_type_nothing_names_is_stored_with_a_warning(api: httpx2.Client) -> None:
    typo = ok(api.post("/api/objects", json={"type": "Persn", "data": {"name": "Ada"}}), 201)
    assert typo["data"] == {"name": "Ada"}
    assert typo["warnings"] == [
        "No model is registered for type 'Persn' (registered: Company, Person) and no "
        "reaction names it: the object was stored as given, unvalidated. If the type is "
        "misspelled, delete the object and create it again; an object store made with "
        "untyped=False refuses such objects."
    ]
    for known in ("Person", "Company"):
        created = ok(api.post("/api/objects", json={"type": known, "data": {"name": "A"}}), 201)
        assert created["warnings"] == []


# -- the object store itself, in Python ---------------------------------------------


async def test_the_object_store_refuses_a_nul_anywhere_it_would_be_stored(url: str) -> None:
    async with ObjectStore(url, types=TYPES) as objects:
        ada = await objects.create("Person", {"name": "Ada"})
        attempts: list[Callable[[], Awaitable[object]]] = [
            lambda: objects.create("Note", {"text": f"a{NUL}"}),
            lambda: objects.create(f"No{NUL}te", {}),
            lambda: objects.update(ada.id, {"email": f"{NUL}"}),
            lambda: objects.update(f"{ada.id}{NUL}", {"email": "a@x.org"}),
            lambda: objects.delete(f"{ada.id}{NUL}"),
            lambda: objects.get(f"{ada.id}{NUL}"),
            lambda: objects.list(f"Person{NUL}"),
            lambda: objects.events(f"{ada.id}{NUL}"),
        ]
        for attempt in attempts:
            with pytest.raises(PayloadError, match=r"a string with a NUL character"):
                await attempt()
        assert [o.id for o in await objects.list()] == [ada.id]
        assert len(await objects.events()) == 1

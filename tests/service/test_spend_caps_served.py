"""The trading desk example served: an admin's spend cap over HTTP, admission in its definition."""

from __future__ import annotations

from collections.abc import Iterator

import httpx2
import pytest

from tests.service.server import BOB, CAROL, DATABASES, Server, serving_on

APP = "examples.trading_bot.desk:make_service"


@pytest.fixture(scope="module", params=DATABASES)
def server(request: pytest.FixtureRequest) -> Iterator[Server]:
    """The desk's service, one per database kind for the module."""
    with serving_on(request, app=APP) as running:
        yield running


def detail(response: httpx2.Response, status: int) -> str:
    assert response.status_code == status, response.text
    return str(response.json()["detail"])


def test_the_analysts_admission_is_part_of_its_definition(server: Server) -> None:
    with server.client() as api:
        analyst = api.get("/api/agents/analyst").json()
    assert analyst["reaction_config"]["admit"] == [  # what differs from the defaults
        {"policy": "latest"},
        {"policy": "spendcap", "usd": 5.0},
    ]
    assert analyst["spend_cap_usd"] is None


def test_only_an_admin_changes_a_spend_cap(server: Server) -> None:
    for token in (BOB, CAROL):  # an approver and operator, a viewer
        with server.client(token) as api:
            response = api.patch("/api/agents/analyst", json={"spend_cap_usd": 1000})
        assert response.status_code == 403, response.text
    with server.client() as api:
        raised = api.patch("/api/agents/analyst", json={"spend_cap_usd": 1000})
        assert raised.status_code == 200, raised.text
        assert raised.json()["spend_cap_usd"] == 1000.0
        back = api.patch("/api/agents/analyst", json={"spend_cap_usd": None})
        assert back.json()["spend_cap_usd"] is None
        assert api.get("/api/agents/analyst").json()["enabled"] is True


@pytest.mark.parametrize("cap", [0, -5, "a lot", float("inf")], ids=str)
def test_a_cap_that_is_not_dollars_above_zero_is_refused(server: Server, cap: object) -> None:
    with server.client() as api:
        response = api.patch(
            "/api/agents/analyst",
            content=f'{{"spend_cap_usd": {cap!r}}}'.replace("'", '"').replace("inf", "1e999"),
            headers={"content-type": "application/json"},
        )
    assert response.status_code == 422, response.text
    assert "spend_cap_usd" in response.text


def test_an_agent_without_a_spend_cap_has_none_to_raise(server: Server) -> None:
    config: dict[str, object] = {"types": ["Quote"], "events": ["created"]}
    definition = {
        "name": "notes",
        "prompt": "Note on {{ object.data.symbol }}",
        "trigger_type": "reaction",
        "reaction_config": config,
    }
    with server.client() as api:
        assert api.post("/api/agents", json=definition).status_code == 201
        refused = detail(api.patch("/api/agents/notes", json={"spend_cap_usd": 10}), 422)
        assert "SpendCap(scope='agent')" in refused
        capped = {**config, "admit": [{"policy": "spendcap", "usd": 1}]}
        changed = api.patch("/api/agents/notes", json={"reaction_config": capped})
        assert changed.status_code == 200, changed.text
        assert api.patch("/api/agents/notes", json={"spend_cap_usd": 10}).status_code == 200
        api.delete("/api/agents/notes")

"""Reaction agents' definitions: clear errors where they are written, values they keep."""

from __future__ import annotations

import re
from typing import Any

import pytest

from reactor import AgentConfigError, agent
from reactor.service import Capabilities, Changes, Reaction, ReactionService


@pytest.mark.parametrize(
    ("options", "message"),
    [
        pytest.param(
            {"events": ["creatd"]},
            "Invalid Reaction: unknown event 'creatd' in Reaction(events=...); use created, "
            "updated or deleted.",
            id="unknown-event",
        ),
        pytest.param(
            {"events": []},
            "Invalid Reaction: Reaction(events=...): no events: the agent would never run; list "
            "some of created, updated, deleted.",
            id="no-events",
        ),
        pytest.param(
            {"types": ["Per son"]},
            "Invalid Reaction: Reaction(types=...): 'Per son' is not an object type name: types "
            "appear in signal names (object:<Type>:created), so use a non-empty name without "
            "':', '*' or whitespace.",
            id="bad-type",
        ),
        pytest.param(
            {"concurrency": "serial"},
            "Invalid Reaction: unknown concurrency 'serial' in Reaction(concurrency=...); use "
            "skip, queue, parallel.",
            id="unknown-concurrency",
        ),
        pytest.param(
            {"typs": ["Person"]}, "Invalid Reaction: Reaction has no option 'typs'.", id="typo"
        ),
    ],
)
def test_an_invalid_reaction_is_a_clear_error_where_it_is_written(
    options: dict[str, Any], message: str
) -> None:
    with pytest.raises(AgentConfigError, match=f"^{re.escape(message)}$"):
        Reaction(**options)


def test_a_reaction_config_from_a_row_gets_the_same_errors() -> None:
    assert Reaction.from_config({"types": ["Person"], "events": ["created"]}) == Reaction(
        types=["Person"], events=["created"]
    )
    with pytest.raises(AgentConfigError, match=r"^Invalid Reaction: unknown event 'moved'"):
        Reaction.from_config({"events": ["moved"]})
    with pytest.raises(
        AgentConfigError, match=r"^Reaction config must be a JSON object, got list\.$"
    ):
        Reaction.from_config(["created"])  # type: ignore[arg-type]


def test_single_names_stand_for_lists() -> None:
    reaction = Reaction(types="Person", events="created")
    assert (reaction.types, reaction.events) == (("Person",), ("created",))
    assert Capabilities(allowed_types="Person").allowed_types == ("Person",)


@pytest.mark.parametrize(
    ("type", "event", "actor", "expected"),
    [
        pytest.param("Person", "created", None, True, id="match"),
        pytest.param("Company", "created", None, False, id="other-type"),
        pytest.param("Person", "deleted", None, False, id="other-event"),
        pytest.param("Person", "created", "enrich", False, id="itself"),
        pytest.param("Person", "created", "dedup", True, id="another-agent"),
    ],
)
def test_a_reaction_matches_its_types_events_and_not_itself(
    type: str, event: str, actor: str | None, expected: bool
) -> None:
    reaction = Reaction(types=["Person"], events=["created", "updated"])
    assert reaction.matches(type, event, actor, "enrich") is expected


def test_capabilities_say_why_they_deny() -> None:
    capabilities = Capabilities(can_delete=False, allowed_types=["Person", "Company"])
    assert capabilities.denies("update", "Person") is None
    assert capabilities.denies("delete", "Person") == "it may not delete objects (can_delete=False)"
    assert capabilities.denies("create", "Document") == (
        "it may not touch 'Document' objects (allowed types: Person, Company)"
    )
    with pytest.raises(
        AgentConfigError,
        match=r"^Invalid Capabilities: Capabilities\(can_delete=\.\.\.\): Input should be a "
        r"valid boolean",
    ):
        Capabilities(can_delete="sometimes")  # type: ignore[arg-type]


def test_an_agent_keeps_its_reaction_mode_and_capabilities() -> None:
    enrich = agent(
        prompt="Enrich {{ object.data.name }}",
        output=Changes,
        reaction=Reaction(types=["Person"]),
        execution_mode="hybrid",
        capabilities=Capabilities(can_delete=False),
    )
    assert enrich.reaction == Reaction(types=["Person"])
    assert (enrich.execution_mode, enrich.capabilities.can_delete) == ("hybrid", False)
    with pytest.raises(AgentConfigError, match=r"^Agent 'x': unknown execution_mode 'auto'"):
        agent(name="x", run=lambda ctx: None, execution_mode="auto")  # type: ignore[arg-type]


def test_an_unnamed_agents_problems_are_reported_when_the_service_names_it() -> None:
    from reactor.service import ObjectStore

    broken = agent(run=lambda ctx: None, reaction="Person")  # type: ignore[arg-type]
    with pytest.raises(
        AgentConfigError,
        match=r"^Agent 'enrich': reaction must be a Reaction\(types=\.\.\., events=\.\.\.\), "
        r"got 'Person'\.$",
    ):
        ReactionService(objects=ObjectStore("sqlite://"), agents={"enrich": broken})


def test_changes_are_tagged_by_op_in_json() -> None:
    changes = Changes.model_validate(
        {
            "reasoning": "r",
            "operations": [
                {"op": "create", "type": "Company", "data": {"name": "Acme"}},
                {"op": "update", "id": "obj_1", "data": {"x": 1}},
                {"op": "delete", "id": "obj_2"},
            ],
        }
    )
    assert [type(op).__name__ for op in changes.operations] == ["Create", "Update", "Delete"]
    assert changes.mode == "suggest"
    schema = Changes.model_json_schema()
    assert schema["properties"]["operations"]["items"]["discriminator"]["propertyName"] == "op"

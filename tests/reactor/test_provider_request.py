from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reactor import Message, ProviderRequest, tool

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)


@tool
def quote(symbol: str) -> float:
    """The last price of a stock."""
    return 1.0


def canonical_hash(request: ProviderRequest) -> str:
    text = json.dumps(
        request.fingerprint(), sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    return hashlib.sha256(text.encode()).hexdigest()[:32]


@settings(max_examples=60)
@given(
    agent=st.text(min_size=1),
    system=st.none() | st.text(),
    turns=st.lists(st.tuples(st.sampled_from(["user", "assistant"]), st.text()), min_size=1),
    schema=st.none() | st.dictionaries(st.text(), json_values, max_size=3),
    options=st.dictionaries(st.text(), json_values, max_size=3),
    with_tools=st.booleans(),
)
def test_the_request_hash_is_the_hash_of_the_canonical_fingerprint(
    agent: str,
    system: str | None,
    turns: list[tuple[Any, str]],
    schema: dict[str, Any] | None,
    options: dict[str, Any],
    with_tools: bool,
) -> None:
    messages = [Message(role, content) for role, content in turns]
    tools = (quote,) if with_tools else ()
    for _ in range(2):  # the second time from the remembered parts
        request = ProviderRequest.build(
            agent=agent,
            system=system,
            prompt=messages[0].content,
            messages=messages,
            output_schema=schema,
            tools=tools,
            options=options,
        )
        assert request.request_hash == canonical_hash(request)


def test_a_built_request_has_every_field_and_equals_one_made_field_by_field() -> None:
    built = ProviderRequest.build(agent="a", system="s", prompt="p", options={"model": "m"})
    assert type(built) is ProviderRequest
    made = ProviderRequest(
        "a", "s", "p", built.messages, None, (), {"model": "m"}, built.request_hash
    )
    assert built == made
    with pytest.raises(dataclasses.FrozenInstanceError):
        built.prompt = "q"  # type: ignore[misc]

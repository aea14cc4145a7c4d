"""Node packs: nodePacks, registries and factories, and packages' entry points."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from migration import (
    FlowSpecError,
    NodeRegistry,
    UnknownNodeTypeError,
    check,
    harness_to_reactive,
    run_edge_harness,
)
from migration._nodes.registry import registry_of
from tests.migration.support import flow, node

PACKAGE = '''
"""A package of node types, as a third party would ship it."""

from migration import NodeRegistry


def shout(input):
    return {"text": input["text"].upper()}


TYPES = {"acme.shout": shout}


def counters():
    """A factory: each executor gets a counter of its own."""
    count = {"n": 0}

    def tick(input):
        count["n"] += 1
        return {"n": count["n"]}

    registry = NodeRegistry()
    registry.register("tick.next", tick)
    return registry


NOT_A_PACK = 42
'''


@pytest.fixture
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A distribution on sys.path whose entry points declare node packs."""
    (tmp_path / "acme_nodes.py").write_text(PACKAGE)
    info = tmp_path / "acme_nodes-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-nodes\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        textwrap.dedent(
            """
            [reactor.node_types]
            acme = acme_nodes:TYPES
            tick = acme_nodes:counters
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    yield info
    sys.modules.pop("acme_nodes", None)


def shout_flow(**header: Any) -> dict[str, Any]:
    return flow(
        [node("a", "acme.shout", input={"text": "hi"}), node("t", "tick.next", input={})],
        [("a", "t")],
        **header,
    )


async def test_installed_packs_are_used_when_no_registry_is_given(installed: Path) -> None:
    registry = NodeRegistry.discover()
    assert {"acme", "tick", "core", "claude"} <= set(registry.packs)
    outputs = await run_edge_harness(shout_flow(nodePacks=["core", "acme", "tick"]))
    assert outputs == {"a": {"text": "HI"}, "t": {"n": 1}}


async def test_an_installed_factory_gives_each_executor_fresh_types(installed: Path) -> None:
    result = await check(shout_flow())
    assert result.agrees, result.report()
    assert result.reactive_outputs["t"] == {"n": 1}


async def test_a_shared_registry_carries_state_from_one_run_to_the_next(installed: Path) -> None:
    shared = NodeRegistry.discover()
    result = await check(shout_flow(), registry=shared)
    assert not result.agrees
    assert [d.node for d in result.differences] == ["t"]
    assert (result.differences[0].edge, result.differences[0].reactive) == ({"n": 1}, {"n": 2})


async def test_a_registry_factory_is_called_once_per_executor(installed: Path) -> None:
    calls: list[NodeRegistry] = []

    def factory() -> NodeRegistry:
        calls.append(NodeRegistry.discover())
        return calls[-1]

    result = await check(shout_flow(), registry=factory)
    assert result.agrees, result.report()
    assert len(calls) == 2
    graph = harness_to_reactive(shout_flow(), registry=factory)
    assert len(calls) == 3
    assert (await graph.run()).state["outputs"]["t"] == {"n": 1}


def test_a_broken_entry_point_is_left_out_with_a_warning(installed: Path) -> None:
    with (installed / "entry_points.txt").open("a") as points:
        points.write("broken = acme_nodes:NOT_A_PACK\nmissing = acme_nodes_gone:TYPES\n")
    with capture_logs() as logs:
        registry = NodeRegistry.discover()
    assert "broken" not in registry.packs
    assert "acme" in registry.packs
    warned = {
        entry["pack"]: entry["error"] for entry in logs if entry["event"] == "node pack left out"
    }
    assert warned["broken"] == (
        "TypeError: it gives int, not a NodeRegistry, a mapping {type: function}, or a "
        "function returning one"
    )
    assert warned["missing"].startswith("ModuleNotFoundError: No module named 'acme_nodes_gone'")


async def test_without_the_package_the_types_and_packs_are_unknown() -> None:
    with pytest.raises(UnknownNodeTypeError, match=r"^Unknown node types: 'acme\.shout'"):
        await run_edge_harness(shout_flow())
    with pytest.raises(FlowSpecError, match=r"^Node pack 'acme' is not available"):
        await run_edge_harness(flow([node("a")], nodePacks=["acme"]))


def test_types_join_the_pack_their_name_starts_with() -> None:
    registry = NodeRegistry()
    registry.register("tutorial.flaky", lambda input: input)
    registry.register("standalone", lambda input: input)
    registry.register("x.y", lambda input: input, pack="extras")
    assert registry.packs == ("claude", "core", "extras", "tutorial")
    other = NodeRegistry()
    other.add_pack("mine", registry)
    assert "mine" in other.packs
    assert {"tutorial.flaky", "standalone", "x.y"} <= set(other)


def test_a_registry_source_must_give_a_registry() -> None:
    with pytest.raises(
        TypeError, match=r"^registry= takes a NodeRegistry or a function returning one; got 3\.$"
    ):
        registry_of(lambda: 3)  # type: ignore[arg-type]

"""Property: on random flows, the reactive graph and the edge-based executor agree.

The flows are random DAGs of nodes that add numbers from their predecessors (and
from the flow state their predecessors wrote), with random node and edge conditions
in both dialects (mappings and expression strings), failures (tolerated or not),
retries, short waits that shuffle the reactive completion order, state writes,
``failFast`` either way, and optionally one loop edge. A second family runs a random
body per item of a list, with a loop inside, in order or several items at once.
"""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from migration._spec.topology import cycle_closers
from tests.migration import nodes
from tests.migration.support import run_both

PROPERTY = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _condition(draw: st.DrawFn, var: str) -> dict[str, Any] | str:
    value = draw(st.integers(0, 4))
    negate = draw(st.booleans())
    if draw(st.booleans()):
        test = {"equals": {"var": var, "value": value}}
        return {"not": test} if negate else test
    operator = draw(st.sampled_from(["=", "!=", "<", ">=", "<="]))
    text = f"{var} {operator} {value}"
    return f"$not({text})" if negate else text


@st.composite
def flows(draw: st.DrawFn, *, loop: bool = False) -> dict[str, Any]:
    size = draw(st.integers(2, 7))
    ids = [f"n{i}" for i in range(size)]
    fail_fast = draw(st.booleans())
    # At most one node may stop the run: with two, the reactive graph (which runs
    # independent branches concurrently) may legitimately stop at the other one.
    fatal = None if loop else draw(st.sampled_from([*ids, None]))
    edges: list[dict[str, Any]] = []
    for later in range(1, size):
        for earlier in range(later):
            if draw(st.integers(0, 2)) == 0:
                edge: dict[str, Any] = {"from": ids[earlier], "to": ids[later]}
                if draw(st.integers(0, 3)) == 0:
                    edge["when"] = _condition(draw, f"{ids[earlier]}.value")
                edges.append(edge)
    node_list = []
    for node_id in ids:
        predecessors = [e["from"] for e in edges if e["to"] == node_id]
        values: list[Any] = [draw(st.integers(0, 3))]
        values += [f"{{{{{p}.value | default:0}}}}" for p in predecessors]
        values += [f"{{{{state.{p} | default:0}}}}" for p in predecessors if draw(st.booleans())]
        kind = draw(st.sampled_from(["add", "add", "add", "wait", "fail", "flaky", "state"]))
        node: dict[str, Any] = {"id": node_id, "type": "math.add", "input": {"values": values}}
        if kind == "state":  # remember a number under the node's own key
            node["type"] = "system.state.set"
            node["input"] = {"key": node_id, "value": values[-1]}
        elif kind == "wait":
            node["type"] = "control.wait"
            node["input"] = {"ms": draw(st.integers(0, 3))}
        elif kind == "fail":
            node["type"] = "control.fail"
            node["input"] = {"message": f"{node_id} failed"}
        elif kind == "flaky":
            attempts = draw(st.integers(1, 3))
            node["type"] = "test.fails_until"
            node["input"] = {"succeed_on": draw(st.integers(1, 3))}
            node["policy"] = {"retry": {"maxAttempts": attempts}}
        if kind in ("fail", "flaky") and (node_id != fatal or draw(st.booleans())):
            node.setdefault("policy", {})["continueOnError"] = True
        if predecessors and draw(st.integers(0, 3)) == 0:
            node["when"] = _condition(draw, f"{draw(st.sampled_from(predecessors))}.value")
        node_list.append(node)
    if loop:
        target = draw(st.sampled_from(ids))
        # The loop's `when` reads the target, so the source must be downstream of it
        # (or be it): a condition on a node that is not upstream would be a race.
        body, frontier = {target}, [target]
        while frontier:
            here = frontier.pop()
            for edge in edges:
                if edge["from"] == here and edge["to"] not in body:
                    body.add(edge["to"])
                    frontier.append(edge["to"])
        source = draw(st.sampled_from(sorted(body)))
        edges = [e for e in edges if (e["from"], e["to"]) != (source, target)]
        node_list[ids.index(target)] = {
            "id": target,
            "type": "math.add",
            "input": {"values": [f"{{{{{target}.value | default:0}}}}", 1]},
        }
        edges.append(
            {
                "from": source,
                "to": target,
                "type": "loop",
                "maxIterations": draw(st.integers(1, 4)),
                "when": {
                    "not": {"equals": {"var": f"{target}.value", "value": draw(st.integers(1, 4))}}
                },
            }
        )
    return {
        "flow": {"name": "random", "policy": {"failFast": fail_fast}},
        "nodes": node_list,
        "edges": edges,
    }


@st.composite
def foreach_flows(draw: st.DrawFn) -> dict[str, Any]:
    """A list, a foreach node with a random body (and maybe a loop), and a forEach edge."""
    items = draw(st.lists(st.integers(0, 5), max_size=4))
    size = draw(st.integers(1, 4))
    body = [f"b{i}" for i in range(size)]
    edges: list[dict[str, Any]] = []
    members: list[dict[str, Any]] = []
    for index, node_id in enumerate(body):
        predecessors = [p for p in body[:index] if draw(st.booleans())]
        edges += [{"from": p, "to": node_id} for p in predecessors]
        values: list[Any] = ["{{ item }}", draw(st.integers(0, 2))]
        values += [f"{{{{{p}.value | default:0}}}}" for p in predecessors]
        member: dict[str, Any] = {"id": node_id, "type": "math.add", "input": {"values": values}}
        guarded = bool(predecessors) and draw(st.booleans())
        if guarded:
            member["when"] = _condition(draw, f"{predecessors[0]}.value")
        if draw(st.integers(0, 4)) == 0:
            member["type"] = "control.fail"
            member["input"] = {"message": "{{ item }}"}
            member["policy"] = {"continueOnError": True}
        members.append(member)
    if draw(st.booleans()):  # a counter that loops until it reaches the item
        members.append(
            {
                "id": "count",
                "type": "math.add",
                "input": {"values": ["{{count.value | default:0}}", 1]},
            }
        )
        body.append("count")
        edges.append(
            {
                "from": "count",
                "to": "count",
                "type": "loop",
                "maxIterations": 6,
                "when": "count.value < item",
            }
        )
    container: dict[str, Any] = {"items": "{{ list.value }}", "body": body}
    concurrency = draw(st.sampled_from([None, 1, 2, 3]))
    if concurrency is not None:
        container["concurrency"] = concurrency
    return {
        "flow": {"name": "lists"},
        "nodes": [
            {"id": "list", "type": "constant", "input": {"value": items}},
            {"id": "each", "type": "control.foreach", "input": container},
            {"id": "after", "type": "math.add", "input": {"values": ["{{ x }}", 1]}},
            *members,
        ],
        "edges": [
            {"from": "list", "to": "each"},
            {"from": "each", "to": "after", "forEach": {"in": "{{ list.value }}", "as": "x"}},
            *edges,
        ],
    }


@PROPERTY
@given(flows())
def test_random_dags_agree(spec: dict[str, Any]) -> None:
    asyncio.run(run_both(spec, registry=nodes.registry())).assert_agree()


@PROPERTY
@given(flows(loop=True))
def test_random_flows_with_a_loop_edge_agree(spec: dict[str, Any]) -> None:
    asyncio.run(run_both(spec, registry=nodes.registry())).assert_agree()


@PROPERTY
@given(foreach_flows())
def test_random_foreach_bodies_agree(spec: dict[str, Any]) -> None:
    asyncio.run(run_both(spec, registry=nodes.registry())).assert_agree()


@given(st.lists(st.tuples(st.integers(0, 6), st.integers(0, 6)), max_size=14))
def test_an_edge_closes_a_cycle_when_its_target_leads_back_to_its_source(
    pairs: list[tuple[int, int]],
) -> None:
    named = [(f"n{a}", f"n{b}") for a, b in pairs]

    def reaches(start: str, goal: str, without: int) -> bool:
        seen, stack = {start}, [start]
        while stack:
            here = stack.pop()
            if here == goal:
                return True
            for i, (source, target) in enumerate(named):
                if i != without and source == here and target not in seen:
                    seen.add(target)
                    stack.append(target)
        return False

    closing = {i for i, (source, target) in enumerate(named) if reaches(target, source, i)}
    assert cycle_closers(named) == closing

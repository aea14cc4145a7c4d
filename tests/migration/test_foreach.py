"""control.foreach bodies and forEach edges: per item, in order or bounded in parallel."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from migration import (
    Flow,
    FlowLoopError,
    FlowRunError,
    FlowSpec,
    FlowSpecError,
    NodeContext,
    NodeRegistry,
    check,
    harness_to_reactive,
    run_edge_harness,
)
from migration._nodes.context import each_item
from reactor import ProviderRequest, ScriptedProvider, reactive
from tests.migration import nodes
from tests.migration.support import flow, node, run_both


class Gauge:
    """Node types that wait, and count how many of them run at once."""

    def __init__(self) -> None:
        self.running = 0
        self.most = 0

    async def slow(self, input: dict[str, Any], ctx: NodeContext) -> dict[str, Any]:
        self.running += 1
        self.most = max(self.most, self.running)
        await asyncio.sleep(input["ms"] / 1000)
        self.running -= 1
        ctx.set_state(f"seen.{input['item']}", sorted(ctx.state.get("seen", {})))
        return {"item": input["item"]}

    def registry(self) -> NodeRegistry:
        types = NodeRegistry()
        types.register("test.slow", self.slow)
        return types


def each(items: Any, body: list[str], **extra: Any) -> dict[str, Any]:
    return node("each", "control.foreach", input={"items": items, "body": body, **extra})


def slow(node_id: str = "work", **fields: Any) -> dict[str, Any]:
    return node(node_id, "test.slow", input={"item": "{{ item }}", "ms": "{{ 30 }}"}, **fields)


@pytest.mark.parametrize("concurrency", [None, 2], ids=["in-order", "two-at-once"])
async def test_the_body_runs_once_per_item_and_outputs_keep_item_order(
    concurrency: int | None,
) -> None:
    gauge = Gauge()
    extra = {"concurrency": concurrency} if concurrency else {}
    spec = flow(
        [each(["a", "b", "c"], ["work"], **extra), slow()],
        state={"initial": {"seen": {}}},
    )
    both = await run_both(spec, registry=gauge.registry())
    both.assert_agree()
    iterations = both.reactive["each"]["iterations"]
    assert [i["item"] for i in iterations] == ["a", "b", "c"]
    assert [i["outputs"]["work"] for i in iterations] == [{"item": x} for x in "abc"]
    seen = both.result.state["state"]["seen"]
    if concurrency is None:  # each item sees what the ones before it wrote
        assert gauge.most == 1
        assert seen == {"a": [], "b": ["a"], "c": ["a", "b"]}
    else:  # each starts from the state before the foreach; writes applied in item order
        assert gauge.most == 2
        assert seen == {"a": [], "b": [], "c": []}


async def test_a_loop_inside_the_body_runs_per_item_up_to_max_iterations() -> None:
    registry = NodeRegistry()
    registry.register("test.grow", lambda input: {"n": (input.get("n") or 0) + 1})
    spec = flow(
        [
            each([1, 2, 3], ["grow", "enough"]),
            node("grow", "test.grow", input={"n": "{{?grow.n}}"}),
            node("enough", "constant", input={"value": "{{ grow.n >= item }}"}),
        ],
        [
            ("grow", "enough"),
            {
                "from": "enough",
                "to": "grow",
                "type": "loop",
                "maxIterations": 2,
                "when": "$not(enough.value)",
            },
        ],
    )
    both = await run_both(spec, registry=registry)
    both.assert_agree()
    assert [i["outputs"]["grow"]["n"] for i in both.reactive["each"]["iterations"]] == [1, 2, 3]
    too_far = {**spec, "nodes": [each([4], ["grow", "enough"]), *spec["nodes"][1:]]}
    with pytest.raises(FlowRunError) as info:
        await run_edge_harness(too_far, registry=registry)
    assert isinstance(info.value.__cause__, FlowLoopError)
    assert str(info.value).startswith(
        "Node 'each' (control.foreach) failed after 1 attempt: FlowLoopError: Loop edge "
        "enough->grow still wants to re-run 'grow' after maxIterations=2 iterations."
    )


async def test_a_failure_in_the_body_can_be_tolerated() -> None:
    spec = flow(
        [
            each([1, 2], ["check", "after"]),
            node(
                "check",
                "control.fail",
                input={"message": "item {{ item }}"},
                when="item = 2",
                policy={"continueOnError": True},
            ),
            node("after", input={"text": "after {{ item }}"}),
        ],
        [("check", "after")],
    )
    both = await run_both(spec)
    both.assert_agree()
    first, second = both.reactive["each"]["iterations"]
    assert first["outputs"]["check"] == {"skipped": True, "reason": "when"}
    assert second["outputs"]["check"]["error"] == {"message": "item 2"}
    assert second["outputs"]["after"] == {"text": "after 2"}


async def test_bodies_nest() -> None:
    spec = flow(
        [
            node(
                "rows",
                "control.foreach",
                input={"items": [[1, 2], [3]], "as": "row", "body": ["cells"]},
            ),
            node(
                "cells",
                "control.foreach",
                input={"items": "{{ row }}", "as": "cell", "body": ["show"]},
            ),
            node("show", input={"text": "{{ cell }} of {{ row }}"}),
        ]
    )
    both = await run_both(spec)
    both.assert_agree()
    rows = both.reactive["rows"]["iterations"]
    texts = [
        [c["outputs"]["show"]["text"] for c in r["outputs"]["cells"]["iterations"]] for r in rows
    ]
    assert texts == [["1 of [1,2]", "2 of [1,2]"], ["3 of [3]"]]


async def test_a_foreach_edge_runs_its_target_per_item_with_its_policy() -> None:
    registry = NodeRegistry()
    registry.register(
        "test.flaky",
        lambda input, ctx: (
            {"item": input["item"], "attempt": ctx.attempt}
            if ctx.attempt > 1 or input["item"] != "b"
            else (_ for _ in ()).throw(ConnectionError("reset"))
        ),
    )
    spec = flow(
        [
            node("list", "constant", input={"value": ["a", "b"]}),
            node(
                "call",
                "test.flaky",
                input={"item": "{{ x }}"},
                policy={"retry": {"maxAttempts": 2}},
            ),
        ],
        [{"from": "list", "to": "call", "forEach": {"in": "{{ list.value }}", "as": "x"}}],
    )
    both = await run_both(spec, registry=registry)
    both.assert_agree()
    assert both.reactive["call"] == {
        "iterations": [
            {"item": "a", "output": {"item": "a", "attempt": 1}},
            {"item": "b", "output": {"item": "b", "attempt": 2}},
        ]
    }


async def test_a_foreach_edge_needs_a_list() -> None:
    spec = flow(
        [node("one", "constant", input={"value": 3}), node("t", input={"text": "{{ item }}"})],
        [{"from": "one", "to": "t", "forEach": {"in": "{{ one.value }}"}}],
        policy={"failFast": False},
    )
    both = await run_both(spec)
    both.assert_agree()
    assert both.reactive["t"]["error"]["message"] == (
        "Node 't': its forEach in gives 3, not a list; bind it to a list, as in in: "
        '"{{ plan.tasks }}".'
    )


async def test_items_that_are_not_a_list_fail_the_foreach_node() -> None:
    both = await run_both(
        flow([each("{{ flow.input }}", ["a"]), node("a")], policy={"failFast": False})
    )
    both.assert_agree()
    assert both.reactive["each"]["error"]["message"] == (
        "A control.foreach node needs input.items as a list, got {}; bind it to one, as in "
        'items: "{{ plan.tasks }}".'
    )


async def test_body_llm_calls_stream_through_the_run_by_node_id() -> None:
    spec = flow(
        [
            each(["x", "y"], ["ask"], concurrency=2),
            node("ask", "claude.agent", input={"prompt": "say {{ item }}"}),
        ]
    )
    result = await check(spec, provider=lambda: ScriptedProvider(default=lambda r: r.prompt))
    assert result.agrees, result.report()
    both = await run_both(spec, provider=lambda: ScriptedProvider(default=lambda r: r.prompt))
    starts = [s.payload["agent"] for s in both.result.signals if s.name == "provider:start"]
    assert starts == ["ask", "ask"]
    assert both.result.metrics.activations_by_agent == {"flow": 1, "each": 1}


@pytest.mark.parametrize(
    ("nodes", "edges", "problem"),
    [
        pytest.param(
            [each([], [])],
            [],
            "Node 'each' (control.foreach): input.body must list the ids of the nodes to run "
            "per item, e.g. body: [draft, review]; got [].",
            id="empty-body",
        ),
        pytest.param(
            [each([], ["each", "ghost"])],
            [],
            "Node 'each' (control.foreach): its body lists the node itself; a foreach node "
            "cannot run itself.",
            id="itself",
        ),
        pytest.param(
            [node("each", "control.foreach", input={"body": ["a"]}), node("a")],
            [],
            "Node 'each' (control.foreach): input.items is missing: the list to run the body "
            'for, e.g. items: "{{ plan.tasks }}".',
            id="no-items",
        ),
        pytest.param(
            [each([], ["a"], concurrency=0), node("a")],
            [],
            "Node 'each' (control.foreach): input.concurrency must be a whole number >= 1, got 0.",
            id="concurrency",
        ),
        pytest.param(
            [each([], ["a"], **{"as": "a"}), node("a")],
            [],
            "Node 'each' (control.foreach): as: 'a' is also a node id or reserved name; pick "
            "another one.",
            id="as-clash",
        ),
        pytest.param(
            [each([], ["a"]), node("a"), node("b")],
            [("b", "a")],
            "Edge b->a joins 'b' (the top level) and 'a' (the body of 'each'); edges join "
            "nodes of the same foreach body (or two top-level nodes). Move the edge, or the "
            "node into the body.",
            id="crossing-edge",
        ),
        pytest.param(
            [
                each([], ["a"]),
                node("other", "control.foreach", input={"items": [], "body": ["a"]}),
                node("a"),
            ],
            [],
            "Node 'other' (control.foreach): its body takes 'a', already in the body of 'each'.",
            id="two-bodies",
        ),
        pytest.param(
            [
                node("p", "control.foreach", input={"items": [], "body": ["q"]}),
                node("q", "control.foreach", input={"items": [], "body": ["p"]}),
            ],
            [],
            "Node 'p': foreach bodies nest more than 8 deep, or contain each other ('p' in 'q' "
            "in 'p' in 'q', ...); untangle the body: lists.",
            id="bodies-in-each-other",
        ),
        pytest.param(
            [node("a"), node("b"), node("c")],
            [
                {"from": "a", "to": "c", "forEach": {"in": []}},
                {"from": "b", "to": "c", "forEach": {"in": []}},
            ],
            "Edge b->c: 'c' already runs per item of edge a->c; a node takes one forEach edge.",
            id="two-foreach-edges",
        ),
        pytest.param(
            [node("a"), node("b")],
            [
                ("a", "b"),
                {"from": "b", "to": "a", "type": "loop", "maxIterations": 1, "forEach": {"in": []}},
            ],
            "Edge b->a: forEach goes on forward edges, not loop edges.",
            id="foreach-loop-edge",
        ),
    ],
)
def test_bodies_and_foreach_edges_are_checked_at_load(
    nodes: list[dict[str, Any]], edges: list[Any], problem: str
) -> None:
    with pytest.raises(FlowSpecError) as info:
        FlowSpec.load(flow(nodes, edges))
    assert problem in info.value.problems


async def test_a_flow_by_hand_gives_body_nodes_a_step_and_no_agent() -> None:
    hand = Flow(nodes=["each", "shout"], bodies={"each": ["shout"]})
    with pytest.raises(
        FlowSpecError,
        match=r"^Node 'shout' is in the body of foreach node 'each', which runs it once per "
        r"item; give it a step \(flow\.step\('shout', \.\.\.\)\) but no agent\.$",
    ):
        hand.agent("shout", "echo")
    hand.step("shout", lambda input: {"text": input["text"].upper()}, input={"text": "{{ item }}"})
    graph = reactive(
        {
            "each": hand.agent(
                "each", "control.foreach", input={"items": ["a", "b"], "body": ["shout"]}
            )
        },
        state=hand.state,
    )
    result = await graph.run()
    assert [i["outputs"]["shout"] for i in result.state["outputs"]["each"]["iterations"]] == [
        {"text": "A"},
        {"text": "B"},
    ]


async def test_a_failed_item_leaves_the_caller_able_to_go_on() -> None:
    async def fail(item: Any, state: Any) -> Any:
        if item != 1:
            await asyncio.Event().wait()  # only item 1 finishes, by failing
        raise ValueError(f"item {item}")

    with pytest.raises(ValueError, match=r"^item 1$"):
        await each_item([2, 1, 3], fail, state={}, concurrency=2)
    task = asyncio.current_task()
    assert task is not None
    assert task.cancelling() == 0
    await asyncio.sleep(0)  # not cancelled


def test_reads_from_a_body_are_ordered_against_its_foreach_node() -> None:
    spec = FlowSpec.load(
        flow(
            [
                node("a"),
                node("b"),
                each([1], ["x", "y"]),
                node("x", input={"text": "{{ a.text }} {{ b.text }}"}),
                node("y", input={"text": "{{ x.text }}"}),
                node("t", input={"text": "{{ item }}"}),
            ],
            [
                ("a", "each"),
                ("x", "y"),
                {"from": "a", "to": "t", "forEach": {"in": "{{ b.list }}"}},
            ],
        )
    )
    assert spec.order_warnings() == [
        "Node 'x' reads 'b', which is not upstream of its foreach node 'each': the reactive "
        "graph may run them in either order. Add an edge b->each if 'x' needs that output.",
        "Node 't' reads 'b', which is not upstream of it: the reactive graph may run them in "
        "either order. Add an edge b->t if 't' needs that output.",
    ]


async def test_a_loop_edge_can_re_run_a_whole_foreach() -> None:
    registry = NodeRegistry()
    registry.register("test.more", lambda input: {"items": [*(input.get("items") or []), 1]})
    registry.register("test.count", lambda input: {"n": len(input["items"])})
    spec = flow(
        [
            node("grow", "test.more", input={"items": "{{?grow.items}}"}),
            each("{{ grow.items }}", ["one"]),
            node("one", input={"text": "item {{ item }}"}),
            node("count", "test.count", input={"items": "{{ each.iterations }}"}),
        ],
        [
            ("grow", "each"),
            ("each", "count"),
            {
                "from": "count",
                "to": "grow",
                "type": "loop",
                "maxIterations": 2,
                "when": "count.n < 3",
            },
        ],
    )
    both = await run_both(spec, registry=registry)
    both.assert_agree()
    assert both.reactive["count"] == {"n": 3}


def team_provider() -> tuple[ScriptedProvider, list[str]]:
    """Two tasks; the reviewer fails the first task's first attempt, with two issues."""
    prompts: list[str] = []

    def code(request: ProviderRequest) -> str:
        prompts.append(request.prompt)
        return "v2" if "Fix what the review found" in request.prompt else "v1"

    def review(request: ProviderRequest) -> dict[str, Any]:
        passed = "parse" not in request.prompt or "v2" in request.prompt
        issues = [] if passed else ["no tests", "a typo"]
        return {"passed": passed, "feedback": "ok" if passed else "fix it", "issues": issues}

    plan = {"tasks": [{"title": "parse dates"}, {"title": "show dates"}]}
    provider = ScriptedProvider({"planner": [plan], "coder": code, "reviewer": review})
    return provider, prompts


async def test_the_team_flow_runs_each_task_through_coder_and_reviewer_as_meant() -> None:
    verdict = await check(nodes.DIALECT / "agent-loop.yaml", provider=lambda: team_provider()[0])
    assert verdict.passed, verdict.report()
    provider, prompts = team_provider()
    result = await harness_to_reactive(nodes.DIALECT / "agent-loop.yaml").run(provider=provider)
    assert result.status == "completed", result.error
    outputs = result.state["outputs"]
    coder = [(i["item"]["title"], i["output"]["text"]) for i in outputs["coder"]["iterations"]]
    assert coder == [("parse dates", "v2"), ("show dates", "v1")]
    reviews = outputs["reviewer"]["iterations"]
    assert [i["output"]["structuredOutput"]["passed"] for i in reviews] == [True, True]
    assert outputs["summary"] == {"text": "passed: [true,true]"}  # the join ran once, after
    first, fixed, other = prompts
    assert "This is the first iteration. No previous feedback." in first
    assert "Fix what the review found:\n\n- no tests\n\n- a typo\n" in fixed
    assert "Current task: show dates\n\nThis is the first iteration." in other  # a new task


async def test_everything_downstream_of_a_foreach_edge_up_to_the_join_repeats_per_item() -> None:
    spec = flow(
        [
            node("list", "constant", input={"value": ["a", "b"]}),
            node("first", input={"text": "1{{ x }}"}),
            node("second", input={"text": "{{ first.text }}2"}),
            node("third", input={"text": "{{ second.text }}3"}),
            node("join", input={"text": "all: {{ third.iterations.output.text }}"}),
        ],
        [
            {"from": "list", "to": "first", "forEach": {"in": "{{ list.value }}", "as": "x"}},
            ("first", "second"),
            ("second", "third"),
            ("third", "join"),
            ("list", "join"),
        ],
    )
    both = await run_both(spec)
    both.assert_agree()
    assert both.reactive["third"] == {
        "iterations": [
            {"item": "a", "output": {"text": "1a23"}},
            {"item": "b", "output": {"text": "1b23"}},
        ]
    }
    assert both.reactive["join"] == {"text": 'all: ["1a23","1b23"]'}
    assert FlowSpec.load(spec).scopes.parts == {"first": ("first", "second", "third")}


async def test_a_failure_in_the_repeated_part_stops_the_flow_naming_its_node() -> None:
    spec = flow(
        [
            node("list", "constant", input={"value": ["a", "b"]}),
            node("first", input={"text": "{{ x }}"}),
            node("second", "control.fail", input={"message": "no {{ first.text }}"}),
        ],
        [
            {"from": "list", "to": "first", "forEach": {"in": "{{ list.value }}", "as": "x"}},
            ("first", "second"),
        ],
    )
    both = await run_both(spec)
    both.assert_agree()
    error = both.result.error
    assert isinstance(error, FlowRunError)
    assert error.node == "second"
    assert str(error).startswith("Node 'second' (control.fail) failed after 1 attempt: ")
    assert both.reactive["second"]["error"]["message"] == "no a"


def test_an_edge_into_the_middle_of_a_repeated_part_is_refused() -> None:
    spec = flow(
        [node("list", "constant", input={"value": []}), node("a"), node("b"), node("c")],
        [
            {"from": "list", "to": "a", "forEach": {"in": "{{ list.value }}"}},
            ("a", "b"),
            ("list", "c"),
            {"from": "c", "to": "b", "type": "loop", "maxIterations": 1},
        ],
    )
    with pytest.raises(FlowSpecError) as info:
        FlowSpec.load(spec)
    assert str(info.value) == (
        "Edge c->b: 'b' runs once per item, in the part of the flow that forEach edge list->a "
        "repeats; an edge from outside that part enters it at 'a' only (which re-runs it all). "
        "Point the edge at 'a', or start it inside the part."
    )

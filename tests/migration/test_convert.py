"""harness_to_reactive() against run_edge_harness(): same outputs, markers and failures."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from migration import (
    BindingError,
    FlowFailError,
    FlowLoopError,
    FlowRunError,
    FlowSpec,
    NodeRegistry,
    NodeTimeoutError,
    UnknownNodeTypeError,
    harness_to_reactive,
)
from reactor import ScriptedProvider, agent
from tests.migration import nodes
from tests.migration.support import flow, node, run_both

SKIPPED_WHEN = {"skipped": True, "reason": "when"}
SKIPPED_EDGES = {"skipped": True, "reason": "edges"}


@pytest.mark.parametrize("path", sorted(nodes.FLOWS.glob("*.yaml")), ids=lambda p: p.stem)
async def test_every_fixture_flow_gives_the_same_outputs(path: Path) -> None:
    both = await run_both(path, registry=nodes.registry())
    both.assert_agree()
    assert both.result.status == "completed"
    assert set(both.reactive) == {node.id for node in FlowSpec.load(path).nodes}


async def test_the_health_check_fixture_records_retries_timeouts_and_skips() -> None:
    both = await run_both(nodes.FLOWS / "05-flow-when-policy.yaml", registry=nodes.registry())
    both.assert_agree()
    outputs = both.reactive
    assert outputs["ping_auth"] == {"label": "auth-service", "ok": True, "attempts": 2}
    assert outputs["ping_payments"] == {
        "failed": True,
        "error": {"message": "Node 'ping_payments' timed out after 10 ms (attempt 1)."},
        "attempts": 1,
    }
    assert outputs["ping_legacy"] == SKIPPED_WHEN
    assert outputs["health_report"]["text"].startswith(
        "Health Check Complete | Auth: OK (retry worked) | Payments: true (timeout expected)"
    )


def diamond(registry: NodeRegistry, calls: list[str]) -> dict[str, Any]:
    """a fans out to b and c, which meet each other mid-way; d joins them."""
    started = {"b": asyncio.Event(), "c": asyncio.Event()}

    async def meet(input: dict[str, Any]) -> dict[str, Any]:
        me, other = input["me"], input["other"]
        started[me].set()
        await asyncio.wait_for(started[other].wait(), timeout=5)
        return {"met": other}

    def join(input: dict[str, Any]) -> dict[str, Any]:
        calls.append("d")
        return {"seen": [input["b"], input["c"]]}

    registry.register("test.meet", meet)
    registry.register("test.join", join)
    return flow(
        [
            node("a"),
            node("b", "test.meet", input={"me": "b", "other": "c"}),
            node("c", "test.meet", input={"me": "c", "other": "b"}),
            node("d", "test.join", input={"b": "{{b.met}}", "c": "{{c.met}}"}),
        ],
        [("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")],
    )


async def test_independent_branches_overlap_and_the_join_runs_once() -> None:
    registry, calls = NodeRegistry(), list[str]()
    # b waits until c has started and c until b has: only concurrent branches finish.
    result = await harness_to_reactive(diamond(registry, calls), registry=registry).run()
    assert result.status == "completed", result.error
    assert result.state["outputs"]["b"] == {"met": "c"}
    assert result.state["outputs"]["d"] == {"seen": ["c", "b"]}
    assert calls == ["d"]
    assert result.metrics.activations_by_agent == {"flow": 1, "a": 1, "b": 1, "c": 1, "d": 1}
    skipped = [s.payload["reason"] for s in result.signals if s.name == "agent:d:skipped"]
    assert skipped == ["guard"]  # b's completion found c still unresolved


async def test_the_edge_based_executor_runs_one_node_at_a_time() -> None:
    registry = nodes.registry()
    spec = diamond(registry, [])
    spec["nodes"][1]["policy"] = {"timeoutMs": 50, "continueOnError": True}
    spec["nodes"][2]["policy"] = {"timeoutMs": 50, "continueOnError": True}
    both = await run_both(spec, registry=registry)
    assert both.edge["b"]["failed"] is True  # nobody else was running while b waited
    assert both.reactive["b"] == {"met": "c"}


async def test_a_join_of_many_predecessors_finishing_together_runs_once() -> None:
    calls: list[int] = []
    registry = NodeRegistry()

    def count(input: Any) -> dict[str, bool]:
        calls.append(1)
        return {"joined": True}

    registry.register("test.count", count)
    branches = [f"b{i}" for i in range(12)]
    spec = flow(
        [
            node("a"),
            *(node(b, "control.wait", input={"ms": 5}) for b in branches),
            node("join", "test.count"),
        ],
        [*(("a", b) for b in branches), *((b, "join") for b in branches)],
    )
    both = await run_both(spec, registry=registry)
    both.assert_agree()
    assert calls == [1, 1]  # once per executor
    assert both.result.metrics.activations_by_agent["join"] == 1


async def test_when_all_incoming_edges_are_skipped_the_node_is_skipped() -> None:
    never = {"equals": {"var": "flow.input.go", "value": True}}
    spec = flow(
        [node("a"), node("b"), node("c"), node("d")],
        [
            {"from": "a", "to": "c", "when": never},
            {"from": "b", "to": "c", "when": never},
            {"from": "c", "to": "d"},
        ],
        input={"go": False},
    )
    both = await run_both(spec)
    both.assert_agree()
    assert both.reactive["c"] == SKIPPED_EDGES
    # As in the edge-based format, a skipped node's edges are still evaluated.
    assert both.reactive["d"] == {"text": "d"}


async def test_edge_when_routes_on_the_source_output() -> None:
    route = {"equals": {"var": "pick.route", "value": "bug"}}
    spec = flow(
        [
            node(
                "pick",
                "control.switch",
                input={
                    "value": "{{flow.input.kind}}",
                    "cases": [
                        {
                            "when": {"equals": {"var": "flow.input.kind", "value": "bug"}},
                            "route": "bug",
                        }
                    ],
                },
            ),
            node("bug"),
            node("other"),
        ],
        [
            {"from": "pick", "to": "bug", "when": route},
            {"from": "pick", "to": "other", "when": {"not": route}},
        ],
        input={"kind": "bug"},
    )
    both = await run_both(spec)
    both.assert_agree()
    assert both.reactive == {
        "pick": {"route": "bug", "value": "bug"},
        "bug": {"text": "bug"},
        "other": SKIPPED_EDGES,
    }
    other = await run_both(spec, input={"kind": "question"})
    other.assert_agree()
    assert other.reactive["bug"] == SKIPPED_EDGES
    assert other.reactive["other"] == {"text": "other"}


async def test_a_node_when_false_records_a_skip_marker_and_downstream_resolves() -> None:
    spec = flow(
        [
            node("check", "condition.equals", input={"left": "{{flow.input.n}}", "right": 1}),
            node("maybe", when={"equals": {"var": "check.value", "value": True}}),
            node("after", input={"text": "skipped: {{maybe.skipped | default:false}}"}),
        ],
        [("check", "maybe"), ("maybe", "after")],
        input={"n": 2},
    )
    both = await run_both(spec)
    both.assert_agree()
    assert both.reactive["maybe"] == SKIPPED_WHEN
    assert both.reactive["after"] == {"text": "skipped: true"}


async def test_continue_on_error_records_the_failure_and_goes_on() -> None:
    spec = flow(
        [
            node(
                "boom",
                "control.fail",
                input={"message": "no disk"},
                policy={"continueOnError": True, "retry": {"maxAttempts": 2}},
            ),
            node("next", input={"text": "{{boom.error.message}}"}),
        ],
        [("boom", "next")],
    )
    both = await run_both(spec)
    both.assert_agree()
    assert both.reactive == {
        "boom": {"failed": True, "error": {"message": "no disk"}, "attempts": 2},
        "next": {"text": "no disk"},
    }


async def test_fail_fast_stops_the_run_at_the_failing_node() -> None:
    spec = flow(
        [node("a"), node("boom", "control.fail", input={"message": "no disk"}), node("never")],
        [("a", "boom"), ("boom", "never")],
    )
    both = await run_both(spec)
    both.assert_agree()
    error = both.edge_error
    assert isinstance(error, FlowRunError)
    assert str(error) == (
        "Node 'boom' (control.fail) failed after 1 attempt: FlowFailError: no disk. The flow "
        "stopped (policy.failFast); set policy.continueOnError on the node, or failFast: false "
        "on the flow, to record the failure and go on."
    )
    assert isinstance(error.__cause__, FlowFailError)
    assert error.node == "boom"
    marker = {"failed": True, "error": {"message": "no disk"}, "attempts": 1}
    assert error.outputs == {"a": {"text": "a"}, "boom": marker}
    assert both.result.status == "failed"
    assert both.reactive == error.outputs
    assert str(both.result.error) == str(error)


async def test_fail_fast_false_records_failures_and_continues() -> None:
    spec = flow(
        [node("boom", "control.fail", input={"message": "no disk"}), node("next")],
        [("boom", "next")],
        policy={"failFast": False},
    )
    both = await run_both(spec)
    both.assert_agree()
    assert both.reactive["boom"]["failed"] is True
    assert both.reactive["next"] == {"text": "next"}
    assert both.result.status == "completed"


async def test_retry_then_success_counts_attempts() -> None:
    spec = flow(
        [
            node(
                "try",
                "test.fails_until",
                input={"succeed_on": 3},
                policy={"retry": {"maxAttempts": 3, "backoffMs": 1}},
            )
        ],
    )
    both = await run_both(spec, registry=nodes.registry())
    both.assert_agree()
    assert both.reactive == {"try": {"attempt": 3}}


async def test_retries_run_out() -> None:
    spec = flow(
        [
            node(
                "try",
                "test.fails_until",
                input={"succeed_on": 0},
                policy={"retry": {"maxAttempts": 2}, "continueOnError": True},
            )
        ],
    )
    both = await run_both(spec, registry=nodes.registry())
    both.assert_agree()
    assert both.reactive == {
        "try": {"failed": True, "error": {"message": "attempt 2 failed"}, "attempts": 2}
    }


async def test_a_timeout_cancels_the_attempt() -> None:
    spec = flow(
        [node("slow", "control.wait", input={"ms": 10_000}, policy={"timeoutMs": 20})],
    )
    both = await run_both(spec)
    both.assert_agree()
    assert isinstance(both.edge_error, FlowRunError)
    assert isinstance(both.edge_error.__cause__, NodeTimeoutError)
    assert both.reactive["slow"]["error"] == {
        "message": "Node 'slow' timed out after 20 ms (attempt 1)."
    }
    assert both.result.metrics.duration_ms < 5_000


def counter_loop(max_iterations: int, until: int = 3) -> dict[str, Any]:
    """inc adds one to its own last value until check sees `until`; a loop edge re-runs inc."""
    return flow(
        [
            node("start"),
            node("inc", "math.add", input={"values": ["{{inc.value | default:0}}", 1]}),
            node("check", "condition.equals", input={"left": "{{inc.value}}", "right": until}),
            node("side", input={"text": "saw {{inc.value}}"}),
            node("done", input={"text": "reached {{inc.value}}"}),
        ],
        [
            ("start", "inc"),
            ("inc", "check"),
            ("inc", "side"),
            {
                "from": "check",
                "to": "done",
                "when": {"equals": {"var": "check.value", "value": True}},
            },
            {
                "from": "check",
                "to": "inc",
                "type": "loop",
                "maxIterations": max_iterations,
                "when": {"equals": {"var": "check.value", "value": False}},
            },
        ],
    )


async def test_a_loop_edge_re_runs_its_body_until_it_converges() -> None:
    both = await run_both(counter_loop(max_iterations=5), registry=nodes.registry())
    both.assert_agree()
    assert both.reactive == {
        "start": {"text": "start"},
        "inc": {"value": 3},
        "check": {"value": True},
        "side": {"text": "saw 3"},
        "done": {"text": "reached 3"},
    }
    ledger = both.result.state["flow"]
    assert ledger["loops"] == {"check->inc": 2}
    assert both.result.metrics.activations_by_agent == {
        "flow": 1,
        "start": 1,
        "inc": 3,
        "check": 3,
        "side": 3,
        "done": 3,
    }


async def test_a_loop_that_exceeds_max_iterations_fails_clearly() -> None:
    both = await run_both(counter_loop(max_iterations=1), registry=nodes.registry())
    both.assert_agree()
    error = both.edge_error
    assert isinstance(error, FlowLoopError)
    assert str(error) == (
        "Loop edge check->inc still wants to re-run 'inc' after maxIterations=1 iterations. "
        "Make its when false once the work is done, or raise maxIterations."
    )
    assert (error.node, error.edge, error.max_iterations) == ("check", "check->inc", 1)
    assert error.outputs["inc"] == {"value": 2}
    assert both.result.status == "failed"


async def test_a_self_loop_and_a_loop_from_outside_the_body() -> None:
    spec = flow(
        [
            node("tick", "math.add", input={"values": ["{{tick.value | default:0}}", 1]}),
            node("watch", "math.add", input={"values": ["{{watch.value | default:0}}", 10]}),
            node("end", input={"text": "{{tick.value}}/{{watch.value}}"}),
        ],
        [
            {
                "from": "tick",
                "to": "tick",
                "type": "loop",
                "maxIterations": 3,
                "when": {"not": {"equals": {"var": "tick.value", "value": 3}}},
            },
            ("tick", "end"),
            ("watch", "end"),
        ],
    )
    both = await run_both(spec, registry=nodes.registry())
    both.assert_agree()
    assert both.reactive["end"] == {"text": "3/10"}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("{{flow.input.name}}", "Ada", id="strict"),
        pytest.param("[{{?flow.input.nick}}]", "[]", id="optional"),
        pytest.param('{{flow.input.nick | default:"anon"}}', "anon", id="default"),
    ],
)
async def test_bindings_resolve_the_same_in_both(text: str, expected: str) -> None:
    both = await run_both(flow([node("greet", input={"text": text})], input={"name": "Ada"}))
    both.assert_agree()
    assert both.reactive == {"greet": {"text": expected}}


async def test_a_missing_strict_binding_fails_the_node() -> None:
    both = await run_both(flow([node("greet", input={"text": "{{flow.input.nick}}"})]))
    both.assert_agree()
    assert isinstance(both.edge_error, FlowRunError)
    assert isinstance(both.edge_error.__cause__, BindingError)


async def test_llm_nodes_are_scripted_by_node_id_in_both_executors() -> None:
    spec = flow(
        [
            node(
                "ask",
                "claude.agent",
                input={"prompt": "Summarize {{flow.input.topic}}"},
                config={"system": "Be brief."},
            ),
            node(
                "extract",
                "anthropic.text",
                input={"prompt": "Facts from: {{ask.text}}"},
                config={"schema": {"type": "object", "properties": {"n": {"type": "integer"}}}},
            ),
        ],
        [("ask", "extract")],
        input={"topic": "bees"},
    )
    providers: list[ScriptedProvider] = []

    def scripted() -> ScriptedProvider:
        providers.append(ScriptedProvider({"ask": ["Bees make honey."], "extract": [{"n": 1}]}))
        return providers[-1]

    both = await run_both(spec, provider=scripted)
    both.assert_agree()
    assert both.reactive["ask"]["text"] == "Bees make honey."
    assert both.reactive["extract"]["structured_output"] == {"n": 1}
    assert both.reactive["extract"]["structuredOutput"] == {"n": 1}
    assert set(both.reactive["extract"]) == {
        "text",
        "structuredOutput",
        "structured_output",
        "usage",
    }
    edge_requests, reactive_requests = (p.requests for p in providers)
    assert [r.agent for r in reactive_requests] == ["ask", "extract"]
    assert [r.request_hash for r in reactive_requests] == [r.request_hash for r in edge_requests]
    assert reactive_requests[0].system == "Be brief."
    assert reactive_requests[1].prompt == "Facts from: Bees make honey."


async def test_an_llm_node_without_a_provider_says_how_to_give_one() -> None:
    spec = flow([node("ask", "claude.agent", input={"prompt": "hi"})])
    result = await harness_to_reactive(spec).run()
    assert result.status == "failed"
    assert "has no provider to run its prompt on" in str(result.error.__cause__)  # type: ignore[union-attr]


async def test_the_provider_given_at_conversion_is_the_default() -> None:
    spec = flow([node("ask", "claude.agent", input={"prompt": "hi"})])
    graph = harness_to_reactive(spec, provider=ScriptedProvider({"ask": ["hello"]}))
    result = await graph.run()
    assert result.state["outputs"]["ask"]["text"] == "hello"


class Verdict(BaseModel):
    ok: bool


async def test_a_python_edge_based_definition_agrees() -> None:
    def draft(ctx: Any) -> str:
        return f"draft for {ctx.input['topic']}"

    async def publish(ctx: Any) -> dict[str, Any]:
        return {
            "published": ctx.state["outputs"]["draft"],
            "ok": ctx.state["outputs"]["review"]["ok"],
        }

    definition = {
        "name": "review",
        "agents": {
            "draft": agent(run=draft),
            "review": agent(prompt="Review: {{ state.outputs.draft }}", output=Verdict),
            "shout": agent(run=lambda ctx: "!!", when=lambda ctx: ctx.input.get("loud", False)),
            "publish": agent(run=publish),
        },
        "edges": [("draft", "review"), ("review", "publish"), ("draft", "shout")],
        "input": {"topic": "bees"},
    }
    both = await run_both(
        definition, provider=lambda: ScriptedProvider({"review": [Verdict(ok=True)]})
    )
    both.assert_agree()
    assert both.reactive == {
        "draft": "draft for bees",
        "review": {"ok": True},
        "shout": SKIPPED_WHEN,
        "publish": {"published": "draft for bees", "ok": True},
    }


async def test_unknown_node_types_are_reported_before_running() -> None:
    spec = flow([node("a", "http.get"), node("b", "http.get"), node("c", "db.write")])
    with pytest.raises(UnknownNodeTypeError) as info:
        harness_to_reactive(spec)
    assert str(info.value).startswith(
        "Unknown node types: 'http.get' (nodes 'a', 'b'); 'db.write' (node 'c'). Known types: "
        "anthropic.text, claude.agent, condition.equals, constant, control.fail, "
        "control.foreach, control.if, "
    )
    assert info.value.type == "http.get"
    assert info.value.node == "a"


async def test_outputs_change_through_the_store_with_the_node_path() -> None:
    result = await harness_to_reactive(nodes.FLOWS / "02-flow-edges.yaml").run()
    changes = [s.payload for s in result.signals if s.name == "state:outputs:changed"]
    assert [c["paths"] for c in changes] == [["outputs.start"], ["outputs.middle"], ["outputs.end"]]
    assert {c["actor"] for c in changes} == {"agent:start", "agent:middle", "agent:end"}
    done = [s for s in result.signals if s.name.startswith("node:")]
    assert [(s.name, s.payload) for s in done] == [
        ("node:start:done", {"text": "Start"}),
        ("node:middle:done", {"text": "Middle"}),
        ("node:end:done", {"text": "End"}),
    ]


async def test_aborting_a_run_cancels_a_waiting_node() -> None:
    graph = harness_to_reactive(flow([node("wait", "control.wait", input={"ms": 60_000})]))
    handle = graph.start()
    await asyncio.sleep(0.05)
    handle.abort()
    result = await handle.result()
    assert result.status == "aborted"
    assert result.state["outputs"] == {}


async def test_a_migrated_flow_shows_as_a_phase_and_each_node_as_a_task() -> None:
    spec = flow(
        [node("fetch"), node("left"), node("right"), node("join")],
        [("fetch", "left"), ("fetch", "right"), ("left", "join"), ("right", "join")],
    )
    result = await harness_to_reactive(spec).run()
    assert result.status == "completed"
    tree = result.event_tree()
    (phase,) = [n for n in _descendants(tree, tree.root.id) if n.kind == "phase"]
    assert (phase.name, phase.status) == ("Run Flow", "completed")
    assert [a.name for a in tree.get_ancestors(phase.id)][-1] == "flow"  # the flow's agent
    tasks = {
        event.name: [a.name for a in tree.get_ancestors(event.id)]
        for event in _descendants(tree, phase.id)
        if event.kind == "task"
    }
    assert sorted(tasks) == ["node:fetch", "node:join", "node:left", "node:right"]
    for name, ancestors in tasks.items():
        assert "Run Flow" in ancestors, name
        assert ancestors[-1] == name.removeprefix("node:"), ancestors  # under its activation
    (ended,) = result.select("phase:complete")
    last_task = max(s.seq for s in result.select("task:complete"))
    assert ended.seq > last_task  # the phase ends once every node has resolved


def _descendants(tree: Any, node_id: str) -> list[Any]:
    found, stack = [], list(tree.get_children(node_id))
    while stack:
        child = stack.pop()
        found.append(child)
        stack.extend(tree.get_children(child.id))
    return found

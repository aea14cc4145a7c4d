from __future__ import annotations

import hashlib
import importlib
import re
import warnings
from pathlib import Path

import pytest
from pydantic import BaseModel

from reactor import (
    AgentConfigError,
    CycleWarning,
    GraphValidationError,
    MemorySignalStore,
    agent,
    reactive,
    run_reactive,
)


class State(BaseModel):
    analysis: str | None = None
    decision: str | None = None


def test_every_problem_is_reported_at_once_with_hints() -> None:
    with pytest.raises(GraphValidationError) as info:
        reactive(
            {
                "analyst": agent(
                    run=lambda ctx: 1, emits=["analysis:complete"], updates="analysys"
                ),
                "trader": agent(run=lambda ctx: 1, activate_on="analysis:completed"),
                "listener": agent(run=lambda ctx: 1, activate_on="user:message"),
            },
            state=State,
            name="bot",
        )
    error = info.value
    assert error.graph == "bot"
    assert error.problems == (
        "Agent 'analyst' updates 'analysys', which State does not have (keys: analysis, decision). "
        "Hint: did you mean 'analysis'? add the field to the state model, or change updates=.",
        "Agent 'trader' activates on 'analysis:completed', which nothing in the graph emits. "
        "Hint: did you mean 'analysis:complete' (emitted by analyst)? declare it in the emitting "
        "agent's emits=[...], or in reactive(external=[...]) if it comes from outside the graph "
        "(handle.send()).",
        "Agent 'listener' activates on 'user:message', which nothing in the graph emits. "
        "Hint: declare it in the emitting agent's emits=[...], or in reactive(external=[...]) if "
        "it comes from outside the graph (handle.send()).",
    )
    assert str(error).startswith("Graph 'bot' has 3 problems:\n  - Agent 'analyst' updates")


def test_external_patterns_and_state_signals_satisfy_activations() -> None:
    graph = reactive(
        {
            "listener": agent(run=lambda ctx: 1, activate_on="user:message"),
            "watcher": agent(run=lambda ctx: 1, activate_on="state:decision:changed"),
            "auditor": agent(run=lambda ctx: 1, activate_on="agent:*:failed"),
            "logger": agent(run=lambda ctx: 1, activate_on=re.compile("custom:.*")),
        },
        state=State,
        external=["user:*"],
    )
    assert set(graph.agents) == {"listener", "watcher", "auditor", "logger"}


def test_dict_state_accepts_any_key_an_agent_writes_and_refuses_the_others() -> None:
    writer = agent(run=lambda ctx: 1, updates="x")
    reactive({"w": writer, "r": agent(run=lambda ctx: 1, activate_on="state:x:changed")}, state={})
    with pytest.raises(GraphValidationError, match=r"has no key 'anything' and no agent"):
        reactive(
            {"w": writer, "r": agent(run=lambda ctx: 1, activate_on="state:anything:changed")},
            state={},
        )


def test_duplicate_and_mismatched_names_are_reported() -> None:
    with pytest.raises(GraphValidationError) as info:
        reactive([agent(name="a", run=lambda ctx: 1), agent(name="a", run=lambda ctx: 2)])
    assert info.value.problems == ("Two agents are named 'a'. Hint: give each agent its own name.",)
    with pytest.raises(GraphValidationError, match=r"The agent under key 'x' is named 'y'"):
        reactive({"x": agent(name="y", run=lambda ctx: 1)})
    with pytest.raises(GraphValidationError, match=r"The graph has no agents"):
        reactive({})


def test_agents_are_named_after_their_keys() -> None:
    shared = agent(run=lambda ctx: 1)
    graph = reactive({"first": shared, "second": shared})
    assert [a.name for a in graph.agents.values()] == ["first", "second"]
    assert shared.name is None


def test_list_agents_need_names() -> None:
    with pytest.raises(AgentConfigError, match=r"has no name"):
        reactive([agent(run=lambda ctx: 1)])
    with pytest.raises(AgentConfigError, match=r"is not an agent"):
        reactive({"x": lambda ctx: 1})  # type: ignore[arg-type]


def test_cycles_are_warnings_that_spell_the_cycle() -> None:
    with pytest.warns(CycleWarning) as caught:
        graph = reactive(
            {
                "writer": agent(
                    run=lambda ctx: 1,
                    activate_on=["harness:start", "review:rejected"],
                    emits=["draft:ready"],
                ),
                "editor": agent(
                    run=lambda ctx: 1, activate_on="draft:ready", emits=["review:rejected"]
                ),
                "solo": agent(
                    run=lambda ctx: 1, activate_on="state:decision:changed", updates="decision"
                ),
            },
            state=State,
        )
    assert [str(w.message).split(". ")[0] for w in caught] == [
        "Agents form a cycle: writer -> draft:ready -> editor -> review:rejected -> writer",
        "Agents form a cycle: solo -> state:decision:changed -> solo",
    ]
    assert len(graph.warnings) == 2


def test_acyclic_graphs_do_not_warn() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        reactive(
            {
                "a": agent(run=lambda ctx: 1, emits=["x"]),
                "b": agent(run=lambda ctx: 1, activate_on="x"),
            }
        )


def test_unknown_run_options_are_rejected_with_the_list() -> None:
    graph = reactive({"a": agent(run=lambda ctx: 1)})
    with pytest.raises(TypeError, match=r"^Unknown run option\(s\): timout\. Run options are: "):
        graph.run_sync(timout=3)  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="on_end must be 'drain' or 'cancel'"):
        reactive({"a": agent(run=lambda ctx: 1)}, on_end="stop")  # type: ignore[arg-type]


async def test_graph_defaults_apply_and_runs_override_them() -> None:
    graph = reactive(
        {"a": agent(run=lambda ctx: ctx.input, updates="seen")},
        state={"seen": None},
        input="default",
    )
    assert (await graph.run()).state == {"seen": "default"}
    assert (await graph.run(input="given")).state == {"seen": "given"}


async def test_run_reactive_needs_exactly_one_form() -> None:
    with pytest.raises(TypeError, match="Pass one agent positionally, or agents"):
        await run_reactive()
    one = agent(run=lambda ctx: 1)
    with pytest.raises(TypeError, match="but not both"):
        await run_reactive(one, agents={"a": one})


def test_mermaid_draws_agents_and_the_signals_between_them() -> None:
    graph = reactive(
        {
            "analyst": agent(run=lambda ctx: 1, updates="analysis"),
            "trader": agent(
                run=lambda ctx: 1, activate_on="state:analysis:changed", emits=["trade:proposed"]
            ),
            "reviewer": agent(run=lambda ctx: 1, activate_on="trade:proposed"),
        },
        state=State,
    )
    assert graph.to_mermaid().splitlines() == [
        "flowchart LR",
        '  a_analyst["analyst"]',
        '  a_trader["trader"]',
        '  a_reviewer["reviewer"]',
        '  s0(["harness:start"])',
        "  s0 --> a_analyst",
        '  s1(["state:analysis:changed"])',
        "  s1 --> a_trader",
        '  s2(["trade:proposed"])',
        "  s2 --> a_reviewer",
        "  a_analyst -. updates .-> s1",
        "  a_trader --> s2",
    ]


def test_a_run_records_where_its_graph_came_from(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "desk_origin.py").write_text(
        "from reactor import agent, reactive\n"
        "graph = reactive({'a': agent(run=lambda ctx: 1)}, name='desk')\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("desk_origin")
    store = MemorySignalStore()
    result = module.graph.run_sync(record=store)
    info = store.load(result.run_id).info
    assert info.target == "desk_origin:graph"
    digest = hashlib.sha256((tmp_path / "desk_origin.py").read_bytes()).hexdigest()
    assert info.target_hash == digest


def test_a_graph_built_inside_a_function_has_no_target() -> None:
    store = MemorySignalStore()
    result = reactive({"a": agent(run=lambda ctx: 1)}).run_sync(record=store)
    assert store.load(result.run_id).info.target is None


# -- validation reports every problem, early -----------------------------------------


class Desk(BaseModel):
    headline: str = ""
    trades: list[str] = []
    count: int = 0


def test_a_naming_problem_does_not_hide_the_others() -> None:
    with pytest.raises(GraphValidationError) as info:
        reactive(
            {
                "b": agent(name="c", run=lambda ctx: 1),
                "d": agent(run=lambda ctx: 1, activate_on="nothing:sends:this"),
            },
            state=Desk,
        )
    assert len(info.value.problems) == 2
    assert info.value.problems[0].startswith("The agent under key 'b' is named 'c'.")
    assert info.value.problems[1].startswith("Agent 'd' activates on 'nothing:sends:this'")


def test_template_and_guard_typos_are_found_when_the_graph_is_built() -> None:
    with pytest.raises(GraphValidationError) as info:
        reactive(
            {
                "writer": agent(prompt="Write about {{ state.headlne }}.", updates="headline"),
                "count": agent(run=lambda ctx: 1, when="state.cuont > 1"),
            },
            state=Desk,
        )
    assert info.value.problems == (
        "Agent 'writer': the prompt reads state.headlne, which Desk does not have (keys: "
        "headline, trades, count). Hint: did you mean 'headline'? fix the name, or add the "
        "field to the model.",
        "Agent 'count': the when expression reads state.cuont, which Desk does not have "
        "(keys: headline, trades, count). Hint: did you mean 'count'? fix the name, or add "
        "the field to the model.",
    )


def test_signals_that_can_never_fire_are_refused() -> None:
    with pytest.raises(GraphValidationError) as info:
        reactive(
            {
                "late": agent(run=lambda ctx: 1, activate_on="harness:end"),
                "added": agent(run=lambda ctx: 1, activate_on="state:count:added"),
                "fine": agent(run=lambda ctx: 1, activate_on="state:trades:added"),
            },
            state=Desk,
        )
    late, added = info.value.problems
    assert late.startswith("Agent 'late' activates on 'harness:end', the last signal of a run")
    assert added.startswith(
        "Agent 'added' activates on 'state:count:added', but 'count' is not a list in Desk"
    )


async def test_a_single_agent_run_ignores_signals_only_its_graph_would_send() -> None:
    reused = agent(run=lambda ctx: "ran", activate_on=["harness:start", "data:updated"])
    result = await run_reactive(reused)
    assert result.output == "ran"


def test_writes_are_declared_validated_and_drawn() -> None:
    graph = reactive(
        {
            "clerk": agent(run=lambda ctx: ctx.store.set("count", 1), writes=["count"]),
            "watcher": agent(run=lambda ctx: 1, activate_on="state:count:changed"),
        },
        state=Desk,
    )
    assert "  a_clerk -. writes .-> s1" in graph.to_mermaid().splitlines()
    shape = graph.shape(observed={"clerk": ["count", "headline"]})
    kinds = {(e.source, e.target, e.kind) for e in shape.edges}
    assert ("agent:clerk", "signal:state:count:changed", "writes") in kinds
    assert ("agent:clerk", "signal:state:headline:changed", "observed") in kinds
    assert ("signal:state:count:changed", "agent:watcher", "activates") in kinds
    assert shape.to_json()["agents"] == ["clerk", "watcher"]
    assert shape.to_dot().startswith("digraph reactor {")
    with pytest.raises(GraphValidationError, match=r"Agent 'clerk' writes 'cash', which Desk"):
        reactive({"clerk": agent(run=lambda ctx: 1, writes="cash")}, state=Desk)


def test_long_chains_and_wide_graphs_build_without_recursion_or_quadratic_work() -> None:
    chain = {
        f"a{i}": agent(
            run=lambda ctx: 1,
            activate_on="harness:start" if i == 0 else f"step:{i - 1}",
            emits=[f"step:{i}"],
        )
        for i in range(1_500)
    }
    chain["a0"] = agent(
        run=lambda ctx: 1, activate_on=["harness:start", "step:1499"], emits=["step:0"]
    )
    with pytest.warns(CycleWarning, match=r"^Agents form a cycle: a0 -> step:0 -> a1 -> "):
        reactive(chain)

"""`reactor migrate`, run as a user runs it: results on stdout, diagnostics on stderr."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.migration import nodes
from tests.migration.test_limits import alias_bomb
from tests.reactor.cli_support import CliResult, reactor_cli

ROOT = Path(__file__).parents[2]

NODE_TYPES = '''
from migration import NodeRegistry

def counter():
    """A factory: a fresh counter for each executor."""
    count = {"n": 0}

    def tick(input):
        count["n"] += 1
        return {"n": count["n"]}

    registry = NodeRegistry()
    registry.register("tick.next", tick)
    return registry

shared = counter()
'''


def migrate(project: Path, *args: str) -> CliResult:
    return reactor_cli(project, "migrate", *args, env=dict(os.environ))


def write(project: Path, name: str, data: object) -> str:
    (project / name).write_text(data if isinstance(data, str) else json.dumps(data))
    return name


UNORDERED = {
    "flow": {"name": "unordered"},
    "nodes": [
        {"id": "a", "type": "echo", "input": {"text": "b says {{?b.text}}"}},
        {"id": "b", "type": "echo", "input": {"text": "b"}},
    ],
    "edges": [],
}


def test_check_prints_only_the_report_and_is_quiet(tmp_path: Path) -> None:
    name = write(tmp_path, "unordered.yaml", UNORDERED)
    quiet = migrate(tmp_path, name, "--check")
    assert quiet.returncode == 0, quiet.stderr
    assert quiet.stderr == ""
    assert quiet.stdout.splitlines()[0] == (
        "Flow 'unordered': the edge-based and the reactive run agree on all 2 nodes."
    )
    assert quiet.stdout.splitlines()[-1].startswith("  Warning: Node 'a' reads 'b'")
    verbose = migrate(tmp_path, name, "--check", "-v")
    assert verbose.stdout == quiet.stdout
    assert "unordered read" in verbose.stderr


def test_the_python_goes_to_stdout_alone(tmp_path: Path) -> None:
    name = write(tmp_path, "unordered.yaml", UNORDERED)
    result = migrate(tmp_path, name)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    compile(result.stdout, "migrated.py", "exec")


def test_a_registry_factory_gives_each_executor_its_own_types(tmp_path: Path) -> None:
    (tmp_path / "my_nodes.py").write_text(NODE_TYPES)
    name = write(
        tmp_path,
        "ticks.yaml",
        {"flow": {"name": "ticks"}, "nodes": [{"id": "t", "type": "tick.next"}], "edges": []},
    )
    fresh = migrate(tmp_path, name, "--check", "--registry", "my_nodes:counter")
    assert fresh.returncode == 0, fresh.stdout + fresh.stderr
    shared = migrate(tmp_path, name, "--check", "--registry", "my_nodes:shared")
    assert shared.returncode == 1
    assert shared.stdout.splitlines()[0] == (
        "Flow 'ticks': the edge-based and the reactive run DISAGREE on 1 of 1 node."
    )


def test_the_dialect_flows_check_from_the_command_line() -> None:
    result = migrate(
        ROOT,
        str(nodes.DIALECT / "foreach.yaml"),
        "--check",
        "--registry",
        "tests.migration.nodes:dialect_registry",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("Flow 'foreach': the edge-based and the reactive run agree")


def test_check_stops_at_its_timeout(tmp_path: Path) -> None:
    name = write(
        tmp_path,
        "slow.yaml",
        {
            "flow": {"name": "slow"},
            "nodes": [{"id": "w", "type": "control.wait", "input": {"ms": 60000}}],
            "edges": [],
        },
    )
    result = migrate(tmp_path, name, "--check", "--timeout", "0.3")
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr == (
        "reactor migrate: error: The check of flow 'slow' did not finish within 0.3 s; a node "
        "may be waiting or looping. Give it more time, or look at the slow node.\n"
    )


@pytest.mark.parametrize(
    ("args", "status", "message"),
    [
        pytest.param(
            ["--registry", "nowhere"],
            2,
            "reactor migrate: error: --registry takes MODULE:ATTR, got 'nowhere'\n",
            id="registry-form",
        ),
        pytest.param(
            ["--registry", "json:nothing"],
            2,
            "reactor migrate: error: --registry: json.nothing is missing; name a NodeRegistry, "
            "or a function returning one\n",
            id="registry-attribute",
        ),
        pytest.param(
            ["--check", "--timeout", "-1"],
            2,
            "reactor migrate: error: --timeout takes a number of seconds > 0, got -1\n",
            id="timeout",
        ),
        pytest.param(
            ["--check", "--input", "{nope"],
            2,
            "reactor migrate: error: --input is not valid JSON (Expecting property name "
            "enclosed in double quotes at column 2)\n",
            id="input",
        ),
    ],
)
def test_bad_options_get_one_line(args: list[str], status: int, message: str) -> None:
    result = migrate(ROOT, str(nodes.FLOWS / "01-flow-hello.yaml"), *args)
    assert (result.returncode, result.stderr, result.stdout) == (status, message, "")


def test_an_unknown_type_says_how_to_register_one() -> None:
    result = migrate(ROOT, str(nodes.DIALECT / "state.yaml"), "--check")
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.startswith("reactor migrate: error: Unknown node type: 'state.bump'")
    assert result.stderr.endswith(
        "Register yours with registry.register(type, fn) and pass registry= (or reactor "
        "migrate --registry MODULE:ATTR), or install a package that provides it (entry point "
        "group reactor.node_types).\n"
    )


@pytest.mark.timeout(120)
def test_a_hostile_file_is_a_one_line_error(tmp_path: Path) -> None:
    name = write(tmp_path, "bomb.yaml", alias_bomb())
    result = migrate(tmp_path, name, "--check")
    assert result.returncode == 1
    assert result.stderr == (
        "reactor migrate: error: The flow file 'bomb.yaml' expands to more than 200,000 values "
        "(YAML aliases repeat what they point to); write it out without nested aliases.\n"
    )


def test_check_fails_when_both_runs_fail_alike(tmp_path: Path) -> None:
    name = write(
        tmp_path,
        "greet.yaml",
        {
            "flow": {"name": "greet"},
            "nodes": [{"id": "hello", "type": "echo", "input": {"text": "Hi {{flow.input.name}}"}}],
            "edges": [],
        },
    )
    failed = migrate(tmp_path, name, "--check")
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert failed.stdout.splitlines()[0] == (
        "Flow 'greet': the check FAILED: both runs stopped at node 'hello' with the same error, "
        "so the check proves nothing; give the flow its input (reactor migrate --input JSON, "
        "check(input=...))."
    )
    assert "  The edge-based run stopped: FlowRunError: Node 'hello' (echo) failed" in failed.stdout
    given = migrate(tmp_path, name, "--check", "--input", '{"name": "Ada"}')
    assert given.returncode == 0, given.stdout + given.stderr
    assert given.stdout.splitlines()[1] == '  hello  {"text": "Hi Ada"}'


def test_check_fails_when_nothing_ran(tmp_path: Path) -> None:
    name = write(
        tmp_path,
        "idle.yaml",
        {
            "flow": {"name": "idle", "input": {"go": False}},
            "nodes": [
                {"id": "a", "type": "echo", "input": {"text": "a"}, "when": "flow.input.go"},
                {"id": "b", "type": "echo", "input": {"text": "b"}},
            ],
            "edges": [{"from": "a", "to": "b", "when": "a.text = 'a'"}],
        },
    )
    idle = migrate(tmp_path, name, "--check")
    assert idle.returncode == 1, idle.stdout + idle.stderr
    assert idle.stdout.splitlines()[0] == (
        "Flow 'idle': the check FAILED: no node ran in either run (every node was skipped or "
        "failed); look at the flow's input and its when conditions."
    )
    assert migrate(tmp_path, name, "--check", "--input", '{"go": true}').returncode == 0


def test_the_generated_graph_keeps_each_edge_in_one_place(tmp_path: Path) -> None:
    written = migrate(tmp_path, str(nodes.FLOWS / "02-flow-edges.yaml"), "-o", "chain.py")
    assert written.returncode == 0, written.stderr
    source = (tmp_path / "chain.py").read_text()
    assert 'activate_on=flow.triggers("end"),' in source  # no second copy of middle->end
    edge = '{"from": "middle", "to": "end"}'
    assert source.count(edge) == 1
    (tmp_path / "chain.py").write_text(source.replace(f"{edge}", "", 1).replace("}, ]", "}]"))
    run = ["run", "chain:graph", "--no-record", "--timeout", "60", "--state"]
    ran = reactor_cli(tmp_path, *run, env=dict(os.environ))
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "completed" in ran.stdout
    assert '"text": "End"' in ran.stdout


def test_the_team_flow_converts_checks_and_reads_its_schemas_by_path(tmp_path: Path) -> None:
    shutil.copytree(nodes.DIALECT, tmp_path / "flows")
    checked = migrate(tmp_path, "flows/agent-loop.yaml", "--check")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.startswith(
        "Flow 'agent-loop': the edge-based and the reactive run agree on all 4 nodes."
    )
    written = migrate(tmp_path, "flows/agent-loop.yaml", "-o", "app/loop.py")
    assert written.returncode == 0, written.stderr
    source = (tmp_path / "app" / "loop.py").read_text()
    assert '"options": {"outputSchema": schema("../flows/schemas/review.json")},' in source
    assert (
        '                "prompt": (\n'
        '                    "Current task: {{ task.title }}\\n"\n'
        '                    "{% if reviewer.structuredOutput %}\\n"\n'
    ) in source
    review = tmp_path / "flows" / "schemas" / "review.json"
    review.write_text(review.read_text().replace('"feedback"', '"advice"'))
    namespace: dict[str, Any] = {"__file__": str(tmp_path / "app" / "loop.py")}
    exec(compile(source, "loop.py", "exec"), namespace)
    reviewer = namespace["flow"]._steps["reviewer"][0]
    assert "advice" in reviewer.input["options"]["outputSchema"]["properties"]


def test_a_block_a_flow_cannot_run_is_refused_at_load_with_its_line(tmp_path: Path) -> None:
    prompt = "Task: {{ flow.input.task }}\n{% set tries = 3 %}\nWrite it."
    name = write(
        tmp_path,
        "blocks.yaml",
        {
            "flow": {"name": "blocks", "input": {"task": "x"}},
            "nodes": [{"id": "coder", "type": "claude.agent", "input": {"prompt": prompt}}],
            "edges": [],
        },
    )
    for args in ([name], [name, "--check"]):
        result = migrate(tmp_path, *args)
        assert (result.returncode, result.stdout) == (1, "")
        assert result.stderr == (
            "reactor migrate: error: Node 'coder' input.prompt: line 2: {% set tries = 3 %} is a "
            "statement flows do not run; their strings take {% if %}, {% elif %}, {% else %}, "
            "{% endif %}, {% for x in list %}, {% endfor %} and {# comments #}.\n"
        )

"""Replay is exact under parallelism: any graph of parallel agents, any recorded timing.

Random graphs of up to 8 agents (model calls with random latencies, async handlers
that sleep, sync handlers on worker threads), recorded once and replayed 50 times:
the replayed log equals the recording signal for signal every time, and
``reactor replay`` agrees (exits 0).
"""

from __future__ import annotations

import importlib
import itertools
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reactor import SQLiteSignalStore
from tests.reactor.cli_support import reactor_cli

LATENCIES = [0.0, 0.001, 0.003, 0.005, 0.01, 0.02]


@st.composite
def graph_specs(draw: st.DrawFn) -> list[dict[str, Any]]:
    count = draw(st.integers(1, 8))
    spec = []
    for index in range(count):
        kind = draw(st.sampled_from(["llm", "llm", "async", "sync"]))
        latency = draw(st.sampled_from(LATENCIES if kind == "llm" else LATENCIES[:4]))
        after = None if index == 0 else draw(st.none() | st.none() | st.integers(0, index - 1))
        spec.append({"kind": kind, "latency": latency, "after": after})
    return spec


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A folder the CLI can import the generated graphs from."""
    folder = tmp_path_factory.mktemp("parallel")
    shutil.copy(Path(__file__).with_name("parallel_graphs.py"), folder / "parallel_graphs.py")
    sys.path.insert(0, str(folder))
    try:
        yield folder
    finally:
        sys.path.remove(str(folder))
        for name in [name for name in sys.modules if name.startswith("parallel_")]:
            del sys.modules[name]


_numbers = itertools.count()


@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(spec=graph_specs())
def test_replays_of_parallel_agents_equal_the_recording_every_time(
    project: Path, spec: list[dict[str, Any]]
) -> None:
    name = f"parallel_{next(_numbers)}"
    (project / f"{name}.py").write_text(
        f"from parallel_graphs import build\n\nSPEC = {spec!r}\ngraph = build(SPEC)\n"
    )
    module = importlib.import_module(name)
    builder = importlib.import_module("parallel_graphs")
    with SQLiteSignalStore(project / ".reactor" / "runs.db") as store:
        recorded = module.graph.run_sync(
            input="work", provider=builder.provider(spec), record=store, target=f"{name}:graph"
        )
        assert recorded.status == "completed"
        recording = store.load(recorded.run_id)
    for attempt in range(50):
        replayed = module.graph.run_sync(replay=recording)
        difference = recording.diff(replayed)
        assert difference is None, f"replay {attempt} of {spec}: {difference}"
    cli = reactor_cli(project, "replay", recorded.run_id, "--quiet")
    assert cli.returncode == 0, cli.stdout + cli.stderr

"""A run killed while it waits for a person: the reply posted meanwhile is applied on resume."""

from __future__ import annotations

import importlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from types import ModuleType

import pytest

from reactor import Recording
from tests.reactor.databases import StorePlace

DESK = textwrap.dedent(
    """
    import os
    import sys

    from reactor import PostgresSignalStore, SQLiteSignalStore, agent, reactive

    ORDERS = os.environ["DESK_ORDERS"]


    def propose(ctx):
        with open(ORDERS, "a") as orders:  # a side effect before the question: once
            orders.write("proposed\\n")
        return "AAPL x10"


    async def approve(ctx):
        answer = await ctx.ask("Place {{ state.order }}?", choices=["yes", "no"])
        return answer == "yes"


    graph = reactive(
        {
            "propose": agent(run=propose, updates="order"),
            "approve": agent(run=approve, activate_on="state:order:changed", updates="placed"),
        },
        state={"order": None, "placed": None},
        name="asking-desk",
    )


    def store(kind, where):
        return SQLiteSignalStore(where) if kind == "sqlite" else PostgresSignalStore(where)


    if __name__ == "__main__":
        kind, where = sys.argv[1], sys.argv[2]
        with store(kind, where) as runs:
            graph.run_sync(record=runs)
    """
)


@pytest.fixture
def desk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    (tmp_path / "asking_desk.py").write_text(DESK)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("DESK_ORDERS", str(tmp_path / "orders.txt"))
    sys.modules.pop("asking_desk", None)
    return importlib.import_module("asking_desk")


def killed_while_waiting(place: StorePlace, tmp_path: Path) -> Recording:
    """Run the desk in a subprocess until its run is ``waiting``, then ``kill -9`` it."""
    errors = tmp_path / "stderr.txt"
    with errors.open("w") as stderr:
        process = subprocess.Popen(
            [sys.executable, str(tmp_path / "asking_desk.py"), place.kind, place.where],
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    try:
        deadline = time.monotonic() + 30
        with place.open() as store:
            while time.monotonic() < deadline:
                if store.runs(status="waiting"):
                    break
                time.sleep(0.05)
            else:
                pytest.fail(f"the run never waited: {errors.read_text()}")
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
    with place.open() as store:
        return store.load(store.runs()[0].run_id)


def test_killed_while_waiting_resumes_with_the_reply_posted_meanwhile(
    desk: ModuleType, store_place: StorePlace, tmp_path: Path
) -> None:
    cut = killed_while_waiting(store_place, tmp_path)
    prompt = next(s for s in cut.signals if s.name == "session:prompt")
    with store_place.open() as store:
        assert [run.status for run in store.runs()] == ["waiting"]
        store.post(
            cut.run_id, "session:reply", {"prompt_id": prompt.payload["prompt_id"], "answer": "yes"}
        )
        result = desk.graph.resume_sync(cut.run_id, record=store)
        resumed = store.load(cut.run_id)
        assert store.runs()[0].status == "completed"
    names = [s.name for s in resumed.signals]
    assert result.state == {"order": "AAPL x10", "placed": True}
    assert (names.count("session:prompt"), names.count("session:reply")) == (1, 1)
    assert (names.count("harness:start"), names.count("harness:end")) == (1, 1)
    seqs = [s.seq for s in resumed.signals]
    assert seqs == sorted(set(seqs))
    assert (tmp_path / "orders.txt").read_text() == "proposed\n"  # not proposed again


async def test_resumed_without_a_reply_it_waits_again_for_the_same_prompt(
    desk: ModuleType, store_place: StorePlace, tmp_path: Path
) -> None:
    cut = killed_while_waiting(store_place, tmp_path)
    prompt_id = next(s for s in cut.signals if s.name == "session:prompt").payload["prompt_id"]
    with store_place.open() as store:
        handle = desk.graph.start(resume=cut.run_id, record=store)
        assert [p.prompt_id for p in handle.prompts()] == [prompt_id]
        handle.reply(prompt_id, "no")
        handle.close()
        result = await handle.result()
        names = [s.name for s in store.load(cut.run_id).signals]
    assert result.state["placed"] is False
    assert (names.count("session:prompt"), names.count("session:reply")) == (1, 1)

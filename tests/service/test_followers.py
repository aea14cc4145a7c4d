"""Followers are bounded: the feed's ring, slow clients, page-by-page catch-ups, the cap."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import subprocess
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from websockets.exceptions import ConnectionClosedError
from websockets.sync.client import connect

from reactor import MemorySignalStore, RunInfo, Signal
from reactor.service import ObjectStore, ReactionService, ServiceConfigError
from reactor.service._api.follow import PAGE, StreamSettings
from reactor.service._api.stream import run_signals
from reactor.service._hosting.live import FeedBehind, RunFeed
from reactor.service._hosting.record import ServiceRecord
from tests.service.following import GRAPHS
from tests.service.following import make_service as make_following
from tests.service.idle import Idle
from tests.service.server import ALICE, BOB, CAROL, TOKENS, Server, serve_command, serving, wait_for

APP = "tests.service.following:make_service"


class Counted:
    """A payload that counts how often it is serialized (its ``repr`` is its JSON)."""

    made = 0

    def __repr__(self) -> str:
        Counted.made += 1
        return "counted"


def _signals(first: int, last: int) -> list[Signal]:
    return [Signal("tick", Counted(), seq=seq) for seq in range(first, last + 1)]


async def test_a_feed_keeps_its_buffer_and_serializes_only_what_a_watcher_takes() -> None:
    feed, Counted.made = RunFeed(buffer=10), 0
    for signal in _signals(1, 25):
        feed.on_signal(signal)
    assert (len(feed), feed.first_seq, feed.oldest_seq) == (10, 1, 16)
    assert Counted.made == 0  # nobody watches: no JSON
    assert not feed.covers(14)
    assert feed.covers(15)
    for _ in range(2):
        taken = feed.take(feed.position_after(15))
        assert [seq for seq, _, _ in taken] == list(range(16, 26))
    assert Counted.made == 10  # once each
    feed.resize(4)
    assert (len(feed), feed.oldest_seq) == (4, 22)
    feed.end()


async def test_a_watcher_holding_a_batch_the_ring_has_passed_is_behind() -> None:
    feed = RunFeed(buffer=10)
    for signal in _signals(1, 5):
        feed.on_signal(signal)
    slow, keeping_up = feed.watch(0), feed.watch(0)
    slow_batches, kept_batches = aiter(slow), aiter(keeping_up)
    assert len(await anext(slow_batches)) == 5  # and it is never written: its client is stuck
    seen = [seq for seq, _, _ in await anext(kept_batches)]
    for signal in _signals(6, 20):
        feed.on_signal(signal)
        if signal.seq % 5 == 0:
            seen += [seq for seq, _, _ in await anext(kept_batches)]
    await asyncio.wait_for(slow.behind, timeout=30)
    with pytest.raises(FeedBehind):
        await anext(slow_batches)
    assert seen == list(range(1, 21))
    assert not keeping_up.behind.done()
    feed.end()
    assert [batch async for batch in kept_batches] == []


async def test_the_services_log_feeds_a_run_exactly_what_it_records() -> None:
    record, feed = ServiceRecord(MemorySignalStore()), RunFeed()
    record.feeds["run_a"] = feed
    record.start_run(RunInfo(run_id="run_a", graph="g", started_at=time.time()))
    allowed = {"run_a": True}
    record.fence = lambda run_id: allowed.get(run_id, True)
    for seq in (1, 2):
        record.append(Signal("tick", {"n": seq}, seq=seq, run_id="run_a"))
    record.append(Signal("tick", {}, seq=1, run_id="run_b"))  # another run's: not its feed's
    allowed["run_a"] = False  # its lease went elsewhere: nothing more of it is recorded here
    record.append(Signal("tick", {"n": 3}, seq=3, run_id="run_a"))
    record.flush()
    recorded = [s.seq for s in record.store.load("run_a").signals]
    followed = [seq for seq, _, _ in feed.take(0)]
    assert recorded == followed == [1, 2]  # a follower never sees what the log lacks
    feed.end()


async def test_a_service_runs_feed_holds_every_signal_the_store_has(tmp_path: Path) -> None:
    service = make_following(f"sqlite:///{tmp_path / 'db.sqlite'}")
    async with service.objects, service:
        run_id = await service.submit("gated", 30)
        feed = service.live[run_id].feed
        for _ in range(1200):  # it asks "Go?" and waits (a generous deadline)
            if feed.asking:
                break
            await asyncio.sleep(0.05)
        assert feed.asking
        handle = service.live[run_id].controls.handle
        handle.reply(next(iter(feed.asking)), "go")
        await handle.result()
        record = service.host.record
        assert record is not None
        await asyncio.to_thread(record.flush)
        stored = await asyncio.to_thread(record.load, run_id)
    followed = [(seq, name) for seq, name, _ in feed.take(0)]
    assert followed == [(s.seq, s.name) for s in stored.signals]
    assert followed[-1][1] == "harness:end"
    assert feed.ended
    assert sum(name == "tick" for _, name in followed) == 30


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        pytest.param("REACTOR_STREAM_BUFFER", "0", id="buffer-zero"),
        pytest.param("REACTOR_STREAM_BUFFER", "1e3", id="buffer-not-whole"),
        pytest.param("REACTOR_MAX_STREAMS", "-4", id="streams-negative"),
        pytest.param("REACTOR_MAX_STREAMS", "many", id="streams-word"),
    ],
)
def test_stream_settings_must_be_positive_whole_numbers(variable: str, value: str) -> None:
    message = f"{variable}={value!r}: must be a whole number >= 1"
    with pytest.raises(ServiceConfigError, match=f"^{re.escape(message)}$"):
        StreamSettings.read({variable: value})
    assert StreamSettings.read({}) == StreamSettings(1000, 256)
    assert StreamSettings.read({"REACTOR_STREAM_BUFFER": " 50 "}).buffer == 50


def test_reactor_serve_refuses_a_bad_stream_setting_in_one_line(tmp_path: Path) -> None:
    bad = {"REACTOR_MAX_STREAMS": "0"}
    done = subprocess.run(
        serve_command(
            *("--db", f"sqlite:///{tmp_path / 'app.db'}", "--app", APP), "--log-format", "console"
        ),
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": os.getcwd(), "REACTOR_API_TOKENS": TOKENS, **bad},
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "reactor serve: error: REACTOR_MAX_STREAMS='0': must be a whole number >= 1"
    ]


@pytest.mark.timeout(300)
async def test_the_catch_up_of_a_long_finished_run_is_read_page_by_page(tmp_path: Path) -> None:
    from reactor import SQLiteSignalStore

    path = tmp_path / "app.db"
    store = SQLiteSignalStore(path)
    result = await GRAPHS["burst"].run(input=100_000, record=store)
    await asyncio.to_thread(store.close)
    async with (
        ObjectStore(f"sqlite:///{path}") as objects,
        ReactionService(objects=objects, graphs=GRAPHS) as service,
    ):
        assert service.record is not None
        info = await asyncio.to_thread(service.record.info, result.run_id)
        last = size = largest = 0
        tracemalloc.start()
        try:
            async for batch in run_signals(service, result.run_id):
                largest = max(largest, len(batch))
                for seq, _, text in batch:  # in order, each once (kept as counts, not lists)
                    assert seq == last + 1
                    last, size = seq, size + len(text)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert last == info.last_seq
    assert largest == PAGE
    assert size > 20_000_000  # the run's JSON
    assert peak < size / 20, f"{peak / 1e6:.1f} MB held to stream {size / 1e6:.1f} MB"


def _follow(client: httpx2.Client, run_id: str, after: int = 0) -> tuple[list[Any], int]:
    """Every signal after ``after`` to ``harness:end``, reconnecting as a browser does."""
    signals: list[Any] = []
    drops = 0
    while not signals or signals[-1]["name"] != "harness:end":
        last = signals[-1]["seq"] if signals else after
        headers = {"Last-Event-ID": str(last)} if last else {}
        with client.sse(f"/api/runs/{run_id}/events", headers=headers) as source:
            signals += [json.loads(event.data) for event in source]
        drops += 1
    return signals, drops - 1


def _logged(url: str, run_id: str) -> list[tuple[int, str]]:
    from reactor import PostgresSignalStore, SQLiteSignalStore

    store = (
        SQLiteSignalStore(url.removeprefix("sqlite:///"))
        if url.startswith("sqlite")
        else PostgresSignalStore(url)
    )
    try:
        return [(s.seq, s.name) for s in store.load(run_id).signals]
    finally:
        store.close()


@pytest.mark.timeout(300)
def test_a_client_that_stops_reading_is_dropped_and_catches_up_with_last_event_id(
    url: str, tmp_path: Path
) -> None:
    env = {"REACTOR_STREAM_BUFFER": "100"}
    with serving(url, tmp_path / "serve.log", app=APP, env=env) as server:
        with server.client() as api:
            run_id = api.post("/api/runs", json={"graph": "gated", "input": 40_000}).json()[
                "run_id"
            ]
            slow = Idle(server, f"/api/runs/{run_id}/events")
            assert slow.status() == 200
            given = []
            for signal in slow.events():  # then it stops reading
                given.append(signal)
                if signal["name"] == "session:prompt":
                    break
            prompt_id = given[-1]["payload"]["prompt_id"]
            answered = api.post(
                f"/api/runs/{run_id}/prompts/{prompt_id}/reply", json={"answer": "go"}
            )
            assert answered.status_code == 200, answered.text
            everything, _ = _follow(api, run_id)
            given += list(slow.events())  # what was on its way when it was dropped
            slow.close()
            assert given[-1]["name"] != "harness:end"
            seqs = [signal["seq"] for signal in given]
            assert seqs == list(range(1, len(seqs) + 1))
            rest, drops = _follow(api, run_id, after=seqs[-1])
            assert drops == 0  # the run has ended: a catch-up from the store, never behind
        assert "stream client behind" in server.output()
        assert "Traceback" not in server.output()
        assert '"exception"' not in server.output()  # a JSON line's traceback
    logged = _logged(url, run_id)
    assert [(s["seq"], s["name"]) for s in everything] == logged
    assert [(s["seq"], s["name"]) for s in given + rest] == logged


@pytest.fixture
def capped(tmp_path: Path) -> Iterator[Server]:
    env = {"REACTOR_MAX_STREAMS": "2"}
    with serving(
        f"sqlite:///{tmp_path / 'app.db'}", tmp_path / "serve.log", app=APP, env=env
    ) as server:
        yield server


def _websocket(server: Server, run_id: str) -> int:
    """The close code of the run's WebSocket channel, read to its end."""
    uri = f"ws{server.url.removeprefix('http')}/api/runs/{run_id}/ws"
    with connect(uri, additional_headers={"Authorization": f"Bearer {ALICE}"}) as ws:
        with contextlib.suppress(ConnectionClosedError):  # any code but 1000 and 1001
            for _ in ws:
                pass
        assert ws.close_code is not None
        return ws.close_code


@pytest.mark.timeout(180)
def test_past_the_cap_a_stream_is_refused_and_a_stream_gives_its_place_back(capped: Server) -> None:
    with capped.client() as api:
        waiting = api.post("/api/runs", json={"graph": "gated", "input": 1}).json()["run_id"]
        ended = api.post("/api/runs", json={"graph": "burst", "input": 10}).json()["run_id"]
        first = Idle(capped, f"/api/runs/{waiting}/events")
        second = Idle(capped, f"/api/runs/{waiting}/events", token=BOB)  # one principal: 1
        assert (first.status(), second.status()) == (200, 200)
        with capped.client(CAROL) as carol:  # alice holds as many as one principal may
            refused = carol.get(f"/api/runs/{ended}/events")
        assert refused.status_code == 503
        assert refused.headers["Retry-After"] == "5"
        assert refused.json() == {
            "error": "unavailable",
            "detail": "The service streams 2 runs at once already (REACTOR_MAX_STREAMS); "
            "try again in a few seconds.",
        }
        assert _websocket(capped, ended) == 1013
        first.close()  # its client goes away: its place is given back
        wait_for(lambda: api.get(f"/api/runs/{ended}/events").status_code == 200, timeout=60)
        for _ in range(5):  # a stream that ends gives its place back
            signals, _ = _follow(api, ended)
            assert signals[-1]["name"] == "harness:end"
        assert _websocket(capped, ended) == 1000
        second.close()
    assert "Traceback" not in capped.output()
    assert '"exception"' not in capped.output()  # a JSON line's traceback


def _rss(server: Server) -> float:
    """The server's resident memory, in MB."""
    status = Path(f"/proc/{server.process.pid}/status").read_text()
    line = next(line for line in status.splitlines() if line.startswith("VmRSS:"))
    return int(line.split()[1]) / 1024


@pytest.mark.timeout(300)
def test_idle_followers_hold_little_and_give_it_back_when_they_go(tmp_path: Path) -> None:
    env = {"REACTOR_MAX_STREAMS": "100", "REACTOR_MAX_STREAMS_PER_USER": "100"}
    db = f"sqlite:///{tmp_path / 'app.db'}"
    with serving(db, tmp_path / "serve.log", app=APP, env=env) as server, server.client() as api:
        run_id = api.post("/api/runs", json={"graph": "burst", "input": 30_000}).json()["run_id"]
        signals, _ = _follow(api, run_id)  # several MB of JSON
        assert sum(len(json.dumps(s)) for s in signals) > 6_000_000
        before = _rss(server)
        peaks = []
        for _ in range(2):
            path = f"/api/runs/{run_id}/events"  # one principal holds all places but one
            followers = [Idle(server, path) for _ in range(99)] + [Idle(server, path, token=BOB)]
            assert {follower.status() for follower in followers} == {200}
            with server.client(CAROL) as carol:
                assert carol.get(path).status_code == 503
            peak, began = _rss(server), time.monotonic()
            while time.monotonic() - began < 3:  # a window to see it at its largest
                peak = max(peak, _rss(server))
                time.sleep(0.01)  # the server needs the core more than the reading does
            peaks.append(peak)
            for follower in followers:
                follower.close()
            # a new stream is taken again (its answer only: reading its megabytes on a
            # loaded machine could outlast the server's write timeout, and be dropped)
            wait_for(lambda: _opens(api, f"/api/runs/{run_id}/events") == 200)
            # what they held goes back to the system once the last stream has ended
            wait_for(lambda: _rss(server) <= before + 60, timeout=60)
    assert peaks[0] - before <= 250, (before, peaks)
    assert peaks[1] <= peaks[0] + 25, (before, peaks)


# -- bounded per principal ---------------------------------------------------------------


def _opens(client: httpx2.Client, path: str) -> int:
    """The status of a stream's answer (the stream is left at once)."""
    with client.stream("GET", path) as answer:
        return answer.status_code


def _waiting(api: httpx2.Client, graph: str = "gated", input: int = 1) -> tuple[str, str]:
    """A run of ``graph`` waiting for its gate: its id and the prompt's id."""
    run_id = api.post("/api/runs", json={"graph": graph, "input": input}).json()["run_id"]

    def asked() -> str | None:
        found = api.get(f"/api/runs/{run_id}")
        prompts = found.json()["prompts"] if found.status_code == 200 else []
        return prompts[0]["prompt_id"] if prompts else None

    return run_id, wait_for(asked, timeout=60)


@pytest.mark.timeout(180)
def test_one_principal_never_takes_another_principals_place(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'app.db'}"
    with serving(db, tmp_path / "serve.log", app=APP) as server, server.client() as api:
        run_id, _ = _waiting(api)
        path = f"/api/runs/{run_id}/events"
        held = [Idle(server, path) for _ in range(16)]
        assert {follower.status() for follower in held} == {200}
        refused = api.get(path)
        assert refused.status_code == 429
        assert refused.json() == {
            "error": "too_many_requests",
            "detail": "user:alice follows 16 streams already, as many as one principal may "
            "(REACTOR_MAX_STREAMS_PER_USER); close one, or try again when one ends.",
        }
        assert _websocket_of(server, run_id, ALICE) == 1013
        with server.client(BOB) as bob:
            assert _opens(bob, path) == 200  # the other principal still gets in
        held.pop().close()
        wait_for(lambda: _opens(api, path) == 200, timeout=60)
        for follower in held:
            follower.close()
    assert "Traceback" not in server.output()


def _websocket_of(server: Server, run_id: str, token: str, after: int = 0) -> int:
    """The close code of the run's WebSocket channel, read to its end."""
    uri = f"ws{server.url.removeprefix('http')}/api/runs/{run_id}/ws?after={after}"
    with connect(uri, additional_headers={"Authorization": f"Bearer {token}"}) as ws:
        with contextlib.suppress(ConnectionClosedError):
            for _ in ws:
                pass
        assert ws.close_code is not None
        return ws.close_code


@pytest.mark.timeout(300)
def test_a_follower_stuck_on_a_write_is_closed_after_the_write_timeout(tmp_path: Path) -> None:
    env = {
        "REACTOR_STREAM_WRITE_TIMEOUT": "1",
        "REACTOR_STREAM_BUFFER": "400000",  # never behind: only the write timeout drops it
        "REACTOR_MAX_STREAMS_PER_USER": "1",
    }
    db = f"sqlite:///{tmp_path / 'app.db'}"
    with serving(db, tmp_path / "serve.log", app=APP, env=env) as server, server.client() as api:
        run_id, prompt_id = _waiting(api, input=150_000)
        path = f"/api/runs/{run_id}/events"
        stuck = Idle(server, path)
        assert stuck.status() == 200
        assert _opens(api, path) == 429  # its one place is held
        answered = api.post(f"/api/runs/{run_id}/prompts/{prompt_id}/reply", json={"answer": "go"})
        assert answered.status_code == 200, answered.text
        # it never reads again: its writes get stuck, and after 1 s it is closed
        wait_for(lambda: "stream client stuck" in server.output(), timeout=120)
        wait_for(lambda: _opens(api, path) == 200, timeout=60)
        stuck.close()
    (line,) = [
        json.loads(line)
        for line in server.output().splitlines()
        if line.startswith("{") and json.loads(line)["event"] == "stream client stuck"
    ]
    assert (line["run_id"], line["stuck_after_s"]) == (run_id, 1.0)


@pytest.mark.timeout(180)
def test_a_websocket_after_beyond_the_end_of_the_run_neither_loops_nor_replays(
    tmp_path: Path,
) -> None:
    db = f"sqlite:///{tmp_path / 'app.db'}"
    with serving(db, tmp_path / "serve.log", app=APP) as server, server.client() as api:
        ended = api.post("/api/runs", json={"graph": "burst", "input": 10}).json()["run_id"]
        signals, _ = _follow(api, ended)
        assert signals[-1]["name"] == "harness:end"
        uri = f"ws{server.url.removeprefix('http')}/api/runs/{ended}/ws?after=1000000"
        with (
            connect(uri, additional_headers={"Authorization": f"Bearer {ALICE}"}) as ws,
            contextlib.suppress(ConnectionClosedError),
        ):
            given = list(ws)
        assert (given, ws.close_code) == ([], 1000)  # the run has ended: nothing after it
        run_id, prompt_id = _waiting(api, input=3)
        uri = f"ws{server.url.removeprefix('http')}/api/runs/{run_id}/ws?after=1000000"
        with connect(uri, additional_headers={"Authorization": f"Bearer {ALICE}"}) as ws:
            spent = _cpu(server)
            with pytest.raises(TimeoutError):  # quiet while the run waits
                ws.recv(timeout=2)
            assert _cpu(server) - spent < 1.0  # and it does not spin meanwhile
            reply = api.post(f"/api/runs/{run_id}/prompts/{prompt_id}/reply", json={"answer": "go"})
            assert reply.status_code == 200, reply.text
            names = [json.loads(text)["signal"]["name"] for text in ws]
        assert names[-1] == "harness:end"  # what came next, then the end
        assert names.count("tick") == 3
        assert ws.close_code == 1000


def _cpu(server: Server) -> float:
    """Seconds of CPU the server's process has used."""
    fields = Path(f"/proc/{server.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

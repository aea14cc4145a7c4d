"""A run's signals as they happen: Server-Sent Events, and the WebSocket channel.

``GET /api/runs/{id}/events`` streams one event per signal (``id:`` its ``seq``,
``data:`` the signal as JSON): the recorded history first, then each new signal, until
``harness:end`` closes the stream. A run executing in this process is followed from
its feed, one for all its clients (no database round trip per signal or per client;
a burst of signals is one write per client); another is followed from the store. A
client that reconnects with ``Last-Event-ID`` gets what came after it.

``WS /api/runs/{id}/ws`` is the WebSocket channel: the same signals as messages
(``{"type": "signal", "signal": {...}}``), and commands the other way: ``{"type":
"send", "name", "payload"}``, ``{"type": "reply", "prompt_id", "answer"}`` and
``{"type": "abort", "reason"}``, each answered ``{"type": "ok", ...}`` or ``{"type":
"error", "error", "detail"}``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Sequence
from typing import Annotated, Any

import fastapi
from fastapi.responses import StreamingResponse
from starlette.websockets import WebSocket, WebSocketDisconnect

from reactor.exceptions import ReactorError
from reactor.service._api.base import KINDS, STATUSES, ApiError, Service, authenticate, state_of
from reactor.service._api.base import user_of as token_user
from reactor.service._api.runs import abort_run, load_run, post_signal, reply
from reactor.service._hosting.live import FeedItem
from reactor.service._hosting.service import ReactionService
from reactor.service._objects.values import User

__all__ = ["event_stream", "router", "run_signals", "ws_router"]

HEARTBEAT = 15.0
"""Seconds of silence after which a comment keeps the connection open through proxies."""
POLL = 0.25
"""Seconds between two looks at the store for a run that executes elsewhere."""

router = fastapi.APIRouter(
    prefix="/api/runs", tags=["runs"], dependencies=[fastapi.Depends(authenticate)]
)
ws_router = fastapi.APIRouter(prefix="/api/runs", tags=["runs"])


Batch = Sequence[FeedItem]
"""Signals of a run as (``seq``, name, JSON text), in order."""


async def run_signals(
    service: ReactionService, run_id: str, after: int = 0
) -> AsyncIterator[Batch]:
    """The run's signals after ``seq`` ``after``, in batches, until its end.

    A run executing here is followed from its feed: its clients share it, and a burst
    of signals reaches each client as one batch.
    """
    last = after
    while True:
        live = service.live.get(run_id)
        if live is not None:
            if live.feed.first_seq > last + 1:  # a resumed run: the start is in the store
                recording = await load_run(service, run_id)
                earlier = [
                    (signal.seq, signal.name, signal.to_json())
                    for signal in recording.signals
                    if last < signal.seq < live.feed.first_seq
                ]
                if earlier:
                    last = earlier[-1][0]
                    yield earlier
            async for items in live.feed.watch(last):
                last = items[-1][0]
                yield items
            return
        recording = await load_run(service, run_id)
        fresh = [(s.seq, s.name, s.to_json()) for s in recording.signals if s.seq > last]
        if fresh:
            last = fresh[-1][0]
            yield fresh
        if recording.complete:
            return
        await asyncio.sleep(POLL)


async def _followed(
    service: ReactionService, run_id: str, stopping: asyncio.Event, after: int = 0
) -> AsyncIterator[Batch | None]:
    """The run's batches, ``None`` after each quiet ``HEARTBEAT``; ends when ``stopping``.

    A run executing here is read from its feed directly (no task or queue per batch);
    another goes through :func:`_pumped`.
    """
    live = service.live.get(run_id)
    if live is None or live.feed.first_seq > after + 1:
        async for item in _pumped(run_signals(service, run_id, after), stopping):
            yield item
        return
    stop = asyncio.ensure_future(stopping.wait())
    try:
        async for items in live.feed.watch(after, heartbeat=HEARTBEAT, stop=stop):
            yield items or None
    finally:
        stop.cancel()


async def _pumped(
    source: AsyncIterator[Batch], stopping: asyncio.Event
) -> AsyncIterator[Batch | None]:
    """``source``'s batches, ``None`` after each quiet ``HEARTBEAT``; ends when ``stopping``."""
    queue: asyncio.Queue[tuple[Batch | None, bool]] = asyncio.Queue()

    async def pump() -> None:
        try:
            async for batch in source:
                queue.put_nowait((batch, False))
        finally:
            queue.put_nowait((None, True))

    task = asyncio.create_task(pump())
    stop = asyncio.create_task(stopping.wait())
    try:
        while True:
            if queue.empty():
                get = asyncio.ensure_future(queue.get())
                done, _ = await asyncio.wait(
                    {get, stop}, timeout=HEARTBEAT, return_when="FIRST_COMPLETED"
                )
                if get not in done:
                    get.cancel()
                    if stop in done:
                        return
                    yield None
                    continue
                batch, finished = get.result()
            else:
                batch, finished = queue.get_nowait()
            if finished:
                return
            yield batch
    finally:
        for pending in (task, stop):
            pending.cancel()
        with contextlib.suppress(BaseException):
            await task


@router.get(
    "/{run_id}/events",
    response_class=StreamingResponse,
    responses={200: {"content": {"text/event-stream": {}}}},
)
async def events(
    run_id: str,
    request: fastapi.Request,
    service: Service,
    last_event_id: Annotated[int | None, fastapi.Header(alias="Last-Event-ID")] = None,
) -> StreamingResponse:
    """The run's signals as Server-Sent Events: history, then live, until ``harness:end``."""
    if run_id not in service.live:  # a run executing here exists: no need to read its log
        await load_run(service, run_id)  # 404 before the stream starts
    return event_stream(service, run_id, state_of(request).stopping, last_event_id or 0)


def event_stream(
    service: ReactionService, run_id: str, stopping: asyncio.Event, after: int = 0
) -> StreamingResponse:
    """A run's signals after ``seq`` ``after`` as Server-Sent Events (the API's and the UI's)."""

    async def stream() -> AsyncIterator[str]:
        async for batch in _followed(service, run_id, stopping, after):
            if batch is None:
                yield ": keep-alive\n\n"
            else:  # one write for a burst of signals
                yield "".join([f"id: {seq}\ndata: {text}\n\n" for seq, _, text in batch])

    return StreamingResponse(
        stream(),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )


def _error(exc: BaseException) -> dict[str, Any]:
    if isinstance(exc, ApiError):
        status = exc.status
    else:
        status = next((code for kind, code in STATUSES if isinstance(exc, kind)), 500)
    return {"type": "error", "error": KINDS.get(status, "error"), "detail": str(exc)}


async def _command(
    service: ReactionService, run_id: str, user: User, message: Any
) -> dict[str, Any]:
    """Carry out one command of the channel; its answer."""
    if not isinstance(message, dict) or message.get("type") not in ("send", "reply", "abort"):
        raise ApiError(
            422, 'Send {"type": "send" | "reply" | "abort", ...}; see the API docs for the fields.'
        )
    kind = message["type"]
    if kind == "send":
        name = message.get("name")
        if not isinstance(name, str) or not name:
            raise ApiError(422, 'A "send" command needs a "name".')
        sent = await post_signal(service, run_id, name, message.get("payload"), user)
        return {"type": "ok", "command": kind, "message_id": sent}
    if kind == "reply":
        prompt_id = message.get("prompt_id")
        if not isinstance(prompt_id, str) or "answer" not in message:
            raise ApiError(422, 'A "reply" command needs a "prompt_id" and an "answer".')
        taken = await reply(service, run_id, prompt_id, message["answer"], user)
        return {
            "type": "ok",
            "command": kind,
            "message_id": taken.message_id,
            "answer": taken.answer,
            "answered_by": taken.answered_by,
        }
    reason = str(message.get("reason") or "aborted through the API")
    posted = await abort_run(service, run_id, reason, user)
    return {"type": "ok", "command": kind, "reason": reason, "message_id": posted}


@ws_router.websocket("/{run_id}/ws")
async def channel(websocket: WebSocket, run_id: str) -> None:
    """The WebSocket channel of a run: its signals out, commands in."""
    header = websocket.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    state = state_of(websocket)
    try:
        user = token_user(websocket, token.strip() if scheme.lower() == "bearer" else None)
        await load_run(state.service, run_id)
    except (ApiError, ReactorError) as exc:
        await websocket.close(code=1008, reason=str(exc)[:120])
        return
    await websocket.accept()
    service = state.service

    async def out() -> None:
        async for batch in _followed(service, run_id, state.stopping):
            for _, _, text in batch or ():
                await websocket.send_text(f'{{"type": "signal", "signal": {text}}}')
        await websocket.close(code=1000)

    async def into() -> None:
        while True:
            text = await websocket.receive_text()
            try:
                answer = await _command(service, run_id, user, json.loads(text))
            except (ApiError, ReactorError) as exc:
                answer = _error(exc)
            except ValueError:
                answer = _error(ApiError(422, "Commands are JSON objects."))
            await websocket.send_json(answer)

    try:
        async with asyncio.TaskGroup() as group:
            sending = group.create_task(out())
            receiving = group.create_task(into())
            sending.add_done_callback(lambda _: receiving.cancel())
    except* (WebSocketDisconnect, RuntimeError):
        pass  # the client went away, or the socket closed under a send

"""A run's signals as they happen: Server-Sent Events, and the WebSocket channel.

``GET /api/runs/{id}/events`` streams one event per signal (``id:`` its ``seq``,
``data:`` the signal as JSON): the recorded history first, then each new signal, until
``harness:end`` closes the stream. A client that reconnects with ``Last-Event-ID``
gets what came after it. Following is bounded (:mod:`~reactor.service._api.follow`):
the history is read from the store page by page and written in pieces of at most
:data:`CHUNK` bytes, each awaited before the next is made; a run executing in this
process is then followed from its feed, one for all its clients (a burst of signals is
one write per client); a client that falls ``REACTOR_STREAM_BUFFER`` signals behind
it is disconnected (its stream ends: it reconnects with ``Last-Event-ID``), and so is
one whose write has been stuck for ``REACTOR_STREAM_WRITE_TIMEOUT`` seconds (its
connection is closed); past ``REACTOR_MAX_STREAMS`` streams at once a new one is
answered ``503``, past ``REACTOR_MAX_STREAMS_PER_USER`` of one principal ``429``.

``WS /api/runs/{id}/ws`` (``?after=SEQ`` to resume) is the WebSocket channel: the
same signals as messages (``{"type": "signal", "signal": {...}}``), and commands the
other way: ``{"type": "send", "name", "payload"}``, ``{"type": "reply", "prompt_id",
"answer"}`` and ``{"type": "abort", "reason"}``, each answered ``{"type": "ok", ...}``
or ``{"type": "error", "error", "detail"}``; following needs the ``viewer`` role,
each command the ``operator`` role. Past a cap it is closed with ``1013`` (try again
later), and so is a client that falls behind; a stuck one is closed. An ``after``
beyond the run's last signal follows what comes next (nothing, for a run that ended:
the channel closes ``1000`` at once).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Annotated, Any

import fastapi
from fastapi.responses import StreamingResponse
from starlette.requests import HTTPConnection
from starlette.responses import Response
from starlette.types import Receive, Scope, Send
from starlette.websockets import WebSocket, WebSocketDisconnect

from reactor._signals.diagnostics import log
from reactor.exceptions import ReactorError, RunNotFoundError
from reactor.service._access.roles import RoleGate, denied
from reactor.service._api.base import (
    CHECKS,
    KINDS,
    MAX_CURSOR,
    RETRY_AFTER,
    STATUSES,
    ApiError,
    Service,
    Viewer,
    error_response,
    principal_of,
    route_name,
    state_of,
)
from reactor.service._api.follow import (
    Batch,
    Delivered,
    Follow,
    Streams,
    deliver,
    known_run,
)
from reactor.service._api.runs import abort_run, post_signal, reply
from reactor.service._hosting.live import DEFAULT_BUFFER
from reactor.service._hosting.service import ReactionService
from reactor.service._objects.values import Principal

__all__ = ["CHUNK", "event_stream", "router", "run_signals", "streams_of", "ws_router"]

CHUNK = 64 * 1024
"""The most bytes one write of an event stream carries."""
TRY_AGAIN = 1013
"""The WebSocket close code of a refused or dropped stream: try again later."""

router = fastapi.APIRouter(prefix="/api/runs", tags=["runs"], dependencies=CHECKS)
ws_router = fastapi.APIRouter(prefix="/api/runs", tags=["runs"])


def streams_of(conn: HTTPConnection) -> Streams:
    """The app's streams (its cap and settings, made by ``create_app``)."""
    streams: Streams = conn.app.state.streams
    return streams


async def run_signals(
    service: ReactionService, run_id: str, after: int = 0, *, buffer: int = DEFAULT_BUFFER
) -> AsyncIterator[Batch]:
    """The run's signals after ``seq`` ``after``, in batches (pages, then live), until its end.

    Raises:
        FeedBehind: The caller took too long over a batch of the live run.
    """
    async for batch in Follow(service, run_id, after, buffer=buffer, heartbeat=None):
        if batch:
            yield batch


def _events(batch: Batch | None) -> Iterator[bytes]:
    """A batch as Server-Sent Events, in writes of at most :data:`CHUNK` bytes.

    The writes are made one at a time: a client stuck on one holds that one alone.
    """
    if batch is None:
        yield b": keep-alive\n\n"
        return
    pending: list[bytes] = []
    size = 0
    for seq, _, text in batch:
        event = f"id: {seq}\ndata: {text}\n\n".encode()
        if pending and size + len(event) > CHUNK:
            yield b"".join(pending)
            pending, size = [], 0
        if len(event) > CHUNK:  # one signal larger than a write: in pieces
            view = memoryview(event)
            for start in range(0, len(event), CHUNK):
                yield bytes(view[start : start + CHUNK])
            continue
        pending.append(event)
        size += len(event)
    if pending:
        yield b"".join(pending)


class EventStream(Response):
    """A run's signals as Server-Sent Events, under the app's cap (an ASGI response).

    The stream takes a place under the cap when it begins (``503`` with
    ``Retry-After`` when there is none) and gives it back when it ends, when its
    client goes away (a disconnect cancels it at once), and when its client falls
    behind (its last write is cancelled: the stream holds nothing of the run any more).
    """

    media_type = "text/event-stream"

    def __init__(self, follow: Follow, streams: Streams, who: str) -> None:
        self.follow, self.streams, self.who = follow, streams, who
        self.status_code = 200
        self.background = None
        self.init_headers({"Cache-Control": "no-store", "X-Accel-Buffering": "no"})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        slot = self.streams.take(self.who)
        if slot is None:
            status, detail = self.streams.refusal(self.who)
            refused = error_response(status, detail, {"Retry-After": str(RETRY_AFTER)})
            await refused(scope, receive, send)
            return
        try:
            async with asyncio.TaskGroup() as group:
                streaming = group.create_task(self._stream(send, slot.release))
                listening = group.create_task(_disconnected(receive))
                streaming.add_done_callback(lambda _: listening.cancel())
                listening.add_done_callback(lambda _: streaming.cancel())
        finally:
            slot.release()

    async def _stream(self, send: Send, release: Callable[[], None]) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})

        async def write(batch: Batch | None) -> None:
            for chunk in _events(batch):
                await send({"type": "http.response.body", "body": chunk, "more_body": True})

        outcome = await _delivered(self.follow, write, self.streams.settings.write_timeout)
        release()  # nothing is held any more: a client that does not read waits alone
        if outcome == "stuck":
            return  # unfinished: the server closes the connection (one line of its own)
        await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _delivered(
    follow: Follow, write: Callable[[Batch | None], Awaitable[None]], stuck_after: float
) -> Delivered | None:
    """Deliver ``follow`` with ``write``; how it ended (``None``: the store failed).

    A client behind, a client stuck on a write for ``stuck_after`` seconds, or a store
    that cannot be read (its database away) ends the stream: the client reconnects
    from its last signal.
    """
    try:
        outcome = await deliver(follow, write, stuck_after)
    except WebSocketDisconnect:
        raise  # the client went away: nothing to say
    except Exception as exc:
        log("reactor.service", "warning", "stream ended", run_id=follow.run_id, error=repr(exc))
        return None
    if outcome != "end":
        log(
            "reactor.service",
            "info",
            f"stream client {outcome}",
            run_id=follow.run_id,
            last_seq=follow.last,
            stuck_after_s=stuck_after,
        )
    return outcome


async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


async def _known(service: ReactionService, run_id: str) -> None:
    """Raise ``RunNotFoundError`` (404) unless the run exists (its log is not read)."""
    if not await known_run(service, run_id):
        raise RunNotFoundError(f"No recorded run {run_id!r}.")


@router.get(
    "/{run_id}/events",
    response_class=StreamingResponse,
    responses={200: {"content": {"text/event-stream": {}}}},
)
async def events(
    run_id: str,
    request: fastapi.Request,
    service: Service,
    principal: Viewer,
    last_event_id: Annotated[
        int | None, fastapi.Header(alias="Last-Event-ID", ge=0, le=MAX_CURSOR)
    ] = None,
) -> Response:
    """The run's signals as Server-Sent Events: history, then live, until ``harness:end``.

    429 when the caller follows ``REACTOR_MAX_STREAMS_PER_USER`` streams already, 503
    when the process streams ``REACTOR_MAX_STREAMS``.
    """
    await _known(service, run_id)  # 404 before the stream starts
    return event_stream(request, run_id, last_event_id or 0, who=principal.id)


def event_stream(conn: HTTPConnection, run_id: str, after: int = 0, *, who: str) -> Response:
    """A run's signals after ``seq`` ``after`` as Server-Sent Events (the API's and the UI's).

    ``who``: the principal following it (its streams are counted).
    """
    streams = streams_of(conn)
    state = state_of(conn)
    follow = Follow(
        state.service, run_id, after, buffer=streams.settings.buffer, stopping=state.stopping
    )
    return EventStream(follow, streams, who)


async def _close(websocket: WebSocket, code: int, reason: str, within: float) -> None:
    """Close the socket; a client too stuck to take the close frame is left to the server."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(within):
            await websocket.close(code=code, reason=reason)


def _error(exc: BaseException) -> dict[str, Any]:
    if isinstance(exc, ApiError):
        status = exc.status
    else:
        status = next((code for kind, code in STATUSES if isinstance(exc, kind)), 500)
    return {"type": "error", "error": KINDS.get(status, "error"), "detail": str(exc)}


async def _command(
    service: ReactionService, run_id: str, principal: Principal, message: Any
) -> dict[str, Any]:
    """Carry out one command of the channel; its answer (each needs the ``operator`` role)."""
    if not isinstance(message, dict) or message.get("type") not in ("send", "reply", "abort"):
        raise ApiError(
            422, 'Send {"type": "send" | "reply" | "abort", ...}; see the API docs for the fields.'
        )
    kind = message["type"]
    if not principal.may("operator"):
        raise denied(principal, "operator", f"The {kind!r} command of WS /api/runs/{{run_id}}/ws")
    user = principal.user
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


class Following(RoleGate):
    """The WebSocket channel's declared role: ``viewer``, to follow a run.

    The handler checks it (a refused socket is closed ``1008``); each command needs
    ``operator`` besides.
    """

    def __init__(self) -> None:
        super().__init__("viewer")

    async def __call__(self) -> None:
        """Nothing here: a WebSocket is refused by closing it, in the handler."""


async def _admitted(websocket: WebSocket, run_id: str) -> Principal | None:
    """The principal of a WebSocket that may follow the run; None once it is closed ``1008``."""
    try:
        principal = await principal_of(websocket)
        if not principal.may("viewer"):
            raise denied(principal, "viewer", route_name(websocket))
        await _known(state_of(websocket).service, run_id)
    except (ApiError, ReactorError) as exc:
        await websocket.close(code=1008, reason=str(exc)[:120])
        return None
    return principal


@ws_router.websocket("/{run_id}/ws", dependencies=[fastapi.Depends(Following())])
async def channel(
    websocket: WebSocket, run_id: str, after: Annotated[int, fastapi.Query(ge=0, le=MAX_CURSOR)] = 0
) -> None:
    """The WebSocket channel of a run: its signals out (after ``seq`` ``after``), commands in."""
    principal = await _admitted(websocket, run_id)
    if principal is None:
        return
    state = state_of(websocket)
    streams = streams_of(websocket)
    slot = streams.take(principal.id)
    await websocket.accept()
    if slot is None:
        await websocket.close(code=TRY_AGAIN, reason=streams.refusal(principal.id)[1][:120])
        return
    service = state.service
    follow = Follow(service, run_id, after, buffer=streams.settings.buffer, stopping=state.stopping)

    async def write(batch: Batch | None) -> None:
        for _, _, text in batch or ():
            await websocket.send_text(f'{{"type": "signal", "signal": {text}}}')

    async def out() -> None:
        outcome = await _delivered(follow, write, streams.settings.write_timeout)
        slot.release()
        if outcome == "end":
            await _close(websocket, 1000, "", streams.settings.write_timeout)
            return
        reason = f"The stream ended early; reconnect with ?after={follow.last}."
        await _close(websocket, TRY_AGAIN, reason, streams.settings.write_timeout)

    async def into() -> None:
        while True:
            text = await websocket.receive_text()
            try:
                answer = await _command(service, run_id, principal, json.loads(text))
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
    finally:
        slot.release()

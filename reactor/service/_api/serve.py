"""``reactor serve``: a service's HTTP API on uvicorn, stopped gracefully on SIGTERM.

Settings are read once (:class:`ServeSettings`): the command line, then the
environment (:class:`~reactor.service.Settings`: ``REACTOR_API_TOKENS``,
``REACTOR_API_TOKENS_FILE``, ``REACTOR_DB``, ``REACTOR_OTEL``...; all of them
in docs/configuration.md), then defaults.

On SIGTERM (or Ctrl-C) the service stops taking work, gives in-flight reactions and
runs ``grace`` seconds, holds the runs still going (they resume at the next start),
flushes the log, and the process exits with status 0.

uvicorn logs through the root logger, in whatever format the application chose (the
``reactor`` CLI: ``--log-format``), and each request is one line of :class:`AccessLog`.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import signal
import socket
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import FrameType
from typing import Any

import fastapi
import pydantic
import uvicorn

from reactor._signals.diagnostics import log
from reactor._signals.settings import Settings, settings
from reactor.exceptions import ServiceConfigError
from reactor.service._access.authenticators import Authenticator, LocalAuth
from reactor.service._access.tokens import TokenAuth
from reactor.service._api.app import Lifecycle, create_app
from reactor.service._api.guard import AccessLog
from reactor.service._hosting.service import ReactionService
from reactor.service._hosting.telemetry import telemetry_from_env
from reactor.service._objects.db import DEFAULT_URL

__all__ = ["UVICORN_OPTIONS", "ServeSettings", "is_loopback", "serve"]

UVICORN_OPTIONS: dict[str, Any] = {
    "lifespan": "on",
    "log_level": "info",
    "log_config": None,
    "access_log": False,
}
"""How uvicorn serves the app (the benchmarks serve their baseline app the same way).

uvicorn configures no logging of its own (``log_config=None``): its lines go to the root
logger, which the application routes (``reactor serve`` through structlog, in the format
``--log-format`` chose). Its plain-text access lines are off: :class:`AccessLog` writes
reactor's, with the time taken and the caller.
"""


class ServeSettings(pydantic.BaseModel):
    """How ``reactor serve`` runs: where it listens, its database, its tokens, its grace.

    Attributes:
        host: The address to listen on; anything but a loopback address needs tokens.
        port: The port.
        db: The service's database URL.
        grace: Seconds in-flight work is given on SIGTERM.
        tokens: ``token:user[:role+role]`` entries (``REACTOR_API_TOKENS``).
        tokens_file: A file of such lines (``REACTOR_API_TOKENS_FILE``).
        config: The ``REACTOR_*`` settings it was read with (``REACTOR_AUTH`` and the
            ``REACTOR_JWT_*`` ones say how requests are authenticated).
    """

    model_config = pydantic.ConfigDict(frozen=True)

    host: str = "127.0.0.1"
    port: int = pydantic.Field(default=8000, ge=0, le=65535)
    db: str = DEFAULT_URL
    grace: float = pydantic.Field(default=30.0, ge=0)
    tokens: str | None = pydantic.Field(default=None, repr=False)
    tokens_file: Path | None = None
    config: Settings | None = pydantic.Field(default=None, repr=False, exclude=True)

    @classmethod
    def read(cls, given: Mapping[str, object], config: Settings | None = None) -> ServeSettings:
        """The settings from ``given`` (options that were set), then ``config``.

        ``config``: the ``REACTOR_*`` settings (by default the process's).

        Raises:
            ServiceConfigError: A ``REACTOR_*`` value is bad (one line per bad variable).
        """
        config = settings() if config is None else config
        tokens = config.api_tokens
        fields: dict[str, object] = {
            "tokens": None if tokens is None else tokens.get_secret_value(),
            "tokens_file": config.api_tokens_file,
            "db": config.service_db,
            "config": config,
        }
        fields.update({key: value for key, value in given.items() if value is not None})
        return cls.model_validate(fields)

    def api_tokens(self) -> TokenAuth:
        """Every configured token.

        Raises:
            ServiceConfigError: A tokens file cannot be read, or an entry is malformed.
        """
        sets = [TokenAuth.parse(self.tokens)] if self.tokens else []
        if self.tokens_file is not None:
            sets.append(TokenAuth.read(self.tokens_file))
        return TokenAuth.combine(sets)

    def authenticator(self) -> Authenticator:
        """Who authenticates the requests: JWTs, the tokens, or the local admin.

        JWTs when ``REACTOR_AUTH=jwt``; the tokens when there are any; with neither, the
        local admin (a loopback address only).

        Raises:
            ServiceConfigError: The tokens or the ``REACTOR_JWT_*`` settings are unusable.
        """
        if self.config is not None and self.config.auth == "jwt":
            from reactor.service._access.jwts import JWTAuth  # PyJWT: only when it is used

            return JWTAuth.from_settings(self.config)
        tokens = self.api_tokens()
        return tokens if tokens else LocalAuth()


def is_loopback(host: str) -> bool:
    """Whether ``host`` is reachable from this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class _Server(uvicorn.Server):
    """uvicorn, with stopping begun at the signal and no signal raised again afterwards.

    uvicorn re-raises a caught SIGTERM once it has shut down (so the process dies of
    it); a service that stopped gracefully exits with status 0 instead.
    """

    def __init__(self, config: uvicorn.Config, app: fastapi.FastAPI) -> None:
        super().__init__(config)
        self.served = app
        self.loop: asyncio.AbstractEventLoop | None = None

    async def serve(self, sockets: list[object] | None = None) -> None:  # type: ignore[override]
        self.loop = asyncio.get_running_loop()
        await super().serve(sockets)  # type: ignore[arg-type]

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        handled = (signal.SIGINT, signal.SIGTERM)
        originals = {sig: signal.signal(sig, self.handle_exit) for sig in handled}
        try:
            yield
        finally:
            for sig, handler in originals.items():
                signal.signal(sig, handler)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        super().handle_exit(sig, frame)
        lifecycle: Lifecycle | None = getattr(self.served.state, "lifecycle", None)
        if lifecycle is not None and self.loop is not None:
            self.loop.call_soon_threadsafe(lifecycle.stop)


def serve(service: ReactionService, settings: ServeSettings) -> int:
    """Serve ``service`` until SIGTERM or Ctrl-C; the exit status.

    Raises:
        ServiceConfigError: A non-loopback ``host`` and no tokens, unreadable tokens, or
            ``REACTOR_OTEL=1`` without the ``otel`` extra.
    """
    authenticator = settings.authenticator()
    if isinstance(authenticator, LocalAuth) and not is_loopback(settings.host):
        raise ServiceConfigError(
            f"Refusing to serve on {settings.host} without API tokens: anyone who can reach "
            "it could act as any user. Set REACTOR_API_TOKENS='token:user,...' or "
            "--tokens-file (or REACTOR_AUTH=jwt), or listen on 127.0.0.1."
        )
    if isinstance(authenticator, LocalAuth):
        log(
            "reactor.service",
            "warning",
            "no API tokens: every request acts as the user 'local', an admin (loopback only)",
            host=settings.host,
        )
    telemetry = telemetry_from_env()
    if telemetry is not None:
        service.reporters.append(telemetry.reporter)
    app = create_app(service, authenticator=authenticator, grace=settings.grace, bind=settings.host)
    config = uvicorn.Config(
        AccessLog(app, app.state.metrics.request),
        host=settings.host,
        port=settings.port,
        timeout_graceful_shutdown=max(int(settings.grace), 1),
        **UVICORN_OPTIONS,
    )
    listening = _bind(settings.host, settings.port)  # before the service starts anything
    log("reactor.service", "info", "listening", url=_url(listening))
    server = _Server(config, app)
    try:
        asyncio.run(server.serve(sockets=[listening]))
    finally:
        listening.close()
        if telemetry is not None:
            telemetry.close()  # the spans still batched are exported
    return 0 if server.started else 1


def _url(listening: socket.socket) -> str:
    """The address a bound socket is served at (its real port, also for ``--port 0``)."""
    host, port = listening.getsockname()[:2]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def _bind(host: str, port: int) -> socket.socket:
    """The listening socket, bound first: a port in use is said before anything starts.

    Raises:
        ServiceConfigError: The address cannot be bound (in use, or not this machine's).
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP said, or asyncio leaves Nagle on for the accepted connections (TCP_NODELAY
    # is set only on sockets whose proto is TCP): each answer would wait 40 ms for an ACK.
    listening = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listening.bind((host, port))
    except OSError as exc:
        listening.close()
        raise ServiceConfigError(
            f"Cannot listen on {host}:{port} ({exc.strerror or exc}); stop what uses the "
            "port, or choose another with --port."
        ) from None
    listening.set_inheritable(True)
    return listening

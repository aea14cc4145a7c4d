"""The environment's vocabulary: every ``REACTOR_*`` variable, read once, typed and checked.

:class:`Settings` (pydantic-settings) is the only reader of ``REACTOR_*`` variables in
the library, the command line and the service; docs/configuration.md lists them all.
:func:`settings` reads the process's environment once and keeps the result; a bad
value is a :class:`~reactor.exceptions.ServiceConfigError` (a ``ValueError``) whose
message has one line per bad variable, every one listed::

    REACTOR_MAX_STREAMS='abc': must be a whole number >= 1

An empty variable counts as unset. The public home of the class is
``reactor.service.Settings``; it lives here, at the bottom, because the engine (the
longest template), the command line (the run database) and the service all read it,
and it needs neither FastAPI nor anything else of the service stack.
"""

from __future__ import annotations

import contextvars
import difflib
import functools
import math
import os
import re
from collections.abc import Iterator, Mapping
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

import pydantic
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from reactor._signals.diagnostics import log
from reactor.exceptions import ServiceConfigError

__all__ = [
    "ENV_PREFIX",
    "Settings",
    "database_location",
    "masked_url",
    "parse_duration",
    "settings",
    "settings_from",
    "token_entries",
    "token_entry_problem",
]

ENV_PREFIX = "REACTOR_"
Source = Literal["default", "env", "option"]
"""Where a setting's value came from."""

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_ON = frozenset({"1", "true", "yes", "on"})
_OFF = frozenset({"0", "false", "no", "off"})
_DB_SCHEMES = ("sqlite", "postgresql", "postgres")
_DB_DRIVERS = ("", "pysqlite", "aiosqlite", "psycopg", "psycopg2")
DB_FORMS = "a file path, sqlite:///path.db or postgresql://user@host:5432/dbname"
"""What ``--db``, ``REACTOR_DB`` and ``REACTOR_SERVICE_DB`` take."""


def parse_duration(text: str) -> timedelta:
    """A duration written ``30d``, ``12h``, ``90m``, ``45s`` or ``2w``.

    Raises:
        ValueError: It is not a whole number followed by one of those units.
    """
    value = text.strip().lower() if isinstance(text, str) else ""
    number, unit = value[:-1], value[-1:]
    if unit not in _UNITS or not number.isdigit():
        raise ValueError(
            f"{text!r} is not a duration; write a whole number and a unit: 30d (days), "
            "12h (hours), 90m (minutes), 45s (seconds) or 2w (weeks)."
        )
    try:
        return timedelta(seconds=int(number) * _UNITS[unit])
    except OverflowError:
        raise ValueError(
            f"{text!r} is longer than any duration this can keep (about 2.7 million years); "
            "write a shorter one, e.g. 52w."
        ) from None


def database_location(text: str, *, memory: bool = False) -> Path | str:
    """A database as ``--db`` and ``REACTOR_DB`` name it: a SQLite file's path, or a URL.

    ``sqlite:///runs.db`` (``sqlite:////abs/runs.db`` for an absolute path) and a plain
    path are both the file's :class:`~pathlib.Path`; a ``postgresql://`` (or
    ``postgres://``) URL is kept as text, without a SQLAlchemy driver suffix. With
    ``memory``, ``sqlite://`` (a database in memory, a service's for a test) is kept
    as text too.

    Raises:
        ValueError: A URL of another kind, or a SQLite URL that names no file.
    """
    text = text.strip()
    scheme, sep, rest = text.partition("://")
    if not sep:
        if not text:
            raise ValueError(f"names no database; use {DB_FORMS}")
        return Path(text)
    backend, _, driver = scheme.lower().partition("+")
    if backend not in _DB_SCHEMES or driver not in _DB_DRIVERS:
        raise ValueError(f"is not a database this can use; use {DB_FORMS}")
    if backend != "sqlite":
        return f"{backend}://{rest}"
    path = rest[1:] if rest.startswith("/") else rest
    if memory and path in ("", ":memory:"):
        return text
    if not rest.startswith("/") or path in ("", ":memory:") or "?" in path:
        raise ValueError(f"names no SQLite file; use {DB_FORMS}")
    return Path(path)


_SECRET_PARAMETERS = frozenset(
    {
        "password",
        "passwd",
        "pwd",
        "sslpassword",
        "token",
        "access_token",
        "auth",
        "secret",
        "client_secret",
        "api_key",
        "apikey",
    }
)
"""Query-string parameters whose values are secrets (PostgreSQL and Redis take ``password``
and ``sslpassword`` there, as other services take tokens)."""


def masked_url(url: str) -> str:
    """``url`` as it may be shown: its password and query-string secrets as ``***``.

    ``postgresql://app:s3cret@db/app?sslpassword=k3y&sslmode=require`` is shown as
    ``postgresql://app:***@db/app?sslpassword=***&sslmode=require``.
    """
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    rest, hash_, fragment = rest.partition("#")
    rest, question, query = rest.partition("?")
    authority, slash, path = rest.partition("/")
    user, at, host = authority.rpartition("@")
    if at and ":" in user:
        authority = f"{user.partition(':')[0]}:***@{host}"
    if question:
        query = "&".join(_masked_parameter(part) for part in query.split("&"))
    return f"{scheme}://{authority}{slash}{path}{question}{query}{hash_}{fragment}"


def _masked_parameter(part: str) -> str:
    name, equals, value = part.partition("=")
    if equals and value and name.strip().lower() in _SECRET_PARAMETERS:
        return f"{name}=***"
    return part


def _text(value: object) -> str:
    return value.strip() if isinstance(value, str) else str(value)


def _whole(value: object) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return value
    text = _text(value)
    if not (text.isascii() and text.isdigit()) or int(text) < 1:
        raise ValueError("must be a whole number >= 1")
    return int(text)


def _switch(value: object) -> bool:
    if isinstance(value, bool):
        return value
    text = _text(value).lower()
    if text in _ON or text in _OFF:
        return text in _ON
    raise ValueError("is neither on nor off: set it to 1 for on, or 0 (or unset it) for off")


def _seconds(value: object) -> float:
    if isinstance(value, timedelta):
        value = value.total_seconds()
    if isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value)
    else:
        text = _text(value)
        try:
            seconds = float(text)
        except ValueError:
            try:
                seconds = parse_duration(text).total_seconds()
            except ValueError:
                seconds = math.nan
    if not (math.isfinite(seconds) and seconds > 0):
        raise ValueError("must be a number of seconds above 0 (30, 2.5) or a duration (45s, 2m)")
    return seconds


def _duration(value: object) -> timedelta:
    if isinstance(value, timedelta):
        return value
    try:
        return parse_duration(_text(value))
    except ValueError:
        raise ValueError(
            "is not a duration: write a whole number and a unit, 30d (days), 12h (hours), "
            "90m (minutes), 45s (seconds) or 2w (weeks)"
        ) from None


def _database(value: object) -> str:
    text = _text(value)
    database_location(text)  # raises ValueError with what to write instead
    return text


def _service_database(value: object) -> str:
    text = _text(value)
    database_location(text, memory=True)
    return text


def _redis_prefix(value: object) -> str:
    text = _text(value)
    if not re.fullmatch(r"[A-Za-z0-9_.:-]{1,64}", text):
        raise ValueError("must be 1 to 64 letters, digits, '_', '-', '.' or ':' (e.g. desk-eu)")
    return text


def _dollars(value: object) -> float:
    text = _text(value)
    try:
        amount = float(text)
    except ValueError:
        raise ValueError("must be an amount of US dollars above 0 (12.5)") from None
    if not (amount > 0 and math.isfinite(amount)):
        raise ValueError("must be an amount of US dollars above 0 (12.5)")
    return amount


def _same_database(one: str, other: str) -> bool:
    """Whether two spellings name one database (``runs.db`` and ``sqlite:///runs.db``)."""
    try:
        return database_location(one, memory=True) == database_location(other, memory=True)
    except ValueError:
        return one == other


def _redis(value: object) -> str:
    text = _text(value)
    if not text.startswith(("redis://", "rediss://", "unix://")):
        raise ValueError("must be a Redis URL like redis://127.0.0.1:6379/0")
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018  # reading it checks it: a port that is not a number raises
        _redis_options(text)
    except ValueError as exc:
        raise ValueError(
            f"is not a URL Redis can use ({exc}); write it like redis://:password@host:6379/0"
        ) from None
    database = parts.path.strip("/")
    if parts.scheme != "unix" and not (database == "" or database.isdigit()):
        raise ValueError(f"names the database {database!r}; Redis databases are numbers (/0)")
    return text


def _redis_options(url: str) -> None:
    """Read ``url`` as redis-py will (its query options too), where it is installed."""
    try:
        from redis.connection import parse_url
    except ImportError:  # without the scaleout extra nothing connects to Redis
        return
    parse_url(url)  # type: ignore[no-untyped-call]  # redis-py leaves it unannotated


def _hosts(value: object) -> tuple[str, ...]:
    if isinstance(value, tuple | list):
        return tuple(str(host) for host in value)
    return tuple(host.strip() for host in _text(value).split(",") if host.strip())


ROLE_NAMES = ("viewer", "operator", "approver", "admin")
"""The roles a principal may hold (``reactor.service.Role``), spelled here too: a token
line's roles are checked when the settings are read."""


def token_entry_problem(entry: str) -> str | None:
    """Why ``entry`` is not ``token:user`` or ``token:user:role+role`` (None when it is)."""
    parts = entry.split(":")
    if len(parts) not in (2, 3) or not all(part.strip() for part in parts):
        return (
            "is not token:user_id or token:user_id:role+role; write entries such as "
            "s3cret:alice or s3cret:alice:approver+operator (no ':' in tokens or user ids)"
        )
    if len(parts) == 3:
        unknown = [role for role in parts[2].split("+") if role.strip() not in ROLE_NAMES]
        if unknown:
            return (
                f"names the unknown role(s) {', '.join(repr(role) for role in unknown)}; "
                f"the roles are {', '.join(ROLE_NAMES)}"
            )
    return None


def token_entries(text: str) -> list[str]:
    """The entries of a tokens text: separated by commas or new lines, ``#`` comments."""
    entries = (e.strip() for line in text.splitlines() for e in line.split("#", 1)[0].split(","))
    return [entry for entry in entries if entry]


def _tokens(value: object) -> pydantic.SecretStr:
    secret = value if isinstance(value, pydantic.SecretStr) else None
    text = secret.get_secret_value() if secret is not None else _text(value)
    for number, entry in enumerate(token_entries(text), start=1):
        problem = token_entry_problem(entry)
        if problem is not None:
            raise ValueError(f"entry {number} {problem}")
    return secret if secret is not None else pydantic.SecretStr(text)


def _auth(value: object) -> str:
    text = _text(value).lower()
    if text not in ("tokens", "jwt"):
        raise ValueError(
            "is not a way to authenticate: set it to tokens (REACTOR_API_TOKENS, the "
            "default) or jwt (bearer JWTs, with REACTOR_JWT_JWKS_URL or REACTOR_JWT_PUBLIC_KEY)"
        )
    return text


def _claim(value: object) -> str:
    text = _text(value)
    if not text:
        raise ValueError("must name a claim of the tokens, such as roles")
    return text


def _secret(value: object) -> pydantic.SecretStr:
    if isinstance(value, pydantic.SecretStr):
        return value
    text = _text(value)
    if len(text.encode()) < 16:
        raise ValueError("must be a secret of at least 16 bytes (e.g. `openssl rand -hex 32`)")
    return pydantic.SecretStr(text)


Whole = Annotated[int, pydantic.BeforeValidator(_whole)]
Switch = Annotated[bool, pydantic.BeforeValidator(_switch)]
Seconds = Annotated[float, pydantic.BeforeValidator(_seconds)]
_SECRET = {"api_tokens", "audit_key"}
_URLS = {"db", "service_db", "redis_url"}


class Settings(BaseSettings):
    """Every ``REACTOR_*`` variable, typed and checked (docs/configuration.md lists them).

    ``Settings()`` reads the process's environment; :func:`settings` does it once per
    process and keeps the result. Options given to the constructor win over the
    environment (``Settings(service_db=...)``, as ``reactor serve --db`` does).

    Attributes:
        db: ``REACTOR_DB``: the database of every command: the runs of ``reactor run``,
            ``runs``, ``show``..., and the service's of ``reactor serve``, ``worker``.
        service_db: The service's database: ``REACTOR_DB`` when it is set, else its older
            name ``REACTOR_SERVICE_DB`` (an alias), else ``.reactor/app.db``.
        redis_url: ``REACTOR_REDIS_URL``: the job queue (scale-out) and shared rate limits.
        redis_prefix: ``REACTOR_REDIS_PREFIX``: what the service's keys in Redis begin with.
        reclaim_after: ``REACTOR_RECLAIM_AFTER``: seconds before a silent job is taken over.
        retention: ``REACTOR_RETENTION``: how long ended runs are kept (``None``: always).
        api_tokens: ``REACTOR_API_TOKENS``: ``token:user`` pairs (a secret).
        api_tokens_file: ``REACTOR_API_TOKENS_FILE``: a file of ``token:user`` lines.
        allowed_hosts: ``REACTOR_ALLOWED_HOSTS``: more host names the service answers to.
        max_body: ``REACTOR_MAX_BODY``: the largest request body, in bytes.
        stream_buffer: ``REACTOR_STREAM_BUFFER``: signals a run's feed keeps.
        max_streams: ``REACTOR_MAX_STREAMS``: streams (SSE, WebSocket) at once.
        max_streams_per_user: ``REACTOR_MAX_STREAMS_PER_USER``: streams of one principal.
        stream_write_timeout: ``REACTOR_STREAM_WRITE_TIMEOUT``: seconds a follower's
            write may block before its stream is closed.
        max_reason: ``REACTOR_MAX_REASON``: the longest reason, justification or reply
            text, in bytes (UTF-8).
        auth: ``REACTOR_AUTH``: how requests are authenticated (``tokens`` or ``jwt``).
        jwt_jwks_url: ``REACTOR_JWT_JWKS_URL``: where the JWTs' signing keys are published.
        jwt_public_key: ``REACTOR_JWT_PUBLIC_KEY``: the JWTs' public key (PEM, or a path).
        jwt_audience: ``REACTOR_JWT_AUDIENCE``: the ``aud`` the JWTs must carry.
        jwt_issuer: ``REACTOR_JWT_ISSUER``: the ``iss`` the JWTs must carry.
        jwt_roles_claim: ``REACTOR_JWT_ROLES_CLAIM``: the claim that lists the roles.
        metrics_public: ``REACTOR_METRICS_PUBLIC``: ``GET /metrics`` answers without a
            token (else it needs a ``viewer``'s).
        otel: ``REACTOR_OTEL``: trace every run a service or worker executes.
        otel_capture_content: ``REACTOR_OTEL_CAPTURE_CONTENT``: spans hold prompts too.
        max_template_chars: ``REACTOR_MAX_TEMPLATE_CHARS``: the longest rendered template.
        handler_threads: ``REACTOR_HANDLER_THREADS``: threads for synchronous handlers
            and tools.
        spend_cap_usd: ``REACTOR_SPEND_CAP_USD``: what the reaction agents' model calls
            may cost together per period; past it their events are held.
        spend_cap_per: ``REACTOR_SPEND_CAP_PER``: that period (an hour by default).
        audit_key: ``REACTOR_AUDIT_KEY``: the key of the hash chains (HMAC-SHA-256; a secret).
        audit_chain: ``REACTOR_AUDIT_CHAIN``: whether what is written is hash-chained.
    """

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_ignore_empty=True,
        frozen=True,
        extra="forbid",
        validate_default=False,  # the defaults are right as written
    )

    db: Annotated[str, pydantic.BeforeValidator(_database)] = pydantic.Field(
        ".reactor/runs.db",
        description="the run database of reactor run, runs, show, replay, resume, fork, "
        "diff, eval (when --db is not given)",
    )
    service_db: Annotated[str, pydantic.BeforeValidator(_service_database)] = pydantic.Field(
        "sqlite:///.reactor/app.db",
        description="the database of reactor serve, reactor worker and reactor db",
    )
    redis_url: Annotated[str | None, pydantic.BeforeValidator(_redis)] = pydantic.Field(
        None, description="the job queue of serve and worker; shared rate limits"
    )
    redis_prefix: Annotated[str, pydantic.BeforeValidator(_redis_prefix)] = pydantic.Field(
        "reactor",
        description="what the service's keys in Redis begin with: two apps on one Redis "
        "keep apart by it",
    )
    reclaim_after: Seconds = pydantic.Field(
        30.0, description="seconds a job may stay silent before another worker takes it"
    )
    retention: Annotated[timedelta | None, pydantic.BeforeValidator(_duration)] = pydantic.Field(
        None, description="how long the service keeps runs after they end"
    )
    api_tokens: Annotated[pydantic.SecretStr | None, pydantic.BeforeValidator(_tokens)] = (
        pydantic.Field(None, description="token:user pairs for the HTTP API", repr=False)
    )
    api_tokens_file: Annotated[Path | None, pydantic.BeforeValidator(_text)] = pydantic.Field(
        None, description="a file of token:user lines for the HTTP API"
    )
    allowed_hosts: Annotated[tuple[str, ...], NoDecode, pydantic.BeforeValidator(_hosts)] = (
        pydantic.Field((), description="more host names the service answers to (*: any)")
    )
    max_body: Whole = pydantic.Field(1024 * 1024, description="the largest request body, bytes")
    stream_buffer: Whole = pydantic.Field(
        1000, description="signals a run's feed keeps; a follower that far behind is dropped"
    )
    max_streams: Whole = pydantic.Field(
        256, description="Server-Sent Event and WebSocket streams at once"
    )
    max_streams_per_user: Whole = pydantic.Field(
        16, description="Server-Sent Event and WebSocket streams of one principal at once"
    )
    stream_write_timeout: Seconds = pydantic.Field(
        30.0, description="seconds a follower's write may block before its stream is closed"
    )
    max_reason: Whole = pydantic.Field(
        4096, description="the longest reason, justification or reply text, in bytes"
    )
    auth: Annotated[Literal["tokens", "jwt"], pydantic.BeforeValidator(_auth)] = pydantic.Field(
        "tokens", description="how requests are authenticated: API tokens or bearer JWTs"
    )
    jwt_jwks_url: Annotated[str | None, pydantic.BeforeValidator(_text)] = pydantic.Field(
        None, description="the JWKS URL the JWTs' signing keys are fetched from"
    )
    jwt_public_key: Annotated[str | None, pydantic.BeforeValidator(_text)] = pydantic.Field(
        None, description="the JWTs' public key: PEM text or the path of a PEM file", repr=False
    )
    jwt_audience: Annotated[str | None, pydantic.BeforeValidator(_text)] = pydantic.Field(
        None, description="the audience (aud) the JWTs must name"
    )
    jwt_issuer: Annotated[str | None, pydantic.BeforeValidator(_text)] = pydantic.Field(
        None, description="the issuer (iss) the JWTs must name"
    )
    jwt_roles_claim: Annotated[str, pydantic.BeforeValidator(_claim)] = pydantic.Field(
        "roles", description="the JWT claim that lists the principal's roles"
    )
    metrics_public: Switch = pydantic.Field(
        False, description="GET /metrics answers without a token (else a viewer's is needed)"
    )
    otel: Switch = pydantic.Field(False, description="trace every run with OpenTelemetry")
    otel_capture_content: Switch = pydantic.Field(
        False, description="spans hold prompts and answers too"
    )
    max_template_chars: Whole = pydantic.Field(
        4_000_000, description="the longest text a prompt or guard template may render"
    )
    handler_threads: Whole = pydantic.Field(
        32, description="threads that run agents' synchronous run= handlers and tools"
    )
    spend_cap_usd: Annotated[float | None, pydantic.BeforeValidator(_dollars)] = pydantic.Field(
        None, description="what every reaction agent's model calls may cost together per period"
    )
    spend_cap_per: Annotated[timedelta, pydantic.BeforeValidator(_duration)] = pydantic.Field(
        timedelta(hours=1), description="the period of REACTOR_SPEND_CAP_USD"
    )
    audit_key: Annotated[pydantic.SecretStr | None, pydantic.BeforeValidator(_secret)] = (
        pydantic.Field(None, description="the key the hash chains are made with", repr=False)
    )
    audit_chain: Switch = pydantic.Field(
        True, description="hash-chain the signals, the processing history and object events"
    )

    _options: frozenset[str] = pydantic.PrivateAttr(frozenset())

    @pydantic.model_validator(mode="before")
    @classmethod
    def _one_database(cls, data: Any) -> Any:
        """``REACTOR_DB`` names the database of every command; ``REACTOR_SERVICE_DB`` too.

        One given stands for both; both given must name the same database.
        """
        if not isinstance(data, dict):
            return data
        db, service = data.get("db"), data.get("service_db")
        if db is not None and service is None:
            return {**data, "service_db": db}
        if service is not None and db is None:
            return {**data, "db": service}
        if db is not None and not _same_database(_text(db), _text(service)):
            raise ValueError(
                f"REACTOR_DB={masked_url(_text(db))!r} and REACTOR_SERVICE_DB (its older "
                f"name)={masked_url(_text(service))!r} name different databases; set "
                "REACTOR_DB alone"
            )
        return data

    def __init__(self, **options: Any) -> None:
        try:
            super().__init__(**options)
        except pydantic.ValidationError as exc:
            raise ServiceConfigError(_lines(exc, options)) from None
        self._options = frozenset(options)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Options, then the environment (the one :meth:`from_environ` was given, if so)."""
        environ = _GIVEN.get()
        return (init_settings, env_settings if environ is None else _Given(settings_cls, environ))

    @classmethod
    def from_environ(cls, environ: Mapping[str, str], **options: Any) -> Settings:
        """The settings ``environ`` (not the process's environment) gives, then ``options``.

        Raises:
            ServiceConfigError: A value is bad (one line per bad variable).
        """
        token = _GIVEN.set(environ)
        try:
            return cls(**options)
        finally:
            _GIVEN.reset(token)

    def __repr_args__(self) -> Iterator[tuple[str | None, Any]]:
        for name, value in super().__repr_args__():
            yield name, masked_url(value) if name in _URLS and isinstance(value, str) else value

    @staticmethod
    def variable(field: str) -> str:
        """The environment variable of a field: ``max_streams`` -> ``REACTOR_MAX_STREAMS``."""
        return f"{ENV_PREFIX}{field.upper()}"

    def shown(self, field: str) -> str:
        """A field's value as it may be shown: secrets and URL passwords masked."""
        value = getattr(self, field)
        if value is None or value == ():
            return "(not set)"
        if field == "audit_key":
            return "*** (set)"
        if field in _SECRET:
            text = value.get_secret_value()
            pairs = sum(1 for e in text.replace("\n", ",").split(",") if e.split("#")[0].strip())
            return f"*** ({pairs} token{'s' if pairs != 1 else ''})"
        if field in _URLS:
            return masked_url(str(value))
        if field == "jwt_public_key" and "-----BEGIN" in str(value):
            return "(PEM text)"
        if isinstance(value, bool):
            return "on" if value else "off"
        if isinstance(value, timedelta):
            return _compact(value)
        if isinstance(value, float):
            return f"{value:g}s"
        if isinstance(value, tuple):
            return ",".join(value)
        return str(value)

    def effective(self) -> list[tuple[str, str, Source]]:
        """Each variable, its value as shown, and where it came from.

        ``option``: given to the constructor (a command-line option, which wins over the
        environment); ``env``: the environment set it; ``default``: neither did.
        """
        rows: list[tuple[str, str, Source]] = []
        for field in type(self).model_fields:
            source: Source = "env" if field in self.model_fields_set else "default"
            if field in self._options or _ALIASED.get(field) in self._options:
                source = "option"
            rows.append((self.variable(field), self.shown(field), source))
        return rows


_ALIASED = {"db": "service_db", "service_db": "db"}
"""The two names of the one database: an option given for one is the other's source."""

_GIVEN: contextvars.ContextVar[Mapping[str, str] | None] = contextvars.ContextVar(
    "reactor_settings_environ", default=None
)
"""The environment :meth:`Settings.from_environ` reads instead of the process's."""


class _Given(EnvSettingsSource):
    """The environment source, over a given mapping rather than ``os.environ``."""

    def __init__(self, settings_cls: type[BaseSettings], environ: Mapping[str, str]) -> None:
        self._given = environ
        super().__init__(settings_cls)

    def _load_env_vars(self) -> Mapping[str, str | None]:
        fold = (lambda name: name) if self.case_sensitive else str.lower
        return {fold(name): value for name, value in self._given.items() if value != ""}


def _compact(value: timedelta) -> str:
    seconds = int(value.total_seconds())
    for unit in ("w", "d", "h", "m"):
        if seconds and seconds % _UNITS[unit] == 0:
            return f"{seconds // _UNITS[unit]}{unit}"
    return f"{seconds}s"


def _lines(error: pydantic.ValidationError, options: Mapping[str, object]) -> str:
    """One line per bad variable: ``REACTOR_X='value': what it must be``."""
    lines: dict[str, str] = {}
    inputs: dict[str, object] = {}
    for problem in error.errors(include_url=False):
        field = str(problem["loc"][0]) if problem["loc"] else ""
        if not field:  # the settings as a whole: the message names the variables
            lines.setdefault("", str(problem["msg"]).removeprefix("Value error, "))
            continue
        name = Settings.variable(field) if field in Settings.model_fields else field
        if field in options:
            name = f"{name} (given as an option)"
        if problem["type"] == "extra_forbidden":
            lines.setdefault(field, f"{field!r} is not a setting")
            continue
        given = problem.get("input")
        if _ALIASED.get(field) in lines and given == inputs.get(_ALIASED[field]):
            continue  # the one database, under its other name: said once
        inputs[field] = given
        if field in _SECRET:
            shown = "'***'"
        elif field in _URLS:
            shown = repr(masked_url(_text(given)))
        else:
            shown = repr(_text(given))
        message = str(problem["msg"]).removeprefix("Value error, ")
        lines.setdefault(field, f"{name}={shown}: {message}")
    return "\n".join(lines.values())


@functools.cache
def settings() -> Settings:
    """The process's settings: its environment's ``REACTOR_*`` variables, read once.

    Tests that set variables make a :class:`Settings` of their own, or call
    ``settings.cache_clear()`` so that the next call reads the environment again.

    Raises:
        ServiceConfigError: A value is bad (one line per bad variable; not kept, so the
            next call reads again).
    """
    found = Settings()
    warn_unknown(os.environ)
    return found


_OWN_PREFIXES = (f"{ENV_PREFIX}TEST_", f"{ENV_PREFIX}BENCH_")
"""Variables of reactor's own test suite and benchmarks, not settings."""


def unknown_variables(environ: Mapping[str, str]) -> list[tuple[str, str | None]]:
    """The ``REACTOR_*`` variables of ``environ`` that are no setting, each with a near one."""
    known = [Settings.variable(field) for field in Settings.model_fields]
    found = []
    for name in sorted(environ):
        if not name.startswith(ENV_PREFIX) or name in known or name.startswith(_OWN_PREFIXES):
            continue
        near = difflib.get_close_matches(name, known, n=1, cutoff=0.75)
        found.append((name, near[0] if near else None))
    return found


def warn_unknown(environ: Mapping[str, str]) -> None:
    """Warn (a log line each) about ``REACTOR_*`` variables that set nothing: a typo, say.

    ``REACTOR_RETENTON=7d`` would otherwise keep every run for ever without a word.
    """
    for name, near in unknown_variables(environ):
        hint = f"did you mean {near}? " if near else ""
        log(
            "reactor.settings",
            "warning",
            "unknown setting",
            variable=name,
            hint=f"{name} is not a reactor setting; {hint}It is ignored (docs/configuration.md "
            "lists the settings).",
        )


def settings_from(environ: Mapping[str, str] | None = None) -> Settings:
    """:func:`settings` (the process's, read once), or the settings ``environ`` gives."""
    return settings() if environ is None else Settings.from_environ(environ)

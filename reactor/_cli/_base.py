"""What the commands share: the user-facing error, the settings, databases, JSON arguments."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from reactor._backends.sqlite import SQLiteSignalStore
from reactor._recording.info import parse_tag
from reactor._recording.storebase import SignalStoreBase
from reactor._signals.settings import Settings, database_location, settings
from reactor.exceptions import ServiceConfigError
from reactor.exceptions._extras import importing

__all__ = [
    "DB_ENV",
    "CommandError",
    "SettingsError",
    "add_gc_option",
    "checked_settings",
    "db_argument",
    "db_option",
    "db_path",
    "is_url",
    "json_argument",
    "open_db",
    "positive_arg",
    "service_url",
    "start_gc",
    "tags_argument",
    "writable_db",
]

DB_ENV = "REACTOR_DB"
"""The environment variable naming the run database when ``--db`` is not given."""


class CommandError(Exception):
    """A user-facing error: printed on one line, exit status 1."""

    status = 1


class SettingsError(CommandError):
    """Bad ``REACTOR_*`` values: one line each, exit status 2 (as for bad arguments)."""

    status = 2


def checked_settings(**options: Any) -> Settings:
    """The process's settings (with ``options`` over them, as ``serve --db`` gives).

    Raises:
        SettingsError: A value is bad; the message has one line per bad variable.
    """
    try:
        return Settings(**options) if options else settings()
    except ServiceConfigError as exc:
        raise SettingsError(str(exc)) from None


def db_argument(text: str) -> str:
    """``--db``'s type: a file path, ``sqlite:///path`` or ``postgresql://...``, checked."""
    try:
        database_location(text, memory=True)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{text!r} {exc}") from None
    return text.strip()


def service_url(where: str) -> str:
    """A service's database as a URL: a plain path is the SQLite file ``sqlite:///path``."""
    location = database_location(where, memory=True)
    return f"sqlite:///{location}" if isinstance(location, Path) else where


def db_path(args: argparse.Namespace) -> Path | str:
    """The run database: ``--db``, else ``$REACTOR_DB``, else ``.reactor/runs.db``.

    ``sqlite:///path`` and a plain path are the file's ``Path``; a ``postgresql://``
    URL is kept as text (a ``Path`` would fold its ``//``).

    Raises:
        CommandError: The database names no file (``sqlite://``, in memory).
        SettingsError: A ``REACTOR_*`` value is bad.
    """
    where = args.db or checked_settings().db
    try:
        return database_location(where)
    except ValueError as exc:
        raise CommandError(f"--db {where} {exc}") from None


def db_option(path: Path | str) -> str:
    """How to name ``path`` in a suggested command (nothing for the default one)."""
    if str(path) == str(database_location(checked_settings().db)):
        return ""
    return f" --db {path}"


def is_url(path: Path | str) -> bool:
    """Whether the database is a PostgreSQL URL rather than a SQLite file."""
    return str(path).startswith(("postgresql://", "postgres://"))


def open_db(args: argparse.Namespace) -> SignalStoreBase:
    """Open the run database to read: inspecting never creates or changes a file.

    A ``postgresql://`` URL opens a :class:`~reactor.PostgresSignalStore` (the
    database of a service and its workers); anything else is a SQLite file, opened
    read-only.
    """
    path = db_path(args)
    if isinstance(path, str):
        return _postgres(path)
    if not path.exists():
        raise CommandError(
            f"no run database at {path} (record runs with `reactor run`, or name the "
            f"database with --db PATH or {DB_ENV})"
        )
    return SQLiteSignalStore(path, readonly=True)


def writable_db(args: argparse.Namespace) -> SignalStoreBase:
    """Open the run database to record to (a SQLite file is created if need be)."""
    path = db_path(args)
    return _postgres(path) if isinstance(path, str) else SQLiteSignalStore(path)


def _postgres(url: str) -> SignalStoreBase:
    with importing("postgres", what="A postgresql:// database"):
        from reactor._backends.postgres import PostgresSignalStore

    return PostgresSignalStore(url)


def positive_arg(text: str) -> int:
    """An option's whole number, 1 or more (``--limit``, ``--at``, ``--concurrency``)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of at least 1, got {text!r}")
    return value


def json_argument(value: str, option: str) -> Any:
    """Parse an option's JSON, or the JSON in the file ``@path`` names."""
    text = value
    if value.startswith("@"):
        try:
            text = Path(value[1:]).read_text()
        except OSError as exc:
            raise CommandError(
                f"{option} {value}: cannot read {value[1:]} ({exc.strerror})"
            ) from exc
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise CommandError(f"{option} is not valid JSON ({exc.msg} at column {exc.colno})") from exc


def tags_argument(tags: list[str]) -> dict[str, str]:
    """``--tag KEY`` and ``--tag KEY=VALUE`` options as a dict, as ``runs --tag`` reads them."""
    parsed: dict[str, str] = {}
    for tag in tags:
        key, value = parse_tag(tag)
        if not key:
            raise CommandError(f"--tag {tag!r} has no key: use --tag KEY or --tag KEY=VALUE")
        parsed[key] = value
    return parsed


def add_gc_option(parser: argparse.ArgumentParser) -> None:
    """Give a long-running command (``serve``, ``worker``) its ``--no-tune-gc``."""
    parser.add_argument(
        "--no-tune-gc",
        dest="tune_gc",
        action="store_false",
        help="leave Python's garbage collector as it is (default: reactor.tune_gc(), full "
        "collections rarer while 100 or more runs are in flight, and what the process "
        "holds when the service starts frozen out of them)",
    )


def start_gc(args: argparse.Namespace) -> None:
    """Tune the garbage collector for the life of the process, unless ``--no-tune-gc``.

    A long-running command owns its process, so it may: a library imported by an
    application never does (see :func:`reactor.tune_gc`). Said in the log either way.
    """
    import structlog

    from reactor._engine.collector import tune_gc

    if not args.tune_gc:
        structlog.get_logger("reactor.cli").info("garbage collector left as it is")
        return
    tuning = tune_gc()
    structlog.get_logger("reactor.cli").info(
        "garbage collector tuned", busy_at=tuning.busy_at, full_threshold=tuning.full_threshold
    )

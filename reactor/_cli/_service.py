"""``reactor db upgrade`` and ``prune``, ``reactor serve``: the service, from the command line.

The service (SQLAlchemy, Alembic, FastAPI, uvicorn) is imported when a command of it
runs, so the other commands start without it.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
import threading
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from types import TracebackType
from typing import Any, TextIO

import structlog

from reactor._cli._base import (
    CommandError,
    SettingsError,
    add_gc_option,
    checked_settings,
    db_argument,
    service_url,
    start_gc,
)
from reactor._signals.settings import Settings

__all__ = [
    "DB_EXAMPLE",
    "DB_SUMMARY",
    "DEFAULT_SERVICE_URL",
    "SERVE_EXAMPLE",
    "SERVE_SUMMARY",
    "add_db_arguments",
    "add_log_format",
    "add_print_config",
    "add_serve_arguments",
    "app_service",
    "cmd_db",
    "cmd_serve",
    "default_log_format",
    "logged",
    "print_config",
    "say_error",
    "seconds_arg",
    "start_logging",
]

DB_SUMMARY = "Create or migrate the service's database; prune old recorded runs."
DB_EXAMPLE = "reactor db upgrade --db postgresql://postgres@127.0.0.1:5432/app"
PRUNE_EXAMPLE = "reactor db prune --older-than 30d --status completed --status failed --dry-run"
DEFAULT_SERVICE_URL = "sqlite:///.reactor/app.db"
"""Where objects and reactions are kept unless told otherwise (``reactor.service``'s default)."""
SERVE_SUMMARY = "Serve a reaction service over HTTP: agents, schedules, objects and runs."
SERVE_EXAMPLE = (
    "REACTOR_API_TOKENS=s3cret:alice reactor serve --app examples.crm_enrichment.service:service"
)


def add_db_arguments(db: argparse.ArgumentParser) -> None:
    """Give ``reactor db`` its actions (``upgrade``, ``prune``)."""
    actions = db.add_subparsers(dest="db_command", metavar="ACTION", required=True)
    upgrade = actions.add_parser(
        "upgrade",
        help="bring the tables up to this version of reactor (creating them if needed)",
        description="Run the migrations shipped with reactor on the database; safe to repeat.",
        epilog=f"Example:\n  {DB_EXAMPLE}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    upgrade.set_defaults(parser=upgrade)  # errors name `reactor db upgrade`
    upgrade.add_argument(
        "--db",
        metavar="URL",
        type=db_argument,
        help="sqlite:///path.db, a file path, or postgresql://... "
        f"(default: $REACTOR_DB, else {DEFAULT_SERVICE_URL})",
    )

    prune = actions.add_parser(
        "prune",
        help="delete recorded runs that ended long enough ago (their signals, inbox, info)",
        description=(
            "Delete runs that ended before the given age, whole and in one transaction. "
            "Runs still running or waiting are never deleted."
        ),
        epilog=f"Example:\n  {PRUNE_EXAMPLE}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    prune.set_defaults(parser=prune)
    prune.add_argument(
        "--db",
        metavar="URL",
        type=db_argument,
        help="the database whose recorded runs to prune: sqlite:///path.db, a file path "
        "(.reactor/runs.db), or postgresql://... (default: $REACTOR_DB, else "
        f"{DEFAULT_SERVICE_URL}); one that does not exist is not created",
    )
    prune.add_argument(
        "--older-than",
        metavar="AGE",
        required=True,
        type=_duration_arg,
        help="how long ago a run must have ended: 30d, 12h, 90m, 2w",
    )
    prune.add_argument(
        "--status",
        action="append",
        metavar="STATUS",
        help="the final statuses to delete (repeat it; `all` for any; default: completed)",
    )
    prune.add_argument(
        "--keep-last",
        type=int,
        default=0,
        metavar="N",
        help="keep the N newest runs of each graph whatever their age (default: 0)",
    )
    prune.add_argument(
        "--dry-run", action="store_true", help="say how many runs would go, delete nothing"
    )


def _duration_arg(text: str) -> timedelta:
    from reactor._recording.info import parse_duration

    try:
        return parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc).rstrip(".")) from None


def cmd_db(args: argparse.Namespace) -> int:
    """``reactor db upgrade`` or ``prune``: migrate the database, or delete old runs."""
    if args.db_command == "prune":
        return _prune(args)
    from reactor.service import upgrade_database
    from reactor.service._objects.db import describe_url

    url = service_url(args.db or checked_settings().service_db)
    revision = asyncio.run(upgrade_database(url))
    print(f"{describe_url(url)}: the tables are at revision {revision} (the newest).")
    return 0


def _prune(args: argparse.Namespace) -> int:
    """``reactor db prune``: delete the ended runs older than ``--older-than``."""
    from reactor.service._hosting.hosting import default_record
    from reactor.service._objects.db import Database

    config = checked_settings()
    url = service_url(args.db or config.service_db)
    named = "--db" if args.db else ""
    if not args.db and "service_db" in config.model_fields_set:
        named = "REACTOR_DB" if os.environ.get("REACTOR_DB") else "REACTOR_SERVICE_DB"
    _existing(url, named)
    statuses = args.status or ["completed"]
    status = None if "all" in statuses else tuple(statuses)
    store, _ = asyncio.run(default_record(Database(url)))
    try:
        count = store.prune(
            older_than=args.older_than,
            status=status,
            keep_last=args.keep_last,
            dry_run=args.dry_run,
        )
    except ValueError as exc:
        raise CommandError(str(exc).rstrip(".")) from None
    finally:
        store.close()
    which = "any status" if status is None else ", ".join(status)
    age = _age(args.older_than)
    runs = f"{count} run{'s' if count != 1 else ''}"
    if args.dry_run:
        print(f"{_shown(url)}: {runs} ({which}) ended more than {age} ago would go.")
    else:
        print(f"{_shown(url)}: deleted {runs} ({which}) that ended more than {age} ago.")
    return 0


def _shown(url: str) -> str:
    """The database as the user knows it: a SQLite file's path, a server's URL unsecret."""
    from reactor.service._objects.db import describe_url

    return url.removeprefix("sqlite:///") if url.startswith("sqlite:///") else describe_url(url)


def _existing(url: str, named_by: str) -> None:
    """Refuse a SQLite database that is not there (or in memory): pruning creates none.

    Raises:
        CommandError: Naming where it looked (and who named it) and how to name one.
    """
    path = url.removeprefix("sqlite:///") if url.startswith("sqlite:///") else None
    if url.startswith("sqlite") and path is None:
        raise CommandError(f"--db {url} is a database in memory: it has no runs to prune")
    if path is None or Path(path).exists():
        return
    how = f"named by {named_by}" if named_by else "the default"
    raise CommandError(
        f"no database at {path} ({how}; nothing was created): name the one whose runs to "
        "prune with --db PATH or URL, or REACTOR_DB (when it is not set, runs recorded by "
        "`reactor run` are in .reactor/runs.db)"
    )


def _age(age: timedelta) -> str:
    seconds = int(age.total_seconds())
    for unit, size in (("week", 604800), ("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds and seconds % size == 0:
            n = seconds // size
            return f"{n} {unit}{'s' if n != 1 else ''}"
    return f"{seconds} second{'s' if seconds != 1 else ''}"


def seconds_arg(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a number of seconds, 0 or more, got {text!r}")
    return value


def add_serve_arguments(serve: argparse.ArgumentParser) -> None:
    """Give ``reactor serve`` its options."""
    serve.add_argument(
        "--app",
        metavar="MODULE:SERVICE",
        help="a ReactionService (or a function of the database URL returning one); "
        "default: a service of the agents in the database's rows alone",
    )
    serve.add_argument(
        "--db",
        metavar="URL",
        type=db_argument,
        help="the service's database: sqlite:///path.db, a file path or postgresql://... "
        f"(default: $REACTOR_DB, else {DEFAULT_SERVICE_URL})",
    )
    serve.add_argument("--host", help="the address to listen on (default: 127.0.0.1)")
    serve.add_argument(
        "--port", type=int, help="the port to listen on (default: 8000; 0: any free one, logged)"
    )
    serve.add_argument(
        "--grace",
        type=seconds_arg,
        help="seconds in-flight work is given to finish on SIGTERM (default: 30)",
    )
    serve.add_argument(
        "--tokens-file",
        metavar="PATH",
        help="API tokens, one token:user a line (also: $REACTOR_API_TOKENS='token:user,...')",
    )
    add_print_config(serve)
    add_log_format(serve)
    add_gc_option(serve)


def add_print_config(parser: argparse.ArgumentParser) -> None:
    """Give a long-running command (``serve``, ``worker``) its ``--print-config``."""
    parser.add_argument(
        "--print-config",
        action="store_true",
        help="print the effective settings (each REACTOR_* variable and option, its value "
        "with secrets masked, and where it came from), then exit",
    )


def print_config(config: Settings, options: list[tuple[str, str, str]]) -> int:
    """Print the effective settings: variable, value (secrets masked), where it came from."""
    rows = [("setting", "value", "from"), *config.effective(), *options]
    width = [max(len(row[column]) for row in rows) for column in (0, 1)]
    for name, value, source in rows:
        print(f"{name:<{width[0]}}  {value:<{width[1]}}  {source}")
    sys.stdout.flush()
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    """``reactor serve``: run the service and its HTTP API until SIGTERM."""
    if args.print_config:
        config, settings = _serve_settings(args)
        given = {"--host": args.host, "--port": args.port, "--grace": args.grace}
        options = [
            (name, str(getattr(settings, name[2:])), "default" if value is None else "option")
            for name, value in given.items()
        ]
        return print_config(config, options)
    as_json = start_logging(args.log_format)
    return logged("serve", as_json, lambda: _serve(args, as_json))


def _serve_settings(args: argparse.Namespace) -> tuple[Settings, Any]:
    """The process's settings with ``serve``'s options over them, and how it serves."""
    from reactor.service._api.serve import ServeSettings

    options = {"service_db": args.db, "api_tokens_file": args.tokens_file}
    config = checked_settings(**{key: value for key, value in options.items() if value})
    given = {"host": args.host, "port": args.port, "grace": args.grace}
    return config, ServeSettings.read(given, config)


def _serve(args: argparse.Namespace, as_json: bool) -> int:
    from reactor.exceptions import ServiceConfigError
    from reactor.service._access.authenticators import LocalAuth
    from reactor.service._api.serve import is_loopback, serve

    _, settings = _serve_settings(args)
    try:
        authenticator = settings.authenticator()
    except ServiceConfigError as exc:
        raise CommandError(str(exc)) from None
    if isinstance(authenticator, LocalAuth) and not is_loopback(settings.host):
        say_error(
            "serve",
            f"refusing to listen on {settings.host} without API tokens; set "
            "REACTOR_API_TOKENS='token:user,...' or --tokens-file, or use --host 127.0.0.1",
            as_json,
        )
        return 2
    service = app_service(args.app, service_url(settings.db), given_db=args.db is not None)
    start_gc(args)  # once it is sure to start: a refusal stays the only line
    try:
        return serve(service, settings)
    except ServiceConfigError as exc:  # the port is taken: said before anything started
        raise CommandError(str(exc)) from None


LOG_FORMATS = ("json", "console")
QUIET_LOGGERS = ("alembic.runtime.plugins", "apscheduler", "httpx")
"""Libraries whose info lines say little (a plugin loaded, a scheduler tick, a model call's
HTTP request): only their warnings and errors are logged."""


def add_log_format(parser: argparse.ArgumentParser) -> None:
    """Give a long-running command (``serve``, ``worker``) its ``--log-format``."""
    parser.add_argument(
        "--log-format",
        choices=LOG_FORMATS,
        help="json: every line the process writes is one JSON object (for a log pipeline); "
        "console: lines for a person (default: console on a terminal, else json)",
    )


def default_log_format(stdout: TextIO | None) -> str:
    """``console`` when ``stdout`` is a terminal (a person reads it), else ``json``."""
    try:
        return "console" if stdout is not None and stdout.isatty() else "json"
    except ValueError:  # a closed stream is no terminal
        return "json"


def start_logging(chosen: str | None) -> bool:
    """Send every line of the process through structlog; whether the lines are JSON.

    ``chosen`` is ``--log-format`` (``None``: :func:`default_log_format`). structlog, the
    standard ``logging`` module (uvicorn, taskiq, every library), warnings and uncaught
    exceptions all go the same way: JSON lines on stdout, or console lines on stderr.
    Called first, so that an app's module that logs while it is imported does it in the
    same format.
    """
    import reactor.logging

    as_json = (chosen or default_log_format(sys.stdout)) == "json"
    reactor.logging.configure(json=as_json, level="info", stdlib=True)
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
    if as_json:
        sys.excepthook = _log_uncaught
        threading.excepthook = _log_uncaught_in_thread
    return as_json


def _log_uncaught(
    kind: type[BaseException], error: BaseException, trace: TracebackType | None
) -> None:
    structlog.get_logger("reactor.cli").critical(
        "uncaught exception", exc_info=(kind, error, trace)
    )


def _log_uncaught_in_thread(info: threading.ExceptHookArgs) -> None:
    if info.exc_value is not None:
        _log_uncaught(info.exc_type, info.exc_value, info.exc_traceback)


def say_error(command: str, message: str, as_json: bool) -> None:
    """Say why ``reactor COMMAND`` stops: a log line in JSON, else a line on stderr."""
    if as_json:
        structlog.get_logger("reactor.cli").error(f"reactor {command}: error", error=message)
    else:
        print(f"reactor {command}: error: {message}", file=sys.stderr)


def logged(command: str, as_json: bool, body: Callable[[], int]) -> int:
    """``body()``'s status; in JSON an error that ends it is a log line too (as ``main`` says)."""
    if not as_json:
        return body()
    from reactor.exceptions import ReactorError

    try:
        return body()
    except BrokenPipeError:
        raise
    except SettingsError as exc:  # a line per bad variable
        for line in str(exc).splitlines():
            say_error(command, line, as_json)
        return exc.status
    except (CommandError, ReactorError, OSError) as exc:
        say_error(command, str(exc), as_json)
        return 1
    except KeyboardInterrupt:
        structlog.get_logger("reactor.cli").warning(f"reactor {command}: interrupted")
        return 130


def app_service(ref: str | None, db: str, *, given_db: bool) -> Any:
    """The service to serve: the app's, or one of the database's agents alone."""
    from reactor.service import ObjectStore, ReactionService

    if ref is None:
        provider = None
        if os.environ.get("ANTHROPIC_API_KEY"):
            from reactor import AnthropicProvider

            provider = AnthropicProvider()
        return ReactionService(objects=ObjectStore(db), provider=provider)
    from reactor._cli._load import attribute

    found = attribute(ref, "--app")
    if not isinstance(found, ReactionService) and callable(found):
        found = found(db)
    if not isinstance(found, ReactionService):
        raise CommandError(
            f"--app {ref} is {type(found).__name__}, not a ReactionService (nor a function "
            "of the database URL returning one)"
        )
    if given_db and found.objects.url != db:
        raise CommandError(
            f"--app {ref} keeps its objects in {found.objects.url}, not --db {db}: drop "
            "--db, or make the app a function of the database URL"
        )
    return found

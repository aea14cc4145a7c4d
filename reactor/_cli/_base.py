"""What the commands share: the user-facing error, the run database, JSON arguments."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from reactor._recording.info import parse_tag
from reactor._recording.sqlite import DEFAULT_PATH, SQLiteSignalStore

__all__ = [
    "DB_ENV",
    "CommandError",
    "db_option",
    "db_path",
    "json_argument",
    "open_db",
    "tags_argument",
]

DB_ENV = "REACTOR_DB"
"""The environment variable naming the run database when ``--db`` is not given."""


class CommandError(Exception):
    """A user-facing error: printed on one line, exit status 1."""


def db_path(args: argparse.Namespace) -> Path:
    """The run database: ``--db``, else ``$REACTOR_DB``, else ``.reactor/runs.db``."""
    return Path(args.db or os.environ.get(DB_ENV) or DEFAULT_PATH)


def db_option(path: Path) -> str:
    """How to name ``path`` in a suggested command (nothing for the default one)."""
    if str(path) == (os.environ.get(DB_ENV) or str(DEFAULT_PATH)):
        return ""
    return f" --db {path}"


def open_db(args: argparse.Namespace) -> SQLiteSignalStore:
    """Open the run database read-only: inspecting never creates or changes a file."""
    path = db_path(args)
    if not path.exists():
        raise CommandError(
            f"no run database at {path} (record runs with `reactor run`, or name the "
            f"database with --db PATH or {DB_ENV})"
        )
    return SQLiteSignalStore(path, readonly=True)


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

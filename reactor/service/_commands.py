"""``reactor db upgrade [--db URL]``: the command's parser and its handler.

The ``reactor`` command wires it in with one call in its parser, the parsed
arguments then name the handler (``args.handler`` is :func:`run_db_command`)::

    add_db_command(commands)           # commands: the parser's add_subparsers() object
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from reactor.exceptions import ReactorError
from reactor.service._db import DEFAULT_URL, describe_url, upgrade_database

__all__ = ["add_db_command", "run_db_command"]

SUMMARY = "Create or migrate the database of objects and reactions."
EXAMPLE = "reactor db upgrade --db postgresql://postgres@127.0.0.1:5432/app"


def add_db_command(commands: Any) -> argparse.ArgumentParser:
    """Add ``db`` (with ``db upgrade``) to ``commands``, an ``add_subparsers()`` object.

    The parser's defaults name the handler (``args.handler`` is :func:`run_db_command`);
    returns the ``db`` parser.
    """
    db = commands.add_parser(
        "db",
        help=SUMMARY,
        description=SUMMARY,
        epilog=f"Example:\n  {EXAMPLE}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = db.add_subparsers(dest="db_command", metavar="ACTION", required=True)
    upgrade = actions.add_parser(
        "upgrade",
        help="bring the tables up to this version of reactor (creating them if needed)",
        description="Run the migrations shipped with reactor on the database; safe to repeat.",
        epilog=f"Example:\n  {EXAMPLE}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    upgrade.set_defaults(parser=upgrade)  # errors name `reactor db upgrade`
    upgrade.add_argument(
        "--db",
        metavar="URL",
        default=DEFAULT_URL,
        help=f"sqlite:///path.db, a file path, or postgresql://... (default: {DEFAULT_URL})",
    )
    db.set_defaults(handler=run_db_command, parser=db)
    return db  # type: ignore[no-any-return]


def run_db_command(args: argparse.Namespace) -> int:
    """Run ``reactor db ACTION``; return the exit status (0 done, 1 failed)."""
    try:
        revision = asyncio.run(upgrade_database(args.db))
    except ReactorError as exc:
        print(f"reactor db {args.db_command}: error: {exc}", file=sys.stderr)
        return 1
    print(f"{describe_url(args.db)}: the tables are at revision {revision} (the newest).")
    return 0

"""``reactor db upgrade``: the service's database, from the command line.

The service (SQLAlchemy, Alembic) is imported when a command of it runs, so the other
commands start without it.
"""

from __future__ import annotations

import argparse
import asyncio

__all__ = ["DB_EXAMPLE", "DB_SUMMARY", "DEFAULT_SERVICE_URL", "add_db_arguments", "cmd_db"]

DB_SUMMARY = "Create or migrate the database of objects and reactions."
DB_EXAMPLE = "reactor db upgrade --db postgresql://postgres@127.0.0.1:5432/app"
DEFAULT_SERVICE_URL = "sqlite:///.reactor/app.db"
"""Where objects and reactions are kept unless told otherwise (``reactor.service``'s default)."""


def add_db_arguments(db: argparse.ArgumentParser) -> None:
    """Give ``reactor db`` its actions (``upgrade``)."""
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
        default=DEFAULT_SERVICE_URL,
        help="sqlite:///path.db, a file path, or postgresql://... "
        f"(default: {DEFAULT_SERVICE_URL})",
    )


def cmd_db(args: argparse.Namespace) -> int:
    """``reactor db upgrade``: migrate the database and say which revision it is at."""
    from reactor.service import upgrade_database
    from reactor.service._db import describe_url

    revision = asyncio.run(upgrade_database(args.db))
    print(f"{describe_url(args.db)}: the tables are at revision {revision} (the newest).")
    return 0

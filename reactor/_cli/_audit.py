"""``reactor audit verify``: check the hash chains of a database's audit trail.

Each run's signals, the service's processing history and its object events are
hash-chained as they are written (``reactor._recording.chain``). ``verify`` reads a
database (a run database, or a service's, which holds its runs too) without changing
it, recomputes every chain a page at a time, and prints what it checked; the first
entry that fails its check is printed (its table, id and seq) and the exit status is
1. The service's tables are read through the service's extra (SQLAlchemy), only when
the database holds them.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from reactor._backends.chained import tables_of, verify_store
from reactor._cli._base import CommandError, db_argument
from reactor._recording.chain import Report, verifying_key
from reactor._signals.settings import database_location
from reactor.exceptions._extras import importing

__all__ = ["AUDIT_EXAMPLE", "AUDIT_SUMMARY", "add_audit_arguments", "cmd_audit", "verify"]

AUDIT_SUMMARY = "Check the audit trail: the hash chains of runs, decisions and object events."
AUDIT_EXAMPLE = "reactor audit verify --db postgresql://postgres@127.0.0.1:5432/app"
_STORE_TABLES = frozenset(("signals", "reactor_signals"))
_SERVICE_TABLES = frozenset(("processing_history", "object_events"))


def add_audit_arguments(audit: argparse.ArgumentParser) -> None:
    """Give ``reactor audit`` its action (``verify``)."""
    actions = audit.add_subparsers(dest="audit_command", metavar="ACTION", required=True)
    verify_command = actions.add_parser(
        "verify",
        help="recompute every hash chain; print the first broken entry (exit 1), else 0",
        description=(
            "Read the database without changing it and recompute the hash chain of each "
            "run's signals and, in a service's database, of the processing history and "
            "the object events. Set REACTOR_AUDIT_KEY to check chains made with it."
        ),
        epilog=f"Example:\n  {AUDIT_EXAMPLE}\n  reactor audit verify --db .reactor/runs.db "
        "--run run_3f2a",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    verify_command.set_defaults(parser=verify_command)
    verify_command.add_argument(
        "--db",
        metavar="URL",
        required=True,
        type=db_argument,
        help="the database: a run database or a service's (a file path, sqlite:///path or "
        "postgresql://...)",
    )
    verify_command.add_argument(
        "--run", metavar="RUN_ID", help="check only this run's chain (its exact id)"
    )
    verify_command.add_argument(
        "--json", action="store_true", help="print the report as one JSON object"
    )


def verify(where: Path | str, run_id: str | None = None) -> Report:
    """Verify the chains of the database at ``where``: its runs, and a service's tables.

    Raises:
        CommandError: The database holds no reactor tables (or no runs, with ``run_id``).
        RecordingError: The database cannot be read, or has an older schema.
        RunNotFoundError: ``run_id`` is not in it.
    """
    key = verifying_key()
    report = Report(key=key is not None)
    tables = tables_of(where)
    if not tables & (_STORE_TABLES | _SERVICE_TABLES):
        raise CommandError(f"{where} holds no runs and no service tables reactor wrote")
    if tables & _STORE_TABLES:
        verify_store(where, report, key, run_id)
    elif run_id is not None:
        raise CommandError(f"{where} holds no runs, so no run {run_id!r}")
    if run_id is None and report.intact and tables & _SERVICE_TABLES:
        with importing("service", what="Verifying a service's tables"):
            from reactor.service._objects.history import verify_database

        verify_database(where, report, key)
    return report


def cmd_audit(args: argparse.Namespace) -> int:
    """``reactor audit verify``: exit 0 when every chain holds, 1 at the first break."""
    try:
        where = database_location(args.db)
    except ValueError as exc:
        raise CommandError(f"--db {args.db} {exc}") from None
    report = verify(where, args.run)
    if args.json:
        print(json.dumps(report.to_dict()))
    else:
        for line in report.lines():
            print(line)
    return 0 if report.intact else 1

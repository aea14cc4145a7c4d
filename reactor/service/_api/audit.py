"""``GET /api/audit/verify``: the audit trail's hash chains, checked as the CLI checks them.

The answer is what ``reactor audit verify --json`` prints for the service's databases:
``intact``, what was checked per table (``checked``), the first entry that fails its
check (``broken``: its table, id, seq, run and problem; ``null`` when none does),
whether ``REACTOR_AUDIT_KEY`` was set (``key``), and what could not be checked and why
(``notes``). ``?run=`` checks that run's chain alone. The runs are checked in the
service's signal store (when it is a SQLite or PostgreSQL store: one in memory keeps
no chain), the processing history in the service's database and the object events in
the objects' database. Every table is read a page at a time: the signal store in a
thread, the service's tables on their async connection.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import fastapi

from reactor._backends.chained import verify_store
from reactor._backends.sqlite import SQLiteSignalStore
from reactor._recording.chain import Report, verifying_key
from reactor._recording.store import SignalStore
from reactor.service._api.base import ADMINISTERS, CHECKS, Service
from reactor.service._hosting.service import ReactionService
from reactor.service._objects.db import Database
from reactor.service._objects.history import verify_tables

__all__ = ["router", "verify_service"]

router = fastapi.APIRouter(prefix="/api/audit", tags=["audit"], dependencies=CHECKS)


@router.get("/verify", dependencies=[ADMINISTERS])
async def verify(service: Service, run: str | None = None) -> dict[str, Any]:
    """Recompute the hash chains of the runs, the processing history and the object events.

    ``intact`` is false when an entry fails its check: ``broken`` names it.
    """
    report = await verify_service(service, run)
    return report.to_dict()


async def verify_service(service: ReactionService, run_id: str | None = None) -> Report:
    """Check the chains the service writes (``run_id``: that run's alone).

    Raises:
        RunNotFoundError: ``run_id`` is not in the service's signal store.
    """
    key = verifying_key()
    report = Report(key=key is not None)
    where = _store_location(service.record)
    if where is None:
        report.notes.append(
            f"The runs are recorded to {type(service.record).__name__}, which keeps no hash "
            "chain: they were not checked."
        )
    else:
        await asyncio.to_thread(verify_store, where, report, key, run_id)
    if run_id is None and report.intact:
        await _verify_tables(service, report, key)
    return report


async def _verify_tables(service: ReactionService, report: Report, key: bytes | None) -> None:
    """Check the service's tables (history, events) into ``report``; stop at a break."""
    for db in _databases(service):
        async with db.read() as conn:
            await conn.run_sync(verify_tables, report, key)
        if not report.intact:
            return


def _store_location(record: SignalStore | None) -> Path | str | None:
    """Where the service's runs are chained: a SQLite file, a PostgreSQL URL (``None``: nowhere)."""
    if isinstance(record, SQLiteSignalStore):
        return record.path
    postgres = sys.modules.get("reactor._backends.postgres")  # not loaded: no such store
    if postgres is not None and isinstance(record, postgres.PostgresSignalStore):
        return str(record.dsn)
    return None


def _databases(service: ReactionService) -> list[Database]:
    """The service's database and the objects' (one, unless they were given apart)."""
    databases = [service.db]
    if service.objects.db is not service.db and service.objects.db.url != service.db.url:
        databases.append(service.objects.db)
    return databases

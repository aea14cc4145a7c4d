"""Retention: the service deletes the runs that ended longer ago than ``REACTOR_RETENTION``.

Unset (the default), every run is kept. Set (``30d``, ``12h``, ``2w``), the service's
scheduler prunes its signal store once when it starts and then every day: runs that
ended (with any status) longer ago than that are deleted whole, in one transaction
each time; runs still running or waiting never are. Several serving processes may all
prune: deleting what is already gone deletes nothing.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from reactor._signals.diagnostics import log
from reactor._signals.settings import settings_from

__all__ = ["RETENTION_ENV", "Retention"]

RETENTION_ENV = "REACTOR_RETENTION"


@dataclasses.dataclass(frozen=True)
class Retention:
    """How long the service keeps runs after they end.

    Attributes:
        older_than: Runs that ended longer ago than this are deleted.
    """

    older_than: timedelta

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Retention | None:
        """``REACTOR_RETENTION``, or ``None`` when it is unset (keep everything).

        ``environ``: read this variable there instead of in the process's environment.

        Raises:
            ServiceConfigError: A ``REACTOR_*`` value is bad (one line per bad variable).
        """
        older_than = settings_from(environ).retention
        return None if older_than is None else cls(older_than)

    async def prune(self, store: Any) -> int:
        """Delete the ended runs of ``store`` older than :attr:`older_than`; how many."""
        try:
            count = int(
                await asyncio.to_thread(store.prune, older_than=self.older_than, status=None)
            )
        except Exception as exc:  # the store is away: the next day tries again
            log("reactor.service", "error", "runs not pruned", error=repr(exc))
            return 0
        days = self.older_than.total_seconds() / 86400
        log("reactor.service", "info", "runs pruned", runs=count, older_than_days=round(days, 3))
        return count

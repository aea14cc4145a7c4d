"""The workers page (``/workers``): who executes the runs of a service that queues them.

With ``REACTOR_REDIS_URL`` set, ``reactor serve`` only queues runs and ``reactor
worker`` processes execute them; each worker renews a heartbeat key in Redis naming
its runs (:func:`reactor.service._scaleout.worker.live_workers` reads them, as
``reactor workers`` does). The page lists the live ones, refreshed every two seconds;
without a queue it says that runs execute in the serving process itself.
"""

from __future__ import annotations

from typing import Any

import fastapi
from redis.exceptions import RedisError
from starlette.requests import Request
from starlette.responses import Response

from reactor.service._scaleout.worker import live_workers
from reactor.service.web._render import SignedIn, page, service_of

__all__ = ["router"]

router = fastapi.APIRouter(include_in_schema=False)


async def _workers(request: Request) -> dict[str, Any]:
    """What the page shows: the queue (if any), its live workers, or why they are unknown."""
    service = service_of(request)
    queue = service.host.queue
    if queue is None:
        return {"queued": False, "workers": [], "problem": None, "live": sorted(service.live)}
    try:
        workers = await live_workers(queue.settings)
    except (RedisError, OSError) as exc:
        problem = f"Redis cannot be reached ({exc}); the workers are unknown until it can."
        return {"queued": True, "workers": [], "problem": problem, "live": []}
    return {"queued": True, "workers": workers, "problem": None, "live": []}


@router.get("/workers")
async def workers(request: Request, session: SignedIn) -> Response:
    """The live workers (id, host, pid, runs held, last heartbeat), or where runs execute."""
    return page(request, "workers.html", session, **await _workers(request))


@router.get("/workers/rows")
async def worker_rows(request: Request, session: SignedIn) -> Response:
    """The workers' rows alone, for the script that keeps the table up to date."""
    return page(request, "worker_rows.html", session, fragment=True, **await _workers(request))

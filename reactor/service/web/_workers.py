"""The workers page (``/workers``): who executes the runs of a service that queues them.

With ``REACTOR_REDIS_URL`` set, ``reactor serve`` only queues runs and ``reactor
worker`` processes execute them; each worker renews a heartbeat key in Redis naming
its runs (:func:`reactor.service._scaleout.worker.live_workers` reads them, as
``reactor workers`` does). The page lists the live ones, refreshed every two seconds;
without a queue it says that runs execute in the serving process itself. Below them,
the jobs that wait for a worker with their code (a graph or an agent the live workers
lack, as during a rolling deploy: :mod:`reactor.service._scaleout.waiting`), so that a
run left ``queued`` says why.
"""

from __future__ import annotations

from typing import Any

import fastapi
from starlette.requests import Request
from starlette.responses import Response

from reactor.service.web._render import Viewing, page, service_of

__all__ = ["router"]

router = fastapi.APIRouter(include_in_schema=False)


async def _workers(request: Request) -> dict[str, Any]:
    """What the page shows: the queue, its live workers and jobs waiting for other code.

    Or where runs execute (no queue), or why the workers are unknown (Redis away).
    """
    service = service_of(request)
    queue = service.host.queue
    shown: dict[str, Any] = {"queued": queue is not None, "workers": [], "waiting": []}
    shown.update(problem=None, live=[] if queue else sorted(service.live))
    if queue is None:
        return shown
    from redis.exceptions import RedisError  # a queue is the scaleout extra's: it is there

    from reactor.service._scaleout.waiting import waiting_jobs
    from reactor.service._scaleout.worker import live_workers

    try:
        shown["workers"] = await live_workers(queue.settings)
        shown["waiting"] = await waiting_jobs(queue.settings)
    except (RedisError, OSError) as exc:
        problem = f"Redis cannot be reached ({exc}); the workers are unknown until it can."
        shown.update(workers=[], waiting=[], problem=problem)
    return shown


@router.get("/workers")
async def workers(request: Request, session: Viewing) -> Response:
    """The live workers (id, host, pid, runs held, last heartbeat), or where runs execute."""
    return page(request, "workers.html", session, **await _workers(request))


@router.get("/workers/rows")
async def worker_rows(request: Request, session: Viewing) -> Response:
    """The workers' rows alone, for the script that keeps the table up to date."""
    return page(request, "worker_rows.html", session, fragment=True, **await _workers(request))


@router.get("/workers/waiting")
async def waiting_rows(request: Request, session: Viewing) -> Response:
    """The rows of the jobs waiting for a worker with their code, for the same script."""
    return page(request, "waiting_rows.html", session, fragment=True, **await _workers(request))

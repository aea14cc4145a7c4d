"""``reactor worker`` and ``reactor workers``: executing the service's runs from a queue."""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
import time
from typing import Any

from reactor._cli._base import (
    CommandError,
    add_gc_option,
    checked_settings,
    db_argument,
    positive_arg,
    service_url,
    start_gc,
)

__all__ = [
    "WORKERS_EXAMPLE",
    "WORKERS_SUMMARY",
    "WORKER_EXAMPLE",
    "WORKER_SUMMARY",
    "add_worker_arguments",
    "cmd_worker",
    "cmd_workers",
]

WORKER_SUMMARY = "Execute the service's queued runs (needs REACTOR_REDIS_URL)."
WORKER_EXAMPLE = (
    "REACTOR_REDIS_URL=redis://127.0.0.1:6379/0 reactor worker "
    "--app examples.scale_out.app:make_service --concurrency 32"
)
WORKERS_SUMMARY = "List the live workers and the runs each executes."
WORKERS_EXAMPLE = "REACTOR_REDIS_URL=redis://127.0.0.1:6379/0 reactor workers"


def add_worker_arguments(worker: argparse.ArgumentParser) -> None:
    """Give ``reactor worker`` its options."""
    from reactor._cli._service import add_log_format, add_print_config, seconds_arg

    worker.add_argument(
        "--app",
        metavar="MODULE:SERVICE",
        help="the ReactionService whose runs to execute (or a function of the database URL "
        "returning one): the same as `reactor serve --app`; required",
    )
    worker.add_argument(
        "--db",
        metavar="URL",
        type=db_argument,
        help="the service's database: sqlite:///path.db, a file path or postgresql://... "
        "(default: $REACTOR_DB, else the app's)",
    )
    worker.add_argument(
        "--concurrency",
        type=positive_arg,
        default=32,
        help="runs executed at once (default: 32; runs mostly wait on the model, so more at "
        "once do more per second; lower it for CPU-heavy runs or few database connections)",
    )
    worker.add_argument(
        "--grace",
        type=seconds_arg,
        default=30.0,
        help="seconds runs in flight get to finish on SIGTERM (default: 30)",
    )
    add_print_config(worker)
    add_log_format(worker)
    add_gc_option(worker)


def _settings() -> object:
    from reactor.service._scaleout.queue import REDIS_ENV, QueueSettings

    checked_settings()  # a line per bad REACTOR_* value, exit 2
    settings = QueueSettings.from_env()
    if settings is None:
        raise CommandError(
            f"{REDIS_ENV} is not set: workers take their jobs from Redis, e.g. "
            f"{REDIS_ENV}=redis://127.0.0.1:6379/0 (without it `reactor serve` runs "
            "everything itself)"
        )
    return settings


def cmd_worker(args: argparse.Namespace) -> int:
    """``reactor worker``: execute queued runs until SIGTERM or Ctrl-C, then drain."""
    from reactor._cli._service import logged, print_config, start_logging

    if args.print_config:
        config = checked_settings(**({"service_db": args.db} if args.db else {}))
        given = {"--concurrency": args.concurrency, "--grace": args.grace}
        sources = {"--concurrency": 32, "--grace": 30.0}  # the defaults
        options = [
            (name, str(value), "default" if value == sources[name] else "option")
            for name, value in given.items()
        ]
        return print_config(config, options)
    if args.app is None:
        args.parser.error("the following arguments are required: --app")
    as_json = start_logging(args.log_format)
    return logged("worker", as_json, lambda: _work(args))


def _work(args: argparse.Namespace) -> int:
    from reactor._cli._service import app_service
    from reactor._signals.diagnostics import log
    from reactor.exceptions import ServiceConfigError
    from reactor.service._hosting.telemetry import telemetry_from_env
    from reactor.service._scaleout.queue import QueueSettings
    from reactor.service._scaleout.worker import Worker

    settings = _settings()
    assert isinstance(settings, QueueSettings)
    db = service_url(args.db or checked_settings().service_db)
    service = app_service(args.app, db, given_db=args.db is not None)
    try:
        telemetry = telemetry_from_env()
    except ServiceConfigError as exc:
        raise CommandError(str(exc)) from None
    if telemetry is not None:
        service.reporters.append(telemetry.reporter)
    worker = Worker(service, settings, concurrency=args.concurrency, grace=args.grace)

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        log("reactor.worker", "info", "taking jobs", worker=worker.id, concurrency=args.concurrency)
        await worker.run(stop)

    start_gc(args)  # once it is sure to start: a refusal stays the only line
    try:
        asyncio.run(main())
    finally:
        if telemetry is not None:
            telemetry.close()  # the spans still batched are exported
    return 0


def cmd_workers(args: argparse.Namespace) -> int:
    """``reactor workers``: the live workers, their runs, and the jobs waiting for other code."""
    from reactor.service._scaleout.queue import QueueSettings
    from reactor.service._scaleout.waiting import waiting_jobs
    from reactor.service._scaleout.worker import live_workers

    settings = _settings()
    assert isinstance(settings, QueueSettings)

    async def look() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        return await live_workers(settings), await waiting_jobs(settings)

    workers, waiting = asyncio.run(look())
    now = time.time()
    if not workers:
        print("No live workers (start one with `reactor worker --app MODULE:SERVICE`).")
    for worker in workers:
        runs = worker["runs"]
        print(
            f"{worker['id']}  pid {worker['pid']}  up {now - worker['started_at']:.0f}s  "
            f"{len(runs)}/{worker['concurrency']} running  {worker['executed']} done"
        )
        for run_id in runs:
            print(f"  {run_id}")
    if waiting:  # their graph or agent is not in the code of the workers that took them
        print(f"{len(waiting)} job{'s' if len(waiting) != 1 else ''} waiting for other code:")
    for job in waiting:
        print(
            f"  {job['job']}  waiting for a worker with {job['waits_for']}  "
            f"for {now - float(job['since']):.0f}s"
        )
    sys.stdout.flush()
    return 0

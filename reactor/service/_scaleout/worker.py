"""``reactor worker``: executes the service's runs from the job queue.

A worker opens the service's database and signal store (not its dispatcher or
schedules), then takes jobs from the Redis stream with taskiq's receiver, ``concurrency``
at a time (waiting for Redis, with backoff, if it is not there yet). For each job it:

0. leaves it pending for another worker if the job's graph or agent is not in this
   code (a rolling deploy: :mod:`reactor.service._scaleout.waiting`);
1. takes the run's lease in the database, or puts the job back unacknowledged when a
   live worker holds it (a long run whose job was reclaimed by idle time);
2. drops it (acknowledged) if its run has ``harness:end`` in the log: a duplicate (the
   log is read under the lease, and a worker makes its log durable before it gives a
   lease back, so what the previous holder recorded is all there);
3. starts the run as the job says, or resumes it when the log already has it (a job a
   dead worker left: what completed is not repeated);
4. once the run has ended, makes its log durable, gives the lease back (forgetting the
   job's row in ``queued_jobs`` in the same transaction) and acknowledges the job, off
   the job's slot and grouped with the other runs ending then: one flush, one
   transaction and one Redis command for all of them.

A reaction's job names a processing-log entry: the worker leases it the same way,
takes it (``pending``, or ``processing`` when the worker that had it died), runs the
reaction and records how it ended, as the serving process would without a queue. An
entry of a ``queue`` agent waits for the earlier ones of its object.

After each reconnect to Redis (and when it starts) it queues again the jobs the
database keeps and Redis lost (:mod:`reactor.service._scaleout.jobs`). On PostgreSQL
its log refuses the appends of a run whose lease another worker took
(:class:`~reactor.service._scaleout.durable.LogFence`).

Its heartbeat is a Redis key (``<prefix>:worker:<id>``) naming its runs, renewed with
the leases; ``reactor workers`` lists them. On SIGTERM it takes no more jobs, holds
at once the runs that wait for a person, a timer or a scheduled message, gives the
other runs in flight ``grace`` seconds, then holds the rest unfinished and
unacknowledged: another worker resumes them.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import socket
import time
import uuid
from typing import Any

import sqlalchemy as sa
from taskiq import Context, TaskiqDepends
from taskiq.receiver import Receiver

from reactor._signals.diagnostics import log
from reactor._signals.redisclient import Redis, redis_at
from reactor.exceptions import ReactorError, RunNotFoundError
from reactor.service._hosting.hosting import close_record, default_record
from reactor.service._hosting.service import ReactionService
from reactor.service._objects.owners import Owners
from reactor.service._objects.schema import agents
from reactor.service._reactions.dispatcher import Dispatcher
from reactor.service._reactions.reaction import ReactionServices
from reactor.service._reactions.registry import ReactionAgent, register
from reactor.service._scaleout.durable import Batched, Flushes, Grouped, LogFence
from reactor.service._scaleout.leases import Leases
from reactor.service._scaleout.queue import (
    REACTION,
    TASK,
    JobBroker,
    JobQueue,
    QueueSettings,
    live_workers,
    request_of,
)
from reactor.service._scaleout.waiting import Waiting

__all__ = ["Worker", "live_workers"]

_CONTEXT: Any = TaskiqDepends()
"""taskiq gives a job's function its context (to acknowledge the job) through this."""


class Worker:
    """Executes queued runs of ``service`` (see the module's docstring).

    Args:
        service: The application's service: its graphs, agents, provider, database.
        settings: The queue (``QueueSettings.from_env()`` in ``reactor worker``).
        concurrency: Runs executed at once.
        grace: Seconds runs in flight get to finish on shutdown.
    """

    def __init__(
        self,
        service: ReactionService,
        settings: QueueSettings,
        *,
        concurrency: int = 32,
        grace: float = 30.0,
    ) -> None:
        if concurrency < 1:
            raise ValueError(f"concurrency must be 1 or more, got {concurrency}.")
        self.service, self.settings = service, settings
        self.concurrency, self.grace = concurrency, grace
        self.id = f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self.broker = JobBroker(settings, consumer=self.id)
        self.queue = JobQueue(settings, service.db)  # to queue again what Redis lost
        self._recover = asyncio.Event()
        self.broker.reconnected = self._recover.set
        self.leases = Leases(service.db, self.id, settings.reclaim_after)
        self.owners = Owners(service.db, self.id)
        service.log.owner = self.id  # the processing-log entries it takes are its own
        self.running: dict[str, float] = {}  # run id -> when it started here
        self._agents_mark: tuple[Any, ...] = ()  # the agents' rows when last read
        self.executed = 0
        self.lost: set[str] = set()  # runs stopped here because another worker took them
        self._group: asyncio.TaskGroup | None = None
        self.settling: set[str] = set()  # runs ended here whose job is being settled
        self.flushes = Flushes(lambda: self.service.host.record)
        self.handovers: Grouped[tuple[str, bool]] = Grouped(self._hand_over)
        self.takes: Batched[str, bool] = Batched(self.leases.take_all)
        self.taking: set[str] = set()  # runs (or reactions) whose lease is being taken
        self.broker.room = lambda: self.concurrency - self.broker.in_hand
        self.unmarks: Grouped[tuple[str, ...]] = Grouped(self._unmark)
        self.held: set[str] = set()  # runs suspended here on SIGTERM: their jobs stay pending
        reread = functools.partial(self._read_agents, if_changed=True)
        self.waiting = Waiting(service, self.broker, self.id, settings.reclaim_after, reread)

        async def run_job(job: dict[str, Any], context: Context = _CONTEXT) -> None:
            try:
                await self._job(job, context)
            finally:
                self.broker.in_hand -= 1  # its slot is free: one more job read next time

        self.broker.register_task(run_job, task_name=TASK, ack_type="manual")

    async def run(self, stop: asyncio.Event) -> None:
        """Execute jobs until ``stop`` is set, then drain (see the module's docstring)."""
        service = self.service
        await service.objects.open()
        await service.db.open()
        record, owned = (service.record, False) if service.record else (None, True)
        if record is None:
            record, _ = await default_record(service.db)
            if service.db.dialect == "postgresql":  # the log beside the leases: fence it
                LogFence(self.leases, self._fenced).guard(record)
        await register(service.db, service.agents)
        receiver = Receiver(
            self.broker,
            max_async_tasks=self.concurrency,
            wait_tasks_timeout=self.grace,
            ack_type=None,
            run_startup=False,  # the broker starts once Redis answers (it may be down now)
        )
        try:
            async with asyncio.TaskGroup() as group:
                self._group = group
                service.host.open(group, record, lambda: None)
                assert service.host.record is not None
                assert service.host.fenced is not None
                service.host.fenced.fence = self._may_write
                services = ReactionServices(
                    service.objects, service.suggestion_store, service.host, service.host.record
                )
                self.reactions = Dispatcher(
                    services,
                    service.log,
                    agents={},
                    cursors={},
                    group=group,
                    max_running=self.concurrency,
                    changed=lambda: None,
                )
                await self._read_agents()
                finishing = group.create_task(self.reactions.finishes.run())
                beat = group.create_task(self._heartbeat())
                self._recover.set()  # jobs Redis lost while no worker was there
                recovering = group.create_task(self.queue.requeue_after_reconnects(self._recover))
                holding = group.create_task(self._hold_waiting(stop))
                log("reactor.worker", "info", "worker started", worker=self.id)
                await receiver.listen(stop)
                service.host.close()  # runs still going are suspended: their jobs stay pending
                if suspending := list(service.host.runs.tasks):  # then their jobs settle
                    await asyncio.wait(suspending, timeout=self.grace)
                for task in self.reactions.active.values():
                    task.cancel()  # taken up again by whoever gets their jobs
                await asyncio.sleep(0)  # let them unwind before the batcher stops
                finishing.cancel()
                beat.cancel()
                recovering.cancel()
                holding.cancel()
        finally:
            with contextlib.suppress(Exception):
                await self._forget()
            await self.broker.shutdown()
            await self.queue.aclose()
            await close_record(record, record if owned else None)
            await service.objects.close()
            await service.db.close()
            log("reactor.worker", "info", "worker stopped", worker=self.id, runs=self.executed)

    async def _read_agents(self, *, if_changed: bool = False) -> None:
        """Read the agents from the database again (``if_changed``: only if rows changed)."""
        async with self.service.db.read() as conn:
            found = await conn.execute(sa.select(sa.func.count(), sa.func.max(agents.c.updated_at)))
            mark = tuple(found.one())
        if if_changed and mark == self._agents_mark:
            return
        self._agents_mark = mark
        loaded = await self.service.catalog.load()
        self.reactions.agents = {name: ReactionAgent.of(name, a) for name, a in loaded.items()}

    async def _job(self, job: dict[str, Any], context: Context = _CONTEXT) -> None:
        if REACTION in job:
            await self._reaction(int(job[REACTION]), str(job.get("agent")), context)
            return
        request = request_of(job)
        run_id = request.resume or request.run_id
        if run_id is None:
            await context.ack()
            return
        lacks = await self.waiting.lacks(request.kind, request.name)
        if lacks is not None:  # not this worker's to drop: one with that code will run it
            await self.waiting.leave(run_id, lacks, context)
            return
        record = self.service.host.record
        assert record is not None
        if not await self._lease(run_id):
            return  # leave the job pending, to be looked at again
        self.running[run_id] = time.time()
        ended = False
        try:
            # Read the run's row once the lease is ours: what a worker that had the run
            # before wrote is all there (it makes its log durable before giving the lease
            # back). One row, not the log: the resume reads the log's tail.
            try:
                info = await asyncio.to_thread(record.info, run_id)
            except RunNotFoundError:
                info = None
            if info is not None and info.complete:
                ended = True  # it ended: a job delivered twice is harmless
            else:
                if info is not None:
                    log(
                        "reactor.worker",
                        "info",
                        "run resumed",
                        run_id=run_id,
                        worker=self.id,
                        signals=info.signals,
                    )
                    if request.resume is None:
                        request = request.__class__(**{**job, "resume": run_id, "run_id": None})
                await self._execute(run_id, request)
        except ReactorError as exc:  # it cannot run (finished, its agent deleted): never will
            log("reactor.worker", "error", "job dropped", run_id=run_id, error=str(exc))
            ended = True
        except BaseException:
            self.running.pop(run_id, None)
            with contextlib.suppress(Exception):  # what it recorded is durable first
                await asyncio.to_thread(record.flush)
            await self.leases.give_back(run_id)
            raise
        self.settling.add(run_id)
        self.running.pop(run_id, None)
        assert self._group is not None
        self._group.create_task(self._settle(run_id, context, ended=ended))

    async def _settle(self, run_id: str, context: Context, *, ended: bool) -> None:
        """Make the run's log durable, give its lease back, acknowledge its job (off its slot).

        Not acknowledged if the run was lost or held. Until then the run counts as here
        (:meth:`_lease`): taken next, it would be read from a log still being written.
        """
        record, host = self.service.host.record, self.service.host
        # Its job is done (and its row forgotten with the lease) unless another worker has
        # the run or it stays for the next one (held, stopping): with the log durable, a
        # job delivered again is found ended, one Redis lost is not missed.
        done = ended or not (run_id in self.lost or run_id in self.held or host.stopping)
        try:
            try:
                if record is not None and not ended:
                    await self.flushes.durable()
                await self.handovers((run_id, done))
            finally:
                self.settling.discard(run_id)
            if done:
                self.executed += not ended
                await self._ack(run_id, context)
            else:  # lost: its new holder executes it and acknowledges the job
                self.lost.discard(run_id)
        except Exception as exc:  # the lease runs out, the job is delivered again: dropped
            log("reactor.worker", "error", "run not settled", run_id=run_id, error=repr(exc))

    async def _hand_over(self, runs: list[tuple[str, bool]]) -> None:
        """Give the leases of ``runs`` back, forget the rows of the done ones: one transaction."""
        await self.leases.give_back_all([run for run, _ in runs], [r for r, done in runs if done])

    async def _unmark(self, keys: list[tuple[str, ...]]) -> None:
        """Delete the markers of jobs done (after their rows): one command for all."""
        await self.broker.redis.delete(*(key for group in keys for key in group))

    async def _ack(self, key: str, context: Context) -> None:
        """Acknowledge a job, then forget it in the database (it is no longer queued).

        With Redis away the job stays pending (or is lost with Redis's data, and then
        queued again from the database): delivered again, it is found done and dropped.
        """
        try:
            await context.ack()
            if key.startswith("reaction:"):
                await self.queue.remove(key)
            else:  # its row went with its lease
                keys = self.settings.keys
                await self.unmarks((keys.job + key, keys.queued + key, keys.waiting + key))
        except Exception as exc:
            log("reactor.worker", "warning", "job not acknowledged", job=key, error=repr(exc))

    async def _hold_waiting(self, stop: asyncio.Event) -> None:
        """On SIGTERM, suspend at once the runs that wait for a person, a timer or a message.

        They live in the log: waiting out the grace for them would only delay the stop.
        """
        await stop.wait()
        reactions = len(self.reactions.active)
        self.held.update(await self.service.host.hold_waiting(self.grace, reactions))

    async def _lease(self, key: str) -> bool:
        """Lease a run (or a reaction) to this worker; False if it executes already.

        Here (its job reclaimed by idle time from this very worker: the delivery
        executing it acknowledges it) or on another live worker.
        """
        if key in self.running or key in self.settling or key in self.taking:
            return False
        self.taking.add(key)
        try:  # with the other jobs starting now: one statement for all
            return await self.takes(key)
        finally:
            self.taking.discard(key)

    async def _reaction(self, entry_id: int, agent: str, context: Context) -> None:
        reactions = self.reactions
        key = f"reaction:{entry_id}"
        if agent not in reactions.agents:  # made or enabled since: read the agents again
            await self._read_agents()
            lacks = await self.waiting.lacks("agent", agent)
            if lacks is not None:  # a worker with that code will run it
                await self.waiting.leave(key, lacks, context)
                return
        if not await self._lease(key):
            return  # leave the job pending
        self.running[key] = time.time()
        try:
            settled = await reactions.run_entry(entry_id, patience=self.settings.reclaim_after)
        finally:
            self.running.pop(key, None)
            await self.leases.give_back(key)
        if key in self.lost:
            self.lost.discard(key)
            return
        if settled and not self.service.host.stopping:
            self.executed += 1
            await self._ack(key, context)

    async def _execute(self, run_id: str, request: Any) -> None:
        host = self.service.host
        await host.execute(request)
        assert self._group is not None  # shown queued until its start is in the store, off
        self._group.create_task(self._started(run_id))  # the job's slot (one flush for many)
        live = host.runs.live.get(run_id)
        if live is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(live.task)

    async def _started(self, run_id: str) -> None:
        """Once the run's start is in the store (the API finds it there), unmark it queued."""
        if self.service.host.record is not None:
            await self.flushes.durable()
        with contextlib.suppress(Exception):  # Redis away: unmarked when its job is done
            await self.unmarks((self.settings.keys.queued + run_id,))

    async def _heartbeat(self) -> None:
        """Renew the leases of the runs here and this worker's key in Redis; reread agents."""
        every = max(0.2, self.settings.reclaim_after / 3)
        started = time.time()
        failing: set[str] = set()  # what failed on the last beat (said once, until it works)

        def trouble(what: str, exc: BaseException | None) -> None:
            if exc is None and what in failing:
                failing.discard(what)
                log("reactor.worker", "info", f"{what} reachable again", worker=self.id)
            elif exc is not None and what not in failing:
                failing.add(what)
                log("reactor.worker", "warning", f"{what} unreachable", error=repr(exc))

        async with redis_at(self.settings.url) as redis:
            while True:
                try:
                    lost = await self.leases.renew(list(self.running))
                    await self.owners.beat()
                except Exception as exc:  # the database is away: the runs go on meanwhile
                    trouble("database", exc)
                else:
                    trouble("database", None)
                    self._lost(lost)
                try:  # agents changed through the API since the last look
                    await self._read_agents(if_changed=True)
                except Exception as exc:
                    log("reactor.worker", "error", "cannot read the agents", error=repr(exc))
                try:
                    await self._beat(redis, started)
                except Exception as exc:  # Redis is away: jobs wait, runs go on
                    trouble("redis", exc)
                else:
                    trouble("redis", None)
                await asyncio.sleep(every)

    async def _beat(self, redis: Redis, started: float) -> None:
        """This worker's key in Redis: what ``reactor workers`` shows."""
        ttl = max(2, int(self.settings.reclaim_after * 2))
        value = {
            "id": self.id,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "concurrency": self.concurrency,
            "started_at": started,
            "runs": sorted(self.running),
            "executed": self.executed,
            "beat_at": time.time(),
        }
        await redis.set(self.settings.keys.worker + self.id, json.dumps(value), ex=ttl)

    def _may_write(self, run_id: str) -> bool:
        """Whether a run executing here may still record: its lease is proved ours."""
        if run_id not in self.running or self.leases.owns(run_id):
            return True
        self._lost([run_id])
        return False

    def _fenced(self, runs: set[str]) -> None:
        log(
            "reactor.worker",
            "warning",
            "log refused appends from a stale lease",
            runs=",".join(sorted(runs)),
            worker=self.id,
        )
        self._lost(sorted(runs))

    def _lost(self, keys: list[str]) -> None:
        """Leases found taken (or unproved past their time): stop those runs here at once."""
        host = self.service.host
        for key in keys:
            if key not in self.running:
                continue
            log(
                "reactor.worker",
                "warning",
                "lease lost; stopping the run here (another worker has it)",
                run=key,
                worker=self.id,
            )
            self.lost.add(key)
            if key.startswith("reaction:"):
                self.reactions.cancel(int(key.removeprefix("reaction:")))
            else:
                host.runs.hold([key], "its lease was lost (another worker has it)")

    async def _forget(self) -> None:
        async with redis_at(self.settings.url) as redis:
            await redis.delete(self.settings.keys.worker + self.id)

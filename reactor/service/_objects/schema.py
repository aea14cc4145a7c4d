"""The service's tables, as SQLAlchemy Core: what queries are written against.

The database itself is made by the Alembic revisions in ``migrations/versions/`` (the
one schema source: a test checks that the migrated database and these tables agree,
on SQLite and PostgreSQL). Change a table here and add a revision beside it.

Idempotence rests on two constraints, not on any process's memory:

* ``uq_processing_log_active``: at most one ``pending``, ``processing`` or
  ``completed`` entry per (agent, object, version, event), so an event delivered
  twice, by any number of processes, is processed once per agent;
* the conditional updates of the log (``pending`` -> ``processing`` only from
  ``pending``; finishing only from ``processing``), so one process claims an entry.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

__all__ = [
    "ACTIVE_PREDICATE",
    "SUGGESTION_STATUSES",
    "JSONType",
    "Timestamp",
    "admission_buckets",
    "agent_runs",
    "agents",
    "audit_chains",
    "blocked_runs",
    "cron_ticks",
    "metadata",
    "object_events",
    "objects",
    "processing_history",
    "processing_log",
    "prompt_replies",
    "queued_jobs",
    "reaction_cursors",
    "run_leases",
    "service_processes",
    "suggestion_approvals",
    "suggestions",
    "web_sessions",
]

ACTIVE_PREDICATE = "status IN ('pending', 'processing', 'completed', 'held')"
"""Entries in these statuses make their (agent, object, version, event) taken: the
predicate of the partial unique index, so a duplicate is logged ``skipped`` (a held
entry goes on once released, so it holds its place)."""

NAMING = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "pk": "pk_%(table_name)s",
}

metadata = sa.MetaData(naming_convention=NAMING)

JSONType = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
"""JSON columns: ``JSONB`` on PostgreSQL, JSON text on SQLite."""

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
"""Autoincrementing ids (SQLite only autoincrements an INTEGER primary key)."""


class Timestamp(sa.TypeDecorator[datetime]):
    """A UTC timestamp: stored with its zone where the database keeps one, read back aware."""

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: sa.Dialect) -> datetime | None:
        if value is not None and value.tzinfo is not None:
            value = value.astimezone(UTC)
            if dialect.name == "sqlite":
                value = value.replace(tzinfo=None)
        return value

    def process_result_value(self, value: Any, dialect: sa.Dialect) -> datetime | None:
        if value is None:
            return None
        assert isinstance(value, datetime)
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _in(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


_EVENTS = ("created", "updated", "deleted")
_STATUSES = (
    "pending",
    "processing",
    "completed",
    "failed",
    "skipped",
    "abandoned",
    "superseded",
    "merged",
    "held",
)
SUGGESTION_STATUSES = ("pending", "completed", "rejected", "expired", "superseded")

objects = sa.Table(
    "objects",
    metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("type", sa.String(200), nullable=False, index=True),
    sa.Column("version", sa.Integer, nullable=False),
    sa.Column("data", JSONType, nullable=False),
    sa.Column("actor_type", sa.String(16), nullable=False),
    sa.Column("actor_id", sa.String(200), nullable=False),
    sa.Column("created_at", Timestamp, nullable=False),
    sa.Column("updated_at", Timestamp, nullable=False),
    sa.Index(None, "type", "updated_at", "id"),  # pages of a type's objects, newest first
    sa.Index(None, "updated_at", "id"),  # pages of all objects
)

object_events = sa.Table(
    "object_events",
    metadata,
    sa.Column("event_id", BigId, primary_key=True, autoincrement=True),
    sa.Column("object_id", sa.String(64), nullable=False),
    sa.Column("object_type", sa.String(200), nullable=False),
    sa.Column("version", sa.Integer, nullable=False),
    sa.Column("event", sa.String(16), nullable=False),
    sa.Column("data", JSONType, nullable=False),
    sa.Column("changes", JSONType, nullable=False),
    sa.Column("actor_type", sa.String(16), nullable=False),
    sa.Column("actor_id", sa.String(200), nullable=False),
    sa.Column("approved_by_type", sa.String(16)),
    sa.Column("approved_by_id", sa.String(200)),
    sa.Column("object_created_at", Timestamp, nullable=False),
    sa.Column("created_at", Timestamp, nullable=False),
    sa.Column("cause", JSONType),  # the reaction that made it: run_id, agent, depth, chain
    sa.Column("hash", sa.String(100)),  # its link in the table's hash chain (history.py)
    sa.CheckConstraint(_in("event", _EVENTS), name="event"),
    sa.Index(None, "object_id", "version"),
)

agents = sa.Table(
    "agents",
    metadata,
    sa.Column("name", sa.String(200), primary_key=True),
    sa.Column("prompt", sa.Text),
    sa.Column("role", sa.Text),
    sa.Column("trigger_type", sa.String(16), nullable=False),
    sa.Column("cron_schedule", sa.String(200)),
    sa.Column("reaction_config", JSONType),
    sa.Column("execution_mode", sa.String(16), nullable=False),
    sa.Column("capabilities", JSONType, nullable=False),
    sa.Column("output_schema", JSONType),
    sa.Column("enabled", sa.Boolean, nullable=False, server_default=sa.true()),
    sa.Column("defined_in", sa.String(16), nullable=False),
    sa.Column("created_at", Timestamp, nullable=False),
    sa.Column("updated_at", Timestamp, nullable=False),
    sa.Column("schedule_source", sa.String(8)),  # code agents: "code" or "api"
    sa.Column("code_schedule", sa.String(200)),  # the code's schedule at the last start
    sa.Column("approval", JSONType),  # who decides on its suggestions; NULL: Approval()
    sa.Column("spend_cap_usd", sa.Float),  # an admin's cap over its SpendCap's (NULL: none)
    sa.CheckConstraint(_in("trigger_type", ("manual", "cron", "reaction")), name="trigger_type"),
    sa.CheckConstraint(
        _in("execution_mode", ("execute", "suggest", "hybrid")), name="execution_mode"
    ),
    sa.CheckConstraint(_in("defined_in", ("code", "database")), name="defined_in"),
)

agent_runs = sa.Table(
    "agent_runs",
    metadata,
    sa.Column("id", BigId, primary_key=True, autoincrement=True),
    sa.Column("agent", sa.String(200), nullable=False),
    sa.Column("run_id", sa.String(64), nullable=False, unique=True),
    sa.Column("trigger", sa.String(16), nullable=False),
    sa.Column("started_at", Timestamp, nullable=False),
    sa.Index(None, "agent", "started_at"),
)

processing_log = sa.Table(
    "processing_log",
    metadata,
    sa.Column("id", BigId, primary_key=True, autoincrement=True),
    sa.Column("agent", sa.String(200), nullable=False),
    sa.Column("object_id", sa.String(64), nullable=False),
    sa.Column("object_version", sa.Integer, nullable=False),
    sa.Column("event_type", sa.String(16), nullable=False),
    sa.Column("event_id", sa.BigInteger, nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("error", sa.Text),
    sa.Column("run_id", sa.String(64)),
    sa.Column("created_at", Timestamp, nullable=False),
    sa.Column("updated_at", Timestamp, nullable=False),
    sa.Column("attempts", sa.Integer, nullable=False, server_default=sa.text("0")),
    sa.Column("owner", sa.String(200)),  # the process processing it
    sa.Column("superseded_by", sa.BigInteger),  # superseded or merged: the entry that took it
    sa.Column("cost_usd", sa.Float),  # what its run's model calls cost, once it ended
    sa.CheckConstraint(_in("status", _STATUSES), name="status"),
    sa.Index(
        "uq_processing_log_active",
        "agent",
        "object_id",
        "object_version",
        "event_type",
        unique=True,
        sqlite_where=sa.text(ACTIVE_PREDICATE),
        postgresql_where=sa.text(ACTIVE_PREDICATE),
    ),
    sa.Index(None, "status", "id"),  # the oldest pending entries, for whoever takes work
    sa.Index(None, "status", "updated_at"),  # entries processing for too long
    sa.Index(None, "object_id", "status"),  # an object's entries in flight, among its history
    sa.Index(None, "event_id"),  # what an object's change caused (its page's history)
    sa.Index(None, "agent", "status", "id"),  # an agent's entries waiting (admission, lag)
    sa.Index(None, "superseded_by"),  # what an entry took with it (its batch)
    # Pages of the log newest first, by agent or by object.
    sa.Index(None, "agent", "id"),
    sa.Index(None, "object_id", "id"),
)

admission_buckets = sa.Table(
    "admission_buckets",
    metadata,
    sa.Column("agent", sa.String(200), primary_key=True),
    sa.Column("key", sa.String(200), primary_key=True),
    sa.Column("due", sa.Float, nullable=False),
)
"""The token buckets of agents' ``Throttle`` policies, one row per (agent, key): ``due``
is the bucket's theoretical arrival time (UNIX seconds, GCRA): a trigger may start once
``due - (burst - 1) / rate`` has passed, and moves it on by ``1 / rate``. Kept in the
database so that every process of the service shares the bucket."""

processing_history = sa.Table(
    "processing_history",
    metadata,
    sa.Column("id", BigId, primary_key=True, autoincrement=True),
    sa.Column("name", sa.String(64), nullable=False),  # suggestion:approved, ...
    sa.Column("suggestion_id", sa.String(64)),
    sa.Column("object_id", sa.String(64)),
    sa.Column("payload", JSONType, nullable=False),
    sa.Column("created_at", Timestamp, nullable=False),
    sa.Column("hash", sa.String(100)),  # its link in the table's hash chain (history.py)
    sa.Index(None, "suggestion_id"),
    sa.Index(None, "object_id"),
)
"""The processing log's history: what people decided about agents' work (approving or
rejecting a suggestion, with who, when and on which version), one row per decision,
never changed: the audit trail of the service's side of the log."""

audit_chains = sa.Table(
    "audit_chains",
    metadata,
    sa.Column("table_name", sa.String(64), primary_key=True),
    sa.Column("since", Timestamp, nullable=False),
    sa.Column("pruned_through", sa.BigInteger),  # retention deleted the rows up to this id
    sa.Column("pruned_hash", sa.String(200)),  # the hash of that last deleted row: the anchor
)
"""When each hash-chained table (``processing_history``, ``object_events``) began to be
chained: a row of it written since without a hash had its hash removed. Once retention
deleted its oldest rows, ``pruned_through`` and ``pruned_hash`` anchor what is kept: the
first row kept links from ``pruned_hash``."""

suggestions = sa.Table(
    "suggestions",
    metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("agent", sa.String(200), nullable=False),
    sa.Column("object_id", sa.String(64)),
    sa.Column("changes", JSONType, nullable=False),
    sa.Column("reasoning", sa.Text, nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("run_id", sa.String(64)),
    sa.Column("created_at", Timestamp, nullable=False),
    sa.Column("resolved_at", Timestamp),
    sa.Column("resolved_by_type", sa.String(16)),
    sa.Column("resolved_by_id", sa.String(200)),
    sa.Column("object_version", sa.Integer),  # the object's version it was based on
    sa.Column("proposer_type", sa.String(16)),  # who made the change the agent reacted to
    sa.Column("proposer_id", sa.String(200)),
    # The desk (revision 0012): a newer suggestion of the same agent for the same object
    # supersedes a pending one; what a suggestion depends on, as the agent saw it; pages
    # newest first (all, by status, by agent), and the pending one of an agent's object.
    sa.Column("superseded_by", sa.String(64)),
    sa.Column("basis", JSONType),  # {field: value}; NULL: made before (its version counts)
    sa.CheckConstraint(_in("status", SUGGESTION_STATUSES), name="status"),
    sa.Index(None, "created_at", "id"),
    sa.Index(None, "status", "created_at", "id"),
    sa.Index(None, "agent", "status", "created_at", "id"),
    sa.Index(None, "object_id", "agent", "status"),
)

suggestion_approvals = sa.Table(
    "suggestion_approvals",
    metadata,
    sa.Column("suggestion_id", sa.String(64), primary_key=True),
    sa.Column("principal_id", sa.String(200), primary_key=True),
    sa.Column("changes_sha256", sa.String(64), primary_key=True),
    sa.Column("roles", sa.String(200), nullable=False),
    sa.Column("authenticator", sa.String(64), nullable=False),
    sa.Column("decided_at", Timestamp, nullable=False),
)
"""The approvals a pending suggestion has gathered (an agent's ``Approval(count=2)``
needs two), one row per principal and version of the changes approved: the primary key
refuses a principal approving the same changes twice, in one statement and across
processes; an edit of the changes (a ``modify``) starts the count anew."""

reaction_cursors = sa.Table(
    "reaction_cursors",
    metadata,
    sa.Column("agent", sa.String(200), primary_key=True),
    sa.Column("event_id", sa.BigInteger, nullable=False),
    sa.Column("updated_at", Timestamp, nullable=False),
)
"""How far each reaction agent's events have been dispatched (the last ``event_id``)."""

run_leases = sa.Table(
    "run_leases",
    metadata,
    sa.Column("run_id", sa.String(64), primary_key=True),
    sa.Column("worker", sa.String(200), nullable=False),
    sa.Column("heartbeat_at", Timestamp, nullable=False),
    sa.Column("epoch", sa.Integer, nullable=False, server_default=sa.text("1")),
)
"""Which worker executes a run (scale-out): a live worker renews ``heartbeat_at``; a
lease whose heartbeat is older than the reclaim time is taken over, and its ``epoch``
(the fencing token) grows, so the worker that lost it can tell."""

prompt_replies = sa.Table(
    "prompt_replies",
    metadata,
    sa.Column("run_id", sa.String(64), primary_key=True),
    sa.Column("prompt_id", sa.String(200), primary_key=True),
    sa.Column("answer", JSONType),
    sa.Column("answered_by", sa.String(200), nullable=False),
    sa.Column("answered_at", Timestamp, nullable=False),
    sa.Column("message_id", sa.String(64)),
)
"""The reply accepted for each prompt answered through the service: the primary key
decides, in one statement and across processes, which of two replies is first."""

service_processes = sa.Table(
    "service_processes",
    metadata,
    sa.Column("id", sa.String(200), primary_key=True),
    sa.Column("heartbeat_at", Timestamp, nullable=False),
)
"""The serving processes and their heartbeats: a processing-log entry whose owner has
no fresh heartbeat here was left by a process that died."""

cron_ticks = sa.Table(
    "cron_ticks",
    metadata,
    sa.Column("agent", sa.String(200), primary_key=True),
    sa.Column("tick_at", Timestamp, primary_key=True),
    sa.Column("claimed_at", Timestamp, nullable=False),
)
"""One row per cron agent and firing time: the process that inserts it runs the agent,
so several serving processes run a schedule once per tick."""

web_sessions = sa.Table(
    "web_sessions",
    metadata,
    sa.Column("id_hash", sa.String(64), primary_key=True),
    sa.Column("user_id", sa.String(200), nullable=False),
    sa.Column("csrf", sa.String(64), nullable=False),
    sa.Column("created_at", Timestamp, nullable=False),
    sa.Column("used_at", Timestamp, nullable=False),
    sa.Column("roles", sa.String(200)),  # "approver+operator"; NULL: made before roles
    sa.Column("authenticator", sa.String(64)),
    sa.Index(None, "used_at"),
)
"""The web UI's signed-in browsers, shared by every serving process: the SHA-256 of the
session id (the cookie's value is never stored), who signed in with which roles and
through which authenticator, the forms' CSRF token."""

blocked_runs = sa.Table(
    "blocked_runs",
    metadata,
    sa.Column("run_id", sa.String(64), primary_key=True),
    sa.Column("reason", sa.Text, nullable=False),
    sa.Column("blocked_at", Timestamp, nullable=False),
)
"""Unfinished runs the service will not resume by itself: their graph changed what their
log says was done (``GraphChangedError``). Each waits for ``POST /api/runs/{id}/resume?
force=true``, or for code that can resume it."""

queued_jobs = sa.Table(
    "queued_jobs",
    metadata,
    sa.Column("key", sa.String(80), primary_key=True),
    sa.Column("job", JSONType, nullable=False),
    sa.Column("queued_at", Timestamp, nullable=False),
)
"""The jobs on the Redis stream that are not acknowledged yet (scale-out): a run's
(``key`` its run id) or a reaction's (``reaction:<entry id>``), with the job itself.
The row lives from the enqueue to the acknowledgement, so a job Redis lost (restarted
without its data) is known here and queued again."""

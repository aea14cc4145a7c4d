"""Deciding on suggestions: who may, what a decision carries, and applying what is approved.

A decision is ``approve``, ``reject``, ``modify`` (approve with edited changes, checked
like the agent's own: its capabilities, the objects' types) or ``override`` (approve a
suggestion whose object changed since, with ``force``). The suggestion's agent's
:class:`~reactor.service.Approval` says who may decide and what a decision must carry:

* ``by``: the roles or users (``user:<id>``) who may decide; an ``admin`` always may;
* ``distinct_from_proposer``: the principal whose write the agent reacted to may not
  approve (reject, it may);
* ``expires_after``: an older suggestion can no longer be approved (it becomes
  ``expired``, ``409``);
* ``count``: how many distinct principals must approve before the changes apply (the
  same one twice is ``409``); until then the suggestion stays pending, its approvals
  listed;
* ``justification``: required for an ``override`` (``"override"``), for every decision
  (``"always"``) or never; at most ``REACTOR_MAX_REASON`` bytes.

These are checked for a :class:`~reactor.service.Principal` (the HTTP API's and the web
UI's callers, or one given in Python); the application's own code, deciding without a
principal, is not held to ``by`` and ``distinct_from_proposer``, and the rest holds for
it too.

Each decision is recorded with its provenance (:class:`SuggestionDecided`: the
suggestion, the run and agent that proposed it, the object and its version, the SHA-256
of the canonical JSON of the changes decided on, the principal's id, roles and
authenticator, the time, the decision, its outcome and justification): a line
``suggestion:decided`` of the processing log's history, written in the transaction
that makes the decision true (an approval that applies the changes: with them, when the
suggestions live in the objects' database), and a line of the JSON log once it is
stored. The bus still hears ``suggestion:approved`` when changes are applied and
``suggestion:rejected``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Literal, Protocol

from reactor._agents.agent import Agent
from reactor._agents.reaction import Approval
from reactor._signals.diagnostics import log
from reactor._signals.door import check_length, check_payload
from reactor._signals.names import SUGGESTION_APPROVED, SUGGESTION_DECIDED, SUGGESTION_REJECTED
from reactor._signals.payloads import DecidingPrincipal, SuggestionDecided
from reactor._signals.settings import settings
from reactor.exceptions import (
    ObjectNotFoundError,
    PayloadError,
    SuggestionStaleError,
)
from reactor.service._access.roles import denied
from reactor.service._objects.changes import Approved, Create, Operation, Suggestion, Update
from reactor.service._objects.history import history_row
from reactor.service._objects.objects import ObjectStore
from reactor.service._objects.rows import operations_adapter
from reactor.service._objects.suggestions import Suggestions, resolved_error
from reactor.service._objects.values import (
    CURRENT_CAUSE,
    AgentActor,
    Cause,
    Principal,
    StoredObject,
    User,
)
from reactor.service._objects.writes import Expected, changed_fields
from reactor.service._reactions.reaction import announce, check_all

__all__ = [
    "Asked",
    "Decide",
    "Decider",
    "DecisionKind",
    "Record",
    "Staleness",
    "approve",
    "canonical_changes",
    "changes_digest",
    "judged",
    "justified",
    "log_line",
    "may_decide",
    "policy_of",
    "reject",
    "staleness",
]

DecisionKind = Literal["approve", "reject", "modify", "override"]


@dataclasses.dataclass(frozen=True)
class Decider:
    """Who decides: a principal, or (``None``) the application's own code as ``actor``."""

    actor: User | AgentActor
    principal: Principal | None = None

    @property
    def id(self) -> str:
        """The decider's id: whose approvals are counted as one."""
        return self.principal.id if self.principal is not None else self.actor.id

    def payload(self) -> DecidingPrincipal:
        """``{id, roles, authenticator}`` (``code`` for the application's own calls)."""
        if self.principal is None:
            return {"id": self.actor.id, "roles": [], "authenticator": "code"}
        return {
            "id": self.principal.id,
            "roles": sorted(self.principal.roles),
            "authenticator": self.principal.authenticator,
        }


@dataclasses.dataclass(frozen=True)
class Asked:
    """What a decision asks for, besides its suggestion.

    Attributes:
        decider: Who decides.
        force: Approve even if the object changed since the suggestion (an ``override``).
        justification: Why, in the decider's words.
        operations: The edited changes (a ``modify``), instead of the proposed ones.
    """

    decider: Decider
    force: bool = False
    justification: str | None = None
    operations: tuple[Operation, ...] | None = None


class Decide(Protocol):
    """:func:`approve` and :func:`reject`: a decision on one suggestion."""

    async def __call__(
        self,
        objects: ObjectStore,
        suggestions: Suggestions,
        agents: Mapping[str, Agent],
        suggestion_id: str,
        asked: Asked,
    ) -> Suggestion:
        """Decide; the suggestion after it."""
        ...


def canonical_changes(operations: Sequence[Operation]) -> bytes:
    """The changes as canonical JSON: sorted keys, no spaces, UTF-8 (what is digested)."""
    data = operations_adapter.dump_python(tuple(operations), mode="json")
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def changes_digest(operations: Sequence[Operation]) -> str:
    """The SHA-256 (hex) of :func:`canonical_changes`."""
    return hashlib.sha256(canonical_changes(operations)).hexdigest()


def policy_of(agents: Mapping[str, Agent], suggestion: Suggestion) -> Approval:
    """Who may decide on a suggestion: its agent's ``Approval`` (``Approval()`` for one gone)."""
    agent = agents.get(suggestion.agent)
    return agent.approval if agent is not None else Approval()


def may_decide(
    policy: Approval, suggestion: Suggestion, decider: Decider, *, approving: bool
) -> None:
    """Refuse a principal the agent's ``Approval`` does not let decide (``403``)."""
    principal = decider.principal
    if principal is None:
        return
    what = f"Deciding on the suggestions of agent {suggestion.agent!r}"
    if not policy.allows(principal.id, principal.roles):
        needed = " or ".join(f"the {e} role" if ":" not in e else e for e in policy.by)
        role = next((entry for entry in policy.by if ":" not in entry), "approver")
        raise denied(
            principal,
            role,
            what,
            f"{what} needs {needed} (or the admin role), and {principal} holds "
            f"{', '.join(sorted(principal.roles)) or 'no role'}; ask someone who may.",
        )
    if approving and policy.distinct_from_proposer and suggestion.proposer == principal.user:
        raise denied(
            principal,
            "approver",
            f"Approving suggestion {suggestion.id}",
            f"{principal} made the change agent {suggestion.agent!r} reacted to, so they may "
            f"not approve suggestion {suggestion.id!r} (Approval(distinct_from_proposer="
            "True)): another principal must approve it.",
        )


def justified(policy: Approval, kind: DecisionKind, justification: str | None) -> str | None:
    """The justification, checked: required by the policy, short enough, storable.

    Raises:
        PayloadError: It is required and missing, too long, or cannot be stored (422).
    """
    given = justification.strip() if justification is not None else ""
    required = policy.justification == "always" or (
        policy.justification == "override" and kind == "override"
    )
    if required and not given:
        why = "every decision" if policy.justification == "always" else "an override"
        raise PayloadError(
            f"A justification is required for {why} on this agent's suggestions "
            f"(Approval(justification={policy.justification!r})): say why, in "
            "justification.",
            path="justification",
        )
    if not given:
        return None
    check_length(given, "justification", settings().max_reason, "REACTOR_MAX_REASON")
    check_payload(given, "justification", nul=True)
    return given


def _expired(policy: Approval, suggestion: Suggestion, now: datetime) -> bool:
    if policy.expires_after is None or suggestion.status != "pending":
        return False
    return now - suggestion.created_at > policy.expires_after


@dataclasses.dataclass(frozen=True)
class Staleness:
    """Whether a suggestion's object changed, since its agent saw it, in what it depends on.

    Attributes:
        stale: It did (or it was deleted): approving takes ``force`` (an override).
        current: The object now (``None``: deleted, or the suggestion is about none).
        changed: The fields the suggestion depends on that changed (its ``basis``).
    """

    stale: bool
    current: StoredObject | None = None
    changed: tuple[str, ...] = ()

    @property
    def version(self) -> int | None:
        """The object's version now (``None``: deleted, or no object)."""
        return None if self.current is None else self.current.version


def judged(suggestion: Suggestion, current: StoredObject | None) -> Staleness:
    """Judge a suggestion against its object as it is (``current``; ``None``: deleted).

    A suggestion with a ``basis`` is stale when one of its fields changed, or its object
    was deleted; one without (made before bases were kept) when its object's version
    moved. One about no object (or no version) is never stale.
    """
    if suggestion.object_id is None or not suggestion.object_version:
        return Staleness(False, current)
    if current is None:
        return Staleness(True)
    if suggestion.basis is None:
        return Staleness(current.version != suggestion.object_version, current)
    changed = tuple(changed_fields(suggestion.basis, current.data))
    return Staleness(bool(changed), current, changed)


async def staleness(objects: ObjectStore, suggestion: Suggestion) -> Staleness:
    """:func:`judged` against its object as it is now (read from ``objects``)."""
    if suggestion.object_id is None or not suggestion.object_version:
        return Staleness(False)
    try:
        current: StoredObject | None = await objects.get(suggestion.object_id)
    except ObjectNotFoundError:
        current = None
    return judged(suggestion, current)


def _stale(suggestion: Suggestion, current: StoredObject | None) -> SuggestionStaleError:
    found = judged(suggestion, current)
    if current is None:
        what = f"which was deleted since the agent saw version {suggestion.object_version}"
    elif found.changed:
        fields = ", ".join(repr(field) for field in found.changed)
        what = (
            f"whose {fields} changed since the agent saw version {suggestion.object_version} "
            f"(it is at version {current.version} now)"
        )
    else:
        what = (
            f"which is at version {current.version} now, not version "
            f"{suggestion.object_version} as the agent saw it"
        )
    return SuggestionStaleError(
        f"Suggestion {suggestion.id!r} is about object {suggestion.object_id!r}, {what}: "
        "look at the object again, then approve anyway (force=True, ?force=true, with a "
        "justification) or reject it.",
        suggestion_id=suggestion.id,
        object_id=suggestion.object_id or "",
        based_on=suggestion.object_version,
        current=found.version,
        changed=found.changed,
    )


async def _check_changes(
    objects: ObjectStore,
    agent: Agent | None,
    name: str,
    operations: Sequence[Operation],
    edited: Sequence[Operation] | None,
) -> None:
    """Check the changes decided on as the agent's own: capabilities, objects' types.

    The types are checked for an edit (``edited``): the agent's own changes were
    checked when it proposed them.

    Raises:
        CapabilityError: A change is outside the agent's capabilities.
        ObjectNotFoundError: A change names an unknown object.
        ObjectValidationError: Some edited data does not fit its type.
    """
    if agent is not None:
        await check_all(objects, name, agent.capabilities, list(operations))
    if edited is None:
        return
    created: set[str] = set()
    for op in operations:
        if isinstance(op, Create):
            objects.validate(op.type, op.data)
            created.update([op.id] if op.id else [])
        elif isinstance(op, Update) and op.id not in created:
            current = await objects.get(op.id)
            objects.validate(current.type, {**current.data, **op.data})


def diff_of(proposed: Sequence[Operation], decided: Sequence[Operation]) -> list[dict[str, Any]]:
    """Where edited changes differ from the proposed ones: ``{index, proposed, decided}``."""
    before = operations_adapter.dump_python(tuple(proposed), mode="json")
    after = operations_adapter.dump_python(tuple(decided), mode="json")
    return [
        {"index": i, "proposed": old, "decided": new}
        for i in range(max(len(before), len(after)))
        if (old := before[i] if i < len(before) else None)
        != (new := after[i] if i < len(after) else None)
    ]


@dataclasses.dataclass(frozen=True)
class Record:
    """What every line of one decision says; :meth:`line` adds what the count decides."""

    suggestion: Suggestion
    asked: Asked
    kind: DecisionKind
    operations: tuple[Operation, ...]
    needed: int
    justification: str | None
    decided_at: datetime

    def line(self, approvals: int, outcome: str) -> tuple[str, SuggestionDecided]:
        """The decision's line of the history, with ``approvals`` counted and its ``outcome``."""
        s, asked = self.suggestion, self.asked
        diff = diff_of(s.operations, self.operations) if self.kind == "modify" else None
        payload: SuggestionDecided = {
            "suggestion_id": s.id,
            "proposed_by_run": {"run_id": s.run_id, "agent": s.agent},
            "object_id": s.object_id,
            "object_version": s.object_version,
            "changes_sha256": changes_digest(self.operations),
            "principal": asked.decider.payload(),
            "decided_at": self.decided_at.isoformat(),
            "decision": self.kind,
            "outcome": outcome,
            "justification": self.justification,
            "force": asked.force,
            "approvals": approvals,
            "needed": self.needed,
            "diff": diff,
            "actor": asked.decider.actor.payload(),
        }
        return SUGGESTION_DECIDED, payload


async def approve(
    objects: ObjectStore,
    suggestions: Suggestions,
    agents: Mapping[str, Agent],
    suggestion_id: str,
    asked: Asked,
) -> Suggestion:
    """Approve a pending suggestion (or modify, or override it); apply it once approved.

    The approval is counted first (:meth:`Suggestions.approve`: of approvals made at
    once, exactly one completes it); the one that completes it applies the changes as
    the agent, ``approved_by`` the decider, in one transaction that checks the
    object's version again (unless forced) and writes the decision's line of the
    history; if they cannot be applied, the suggestion is pending again without that
    approval (its changes as before an edit), and nothing is recorded.

    Raises:
        SuggestionNotFoundError: No suggestion has that id.
        PermissionDeniedError: The agent's ``Approval`` does not let the principal approve.
        SuggestionResolvedError: It was resolved already, it expired, or the decider
            approved these changes already.
        SuggestionStaleError: The object changed since (and ``force`` is not set).
        PayloadError: A required justification is missing, or it is too long.
        CapabilityError: A change is outside the agent's capabilities.
        ObjectNotFoundError: A change names an object that no longer exists.
        ObjectValidationError: An edited change does not fit its object's type.
    """
    suggestion = await suggestions.get(suggestion_id)
    if suggestion.status != "pending":
        raise resolved_error(suggestion)
    agent, policy = agents.get(suggestion.agent), policy_of(agents, suggestion)
    may_decide(policy, suggestion, asked.decider, approving=True)
    now = datetime.now(UTC)
    if _expired(policy, suggestion, now):
        raise resolved_error(await suggestions.expire(suggestion_id, asked.decider.actor))
    operations = asked.operations if asked.operations is not None else suggestion.operations
    await _check_changes(objects, agent, suggestion.agent, operations, asked.operations)
    found = await staleness(objects, suggestion)
    stale = found.stale
    if stale and not asked.force:
        raise _stale(suggestion, found.current)
    kind: DecisionKind = (
        "modify" if asked.operations is not None else "override" if stale else "approve"
    )
    justification = justified(policy, kind, asked.justification)
    record = Record(suggestion, asked, kind, operations, policy.count, justification, now)
    approval = Approved(
        principal=asked.decider.id,
        roles=tuple(asked.decider.payload()["roles"]),
        authenticator=asked.decider.payload()["authenticator"],
        changes_sha256=changes_digest(operations),
        decided_at=now,
    )
    counted = await suggestions.approve(
        suggestion_id,
        approval,
        policy.count,
        lambda _, count, done: record.line(count, "applied" if done else "approved"),
        operations=asked.operations,
    )
    if not counted.completes:
        log_line(record.line(counted.approvals, "approved"))
        return counted.suggestion
    line = record.line(counted.approvals, "applied")
    try:
        await _apply(objects, suggestions, agent, counted.suggestion, asked, line, force=stale)
    except BaseException:
        restore = suggestion.operations if asked.operations is not None else None
        await suggestions.reopen(suggestion_id, approval, restore)
        raise
    log_line(line)
    announce(objects, SUGGESTION_APPROVED, counted.suggestion, asked.decider.actor)
    return counted.suggestion


def log_line(line: tuple[str, SuggestionDecided]) -> None:
    """The decision's line of the JSON log (once it is stored)."""
    name, payload = line
    log("reactor.service", "info", name, **payload)


async def _apply(
    objects: ObjectStore,
    suggestions: Suggestions,
    agent: Agent | None,
    suggestion: Suggestion,
    asked: Asked,
    line: tuple[str, SuggestionDecided],
    *,
    force: bool,
) -> None:
    """Apply an approved suggestion's changes as its agent, with its line of the history."""
    together = suggestions.db is objects.db  # one database: one transaction
    if agent is not None:
        await check_all(objects, suggestion.agent, agent.capabilities, list(suggestion.operations))
    expected: dict[str, Expected] | None = None
    if not force and suggestion.object_id is not None and suggestion.object_version:
        basis = suggestion.basis  # what it depends on; else (made before) its version
        expected = {suggestion.object_id: suggestion.object_version if basis is None else basis}
    # Its changes name the suggestion (and the run that made it) as their cause: no
    # reaction's, so a reaction to them is as deep as one to a person's change.
    cause = Cause(
        run_id=suggestion.run_id or "",
        agent=suggestion.agent,
        depth=0,
        suggestion_id=suggestion.id,
    )
    caused = CURRENT_CAUSE.set(cause)
    try:
        await objects.apply(
            suggestion.operations,
            actor=AgentActor(suggestion.agent),
            approved_by=asked.decider.actor,
            expect=expected,
            stale=lambda found: _stale(suggestion, found),
            also=(history_row(*line),) if together else (),
        )
    finally:
        CURRENT_CAUSE.reset(caused)
    if not together:
        await suggestions.history.add(*line)


async def reject(
    objects: ObjectStore,
    suggestions: Suggestions,
    agents: Mapping[str, Agent],
    suggestion_id: str,
    asked: Asked,
) -> Suggestion:
    """Mark a pending suggestion ``rejected``; nothing changes.

    Raises:
        SuggestionNotFoundError: No suggestion has that id.
        PermissionDeniedError: The agent's ``Approval`` does not let the principal decide.
        SuggestionResolvedError: It was resolved already.
        PayloadError: A required justification is missing, or it is too long.
    """
    current = await suggestions.get(suggestion_id)
    if current.status != "pending":
        raise resolved_error(current)
    policy = policy_of(agents, current)
    may_decide(policy, current, asked.decider, approving=False)
    justification = justified(policy, "reject", asked.justification)
    record = Record(
        current,
        asked,
        "reject",
        current.operations,
        policy.count,
        justification,
        datetime.now(UTC),
    )
    line = record.line(len(current.approvals), "rejected")
    suggestion = await suggestions.resolve(
        suggestion_id, "rejected", asked.decider.actor, decided=line
    )
    log_line(line)
    announce(objects, SUGGESTION_REJECTED, suggestion, asked.decider.actor)
    return suggestion

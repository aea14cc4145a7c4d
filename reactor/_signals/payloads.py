"""The shape of each signal's payload, by name (the names are in ``reactor._signals.names``).

Documentation as types: what ``signal.payload`` holds for each signal the library
emits. ``agent:<name>:<event>`` payloads are ``Agent*``, ``state:<key>:<event>``
payloads ``State*``, and so on.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NotRequired, TypedDict

from reactor._signals.names import ErrorInfo

__all__ = [
    "ActorPayload",
    "AgentActivated",
    "AgentCancelled",
    "AgentCompleted",
    "AgentFailed",
    "AgentSkipped",
    "CapabilityDenied",
    "CausePayload",
    "DecidingPrincipal",
    "HarnessEnd",
    "HarnessEnding",
    "HarnessForked",
    "HarnessResumed",
    "HarnessSnapshot",
    "HarnessStart",
    "HarnessSuspended",
    "ObjectChanged",
    "PromptEnd",
    "ProposedBy",
    "ProviderEnd",
    "ProviderErrorPayload",
    "ProviderRetryPayload",
    "ProviderStart",
    "SessionAbort",
    "SessionPrompt",
    "SessionReply",
    "SessionTimeout",
    "SpanPayload",
    "StateChanged",
    "StateItems",
    "SuggestionDecided",
    "SuggestionPayload",
    "SuggestionSuperseded",
    "TextPayload",
    "TimerFired",
    "TimerSet",
    "ToolCallPayload",
    "ToolResultPayload",
    "input_tokens",
]


class HarnessStart(TypedDict):
    """``harness:start``: the run's input, initial state and each agent's fingerprint."""

    input: Any
    state: Any
    fingerprints: NotRequired[dict[str, dict[str, str]]]


class HarnessResumed(TypedDict):
    """``harness:resumed``: the last ``seq`` recorded before the run stopped.

    ``fingerprints`` are the agents of the graph that goes on from here (a resume
    after a code change compares the next graph with them).
    """

    from_seq: int
    fingerprints: NotRequired[dict[str, dict[str, str]]]


class HarnessSnapshot(TypedDict):
    """``harness:snapshot``: what a resume needs, as it was right after signal ``seq``.

    ``state`` (the state then), ``input``, ``fingerprints``, and ``progress``: the
    activations in flight with their recorded answers, the signals some agent had not
    decided on yet, the questions pending, the agents' messages, the spent tokens.
    ``needs`` names the earlier signals a resume takes up again (runs of seqs
    ``[first, step, count]``): a store reading the run's tail reads them too.
    """

    seq: int
    needs: list[list[int]]
    input: Any
    state: dict[str, Any]
    fingerprints: dict[str, dict[str, str]] | None
    progress: dict[str, Any]


class HarnessForked(TypedDict):
    """``harness:forked``: the run whose log, up to signal ``at``, this one began with."""

    from_run_id: str
    at: int
    fingerprints: NotRequired[dict[str, dict[str, str]]]


class HarnessEnding(TypedDict):
    """``harness:ending``: why the run stops taking new work."""

    reason: str


class HarnessEnd(TypedDict):
    """``harness:end``: how the run ended."""

    status: str
    reason: str
    duration_ms: float
    activations: int
    failures: int


class HarnessSuspended(TypedDict):
    """``harness:suspended``: why the run stopped without ending (it resumes after it).

    A shutdown, a worker that stops or lost the run, ``handle.suspend(reason)``: never
    an outcome, so the run stays ``running`` or ``waiting`` in its store.
    """

    reason: str


class AgentActivated(TypedDict):
    """``agent:<name>:activated``: the trigger's name."""

    agent: str
    trigger: str


class AgentSkipped(TypedDict):
    """``agent:<name>:skipped``: ``reason``, and for admission's skips who took it.

    ``reason`` is guard, busy, ended, limit, superseded, merged or spend_cap;
    ``superseded_by`` (superseded and merged) is the ``seq`` of the trigger that took
    it: the newer one, or the one it was merged into.
    """

    agent: str
    trigger: str
    reason: str
    superseded_by: NotRequired[int]


class AgentCompleted(TypedDict):
    """``agent:<name>:completed``: the validated output."""

    agent: str
    output: Any
    duration_ms: float


class AgentFailed(TypedDict):
    """``agent:<name>:failed``: the error that failed the activation."""

    agent: str
    error: ErrorInfo
    duration_ms: float


class AgentCancelled(TypedDict):
    """``agent:<name>:cancelled``: why the run cancelled the activation."""

    agent: str
    reason: str
    duration_ms: float


class StateChanged(TypedDict):
    """``state:<key>:changed``: old and new value, who wrote, which paths changed."""

    key: str
    old: Any
    new: Any
    actor: str
    paths: list[str]


class StateItems(TypedDict):
    """``state:<key>:added`` / ``:removed``: the items a list gained or lost."""

    key: str
    items: list[Any]
    actor: str


class SessionPrompt(TypedDict):
    """``session:prompt``: a question to a person; ``schema`` is the answer's, if typed."""

    prompt_id: str
    agent: str
    question: str
    choices: list[str] | None
    schema: dict[str, Any] | None


class SessionReply(TypedDict):
    """``session:reply``: the validated answer (as JSON data) to a prompt."""

    prompt_id: str
    answer: Any


class SessionAbort(TypedDict):
    """``session:abort``: the run was stopped through its inbox; it ends ``aborted``."""

    reason: str


class SessionTimeout(TypedDict):
    """``session:timeout``: a prompt that nobody answered in time."""

    prompt_id: str


class TimerSet(TypedDict):
    """``timer:set``: an agent sleeps until ``until`` (ISO 8601 in UTC)."""

    timer_id: str
    agent: str
    until: str


class TimerFired(TypedDict):
    """``timer:fired``: the timer's time came; the agent goes on.

    ``cancelled`` (true) when the sleep was cancelled before its time instead.
    """

    timer_id: str
    agent: str
    cancelled: NotRequired[bool]


class SpanPayload(TypedDict):
    """``phase:*`` and ``task:*``; ``duration_ms`` and ``error`` are ``None`` at the start."""

    name: str
    agent: str
    duration_ms: float | None
    error: ErrorInfo | None


class ProviderStart(TypedDict):
    """``provider:start``: which agent asks which model, and the request's hash."""

    agent: str
    model: str | None
    request_hash: str


class TextPayload(TypedDict):
    """``text:delta``, ``thinking:delta`` and ``text:complete``."""

    agent: str
    content: str


class ToolCallPayload(TypedDict):
    """``tool:call``: the model asked for a tool."""

    agent: str
    id: str
    name: str
    input: dict[str, Any]


class ToolResultPayload(TypedDict):
    """``tool:result``: what went back to the model."""

    agent: str
    id: str
    name: str
    result: Any
    error: str | None


class ProviderEnd(TypedDict):
    """``provider:end``: the answer, its usage and cost, why the model stopped."""

    agent: str
    output: Any
    usage: dict[str, int]
    cost_usd: float | None
    stop_reason: str | None
    duration_ms: float


INPUT_TOKEN_KEYS = ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
"""The fields of ``provider:end``'s ``usage`` that are input the model read."""


def input_tokens(usage: Mapping[str, Any]) -> int:
    """All the input a model read in a call, from ``provider:end``'s ``usage``.

    Anthropic's ``input_tokens`` leaves out the tokens read from and written to the
    prompt cache; they are input the model read, so every count of input tokens
    (budgets, ``RunMetrics``, a run's row, :class:`~reactor.logging.MetricsReporter`,
    the progress line, evaluation reports, the web UI and OpenTelemetry) is this
    one function's. A value that is not a whole number counts 0.
    """
    return sum(_whole(usage.get(key)) for key in INPUT_TOKEN_KEYS)


def _whole(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


class ProviderErrorPayload(TypedDict):
    """``provider:error``: the failure, and whether trying again may help."""

    agent: str
    error: ErrorInfo
    retryable: bool


class ProviderRetryPayload(TypedDict):
    """``provider:retry``: the provider waits ``wait_s`` seconds, then asks again."""

    agent: str
    attempt: int
    wait_s: float
    status: int | None
    error: str


class PromptEnd(TypedDict):
    """``prompt:end``: the validated output (or the error), its usage, cost and duration."""

    agent: str
    output: Any
    error: ErrorInfo | None
    usage: dict[str, int]
    cost_usd: float | None
    duration_ms: float


class ActorPayload(TypedDict):
    """Who made a change: ``{"type": "user" | "agent", "id": ...}``."""

    type: str
    id: str


class ObjectChanged(TypedDict):
    """``object:<Type>:<event>``: the object after the change, and what changed."""

    id: str
    type: str
    version: int
    event: str
    data: dict[str, Any]
    changes: dict[str, Any]
    actor: ActorPayload
    cause: NotRequired[CausePayload | None]


class CausePayload(TypedDict):
    """The run that made an object change: ``{run_id, agent, depth, chain}``.

    ``suggestion_id``: the suggestion whose approval made it (only then).
    """

    run_id: str
    agent: str
    depth: int
    chain: list[str]
    suggestion_id: NotRequired[str]


class SuggestionPayload(TypedDict):
    """``suggestion:created|approved|rejected|superseded``: which suggestion, and who acted."""

    id: str
    agent: str
    object_id: str | None
    status: str
    reasoning: str
    operations: int
    actor: ActorPayload | None


class ProposedBy(TypedDict):
    """The run that proposed a suggestion, and its agent."""

    run_id: str | None
    agent: str


class DecidingPrincipal(TypedDict):
    """Who decided: the principal's id, its roles, and the authenticator that vouched."""

    id: str
    roles: list[str]
    authenticator: str


class SuggestionDecided(TypedDict):
    """``suggestion:decided``: one decision on a suggestion, with its provenance.

    In the processing log's history and the JSON log: which suggestion (proposed by
    which run of which agent), on which version of which object, the SHA-256 of the
    canonical JSON of the changes decided on (sorted keys, no spaces, UTF-8), who
    decided (principal id, roles, authenticator), when, the decision (``approve``,
    ``reject``, ``modify``: approved with edited changes, whose ``diff`` against the
    proposed ones is kept; ``override``: a stale suggestion approved with ``force``),
    its outcome (``approved``: counted, more approvals needed; ``applied``;
    ``rejected``), the approvals counted and needed, and the justification.
    """

    suggestion_id: str
    proposed_by_run: ProposedBy
    object_id: str | None
    object_version: int | None
    changes_sha256: str
    principal: DecidingPrincipal
    decided_at: str
    decision: str
    outcome: str
    justification: str | None
    force: bool
    approvals: int
    needed: int
    diff: list[dict[str, Any]] | None
    actor: ActorPayload


class SuggestionSuperseded(TypedDict):
    """``suggestion:superseded``: a pending suggestion gave way to a newer one.

    Which suggestion (proposed by which run of which agent), about which object and
    version, the newer suggestion that took its place and the run that proposed it,
    and when (ISO 8601, UTC). Written in the transaction that stores the newer one.
    """

    suggestion_id: str
    proposed_by_run: ProposedBy
    object_id: str | None
    object_version: int | None
    superseded_by: str
    superseded_by_run: str | None
    superseded_at: str
    actor: ActorPayload


class CapabilityDenied(TypedDict):
    """``capability:denied``: the agent, the operation and the type it was refused."""

    agent: str
    operation: str
    type: str
    object_id: str | None
    reason: str

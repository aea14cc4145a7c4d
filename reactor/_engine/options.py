"""Run options: what ``run()``, ``run_sync()``, ``start()`` and ``run_reactive()`` take."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, TypedDict

from reactor._agents.budget import Budget
from reactor._agents.templates import CONTEXT_NAMES
from reactor._providers.base import as_provider
from reactor._recording.store import as_reporter, check_store

if TYPE_CHECKING:
    from reactor._providers.base import Provider
    from reactor._providers.replay import ReplayProvider
    from reactor._recording.recording import Recording
    from reactor._recording.store import Reporter, RunReporter, SignalStore

__all__ = ["OPTION_NAMES", "RunKwargs", "RunOptions"]

_RUN_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")


@dataclasses.dataclass(frozen=True)
class RunOptions:
    """Keyword options of ``run()``, ``run_sync()``, ``start()`` and ``run_reactive()``."""

    input: Any = None
    provider: Provider | None = None
    timeout: float | None = None
    max_depth: int | None = 100
    max_activations: int | None = 1000
    fail_fast: bool = True
    on_end: Literal["drain", "cancel"] = "drain"
    reporters: Sequence[Reporter] = ()
    history_limit: int | None = None
    record: SignalStore | None = None
    replay: Recording | ReplayProvider | None = None
    tags: Mapping[str, str] | Sequence[str] | None = None
    target: str | None = None
    scope: Mapping[str, Any] | None = None
    resume: str | None = None
    parent_run_id: str | None = None
    run_id: str | None = None
    budget: Budget | None = None
    on_change: Literal["fail", "force"] = "fail"
    fork: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        _check_limits(self)
        # Reporters, the provider and the store are taken at the door: a reporter gets
        # the hooks it lacks (they do nothing), so does a provider that is no Provider
        # subclass, and a store that lacks part of the contract is refused.
        object.__setattr__(self, "reporters", tuple(as_reporter(r) for r in self.reporters))
        if self.provider is not None:
            object.__setattr__(self, "provider", as_provider(self.provider))
        if self.record is not None:
            check_store(self.record)
        _check_origin(self)
        if self.budget is not None and not isinstance(self.budget, Budget):
            raise TypeError(
                f"budget must be a Budget(usd=..., model_calls=...), got {self.budget!r}."
            )
        taken = sorted(set(self.scope or ()) & set(CONTEXT_NAMES))
        if taken:
            raise ValueError(
                f"scope cannot define {', '.join(map(repr, taken))}: templates already have "
                f"{', '.join(CONTEXT_NAMES)}. Choose other names."
            )

    @property
    def hooked(self) -> Sequence[RunReporter]:
        """The reporters as the door took them: each has both hooks."""
        hooked: Any = self.reporters  # as_reporter made each one (no cast(): a call)
        return hooked  # type: ignore[no-any-return]


def _check_limits(options: RunOptions) -> None:
    """How the run ends and how far it may go: ``on_end``, ``timeout`` and the maxima."""
    if options.on_end not in ("drain", "cancel"):
        raise ValueError(f"on_end must be 'drain' or 'cancel', got {options.on_end!r}.")
    if options.timeout is not None and options.timeout <= 0:
        raise ValueError(f"timeout must be a positive number of seconds, got {options.timeout}.")
    for name, value in (
        ("max_depth", options.max_depth),
        ("max_activations", options.max_activations),
    ):
        if value is not None and (not isinstance(value, int) or value < 1):
            raise ValueError(f"{name} must be None or an integer >= 1, got {value!r}.")


def _check_origin(options: RunOptions) -> None:
    """Where the run starts from: afresh (its ``run_id``), resumed, replayed or forked."""
    if options.resume is not None and options.record is None:
        raise ValueError(
            f"resume={options.resume!r} needs record=: the signal store the run was "
            "recorded in, which it goes on recording to."
        )
    if options.resume is not None and options.replay is not None:
        raise ValueError("A run resumes or replays, not both: give resume= or replay=.")
    if options.on_change not in ("fail", "force"):
        raise ValueError(
            f"on_change must be 'fail' (refuse to resume on a changed graph) or 'force' "
            f"(resume anyway), got {options.on_change!r}."
        )
    if options.fork is not None:
        _check_fork(options.fork, options)
    if options.run_id is not None:
        if options.resume is not None:
            raise ValueError("A resumed run keeps its id: give resume= or run_id=, not both.")
        if not isinstance(options.run_id, str) or not _RUN_ID.fullmatch(options.run_id):
            raise ValueError(
                f"run_id must be 1-64 letters, digits, '_' or '-' (like "
                f"'run_0123456789abcdef'), got {options.run_id!r}."
            )


def _check_fork(fork: Mapping[str, Any], options: RunOptions) -> None:
    """A fork names its source run and a signal of it; it records, and only forks."""
    example = "fork={'run_id': 'run_...', 'at': 42, 'state': {'key': 'value'}}"
    if not isinstance(fork, Mapping) or not set(fork) <= {"run_id", "at", "state"}:
        raise ValueError(f"fork must be a dict like {example}, got {fork!r}.")
    run_id, at, state = fork.get("run_id"), fork.get("at"), fork.get("state")
    if not isinstance(run_id, str) or not run_id:
        raise ValueError(f"fork needs the id of the run to fork ({example}), got {run_id!r}.")
    if not isinstance(at, int) or isinstance(at, bool) or at < 1:
        raise ValueError(f"fork's 'at' must be the seq of a signal (an integer >= 1), got {at!r}.")
    if state is not None and not isinstance(state, Mapping):
        raise ValueError(f"fork's 'state' must be a dict of key -> value, got {state!r}.")
    if options.record is None:
        raise ValueError(
            "fork= needs record=: the signal store the source run is in, where the fork "
            "is recorded too."
        )
    if options.resume is not None or options.replay is not None:
        raise ValueError(
            "A run forks, resumes or replays, only one: give fork=, resume= or replay=."
        )


class RunKwargs(TypedDict, total=False):
    """Run options (keyword arguments of ``run()``, ``run_sync()``, ``start()``).

    ``input``: the run's input (``input`` in templates and ``ctx.input``);
    ``provider``: the default provider of LLM agents; ``timeout``: seconds before
    in-flight work is cancelled; ``max_depth`` / ``max_activations``: loop protection
    (``None`` disables); ``fail_fast``: stop on the first agent failure;
    ``on_end``: ``"drain"`` or ``"cancel"`` in-flight activations once ``end_when``
    holds; ``reporters``: observers of the signal stream; ``history_limit``: keep only
    the last N signals in memory; ``record``: a signal store to record the run to;
    ``replay``: a recording (or a ``ReplayProvider``) whose answers replace every
    provider, offline (the recorded input is used unless ``input`` is given);
    ``tags``: labels stored with the recording; ``target``: the graph's
    ``module:attribute``, stored so ``reactor replay`` can find the graph;
    ``scope``: named values agents see as ``ctx.scope[name]`` and templates by name
    (``object`` and ``objects`` are also ``ctx.object`` and ``ctx.objects``; the
    service gives reaction agents the object that changed and the object store);
    ``resume``: the id of a recorded run to continue (with ``record=`` its store; see
    :meth:`reactor.Reactive.resume`); ``on_change``: what a resume does when the graph
    changed since the run last ran in a way its log would not reproduce: ``"fail"``
    (raise :class:`~reactor.GraphChangedError`) or ``"force"`` (go on); ``fork``: start
    a new run from another's log up to a signal, ``{"run_id", "at", "state"}`` (see
    :meth:`reactor.Reactive.fork`); ``parent_run_id``: the run this one is a child of
    (``ctx.spawn`` sets it; stored in the run info); ``budget``: a
    :class:`~reactor.Budget` the run's model calls may not start over.
    """

    input: Any
    provider: Provider | None
    timeout: float | None
    max_depth: int | None
    max_activations: int | None
    fail_fast: bool
    on_end: Literal["drain", "cancel"]
    reporters: Sequence[Reporter]
    history_limit: int | None
    record: SignalStore | None
    replay: Recording | ReplayProvider | None
    tags: Mapping[str, str] | Sequence[str] | None
    target: str | None
    scope: Mapping[str, Any] | None
    resume: str | None
    parent_run_id: str | None
    budget: Budget | None
    on_change: Literal["fail", "force"]
    fork: Mapping[str, Any] | None


OPTION_NAMES = frozenset(field.name for field in dataclasses.fields(RunOptions))

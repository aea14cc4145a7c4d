"""What a run's model calls asked and spent: requests, tokens, cost, and their budgets.

The run's half of :class:`~reactor._prompts.signalled.CallSite`: each distinct request
is kept (for the result, the recording and the reporters that want it), each call's
usage and cost counted, and, when the run or one of its agents has a
:class:`~reactor.Budget`, each call checked against it before it starts. A run with no
budget pays nothing for budgets.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any

from reactor._activation.fold import SECTIONS
from reactor._activation.resume import ResumePlan
from reactor._agents.agent import Agent
from reactor._agents.budget import Budget, Spending, check_budget
from reactor._engine.options import RunOptions
from reactor._providers.base import Provider, ProviderRequest, Usage
from reactor._recording.store import RunReporter, SignalStore
from reactor._signals.names import PROVIDER_END, PROVIDER_START
from reactor._signals.signal import Signal

__all__ = ["Costs", "SpendingSection"]

_NO_BUDGETS: Mapping[str, Budget] = MappingProxyType({})
_ON_REQUEST = operator.attrgetter("on_request")
_KEPT: dict[str, ProviderRequest] = {}
"""The latest distinct small requests of the process's runs, by hash (see record_request)."""
_KEEP = 1_024
_SMALL = 2_048
"""The most text (characters of the system prompt and messages) a kept request holds."""


def _small(request: ProviderRequest) -> bool:
    """Whether keeping ``request`` past its run costs little (long prompts are not kept)."""
    text = len(request.system or "")
    for message in request.messages:
        text += len(message.content)
    return text <= _SMALL


class Costs:
    """A run's requests, tokens and cost, and its budgets (see the module docstring).

    Args:
        run_id: The run.
        record: The signal store the requests are recorded to, if any.
        reporters: The run's reporters (those with ``on_request`` see each request).
        budget: The run's budget.
        agents: The graph's agents (their own budgets).
        spent: What the run spent before (a resumed run's tokens and cost).
        spent_before: What a resumed run's log says its calls spent, by agent (what its
            budgets count from).
    """

    __slots__ = (
        "_agent_budgets",
        "_budget",
        "_by_agent",
        "_on_request",
        "_record",
        "_run_id",
        "_spent",
        "cost_usd",
        "input_tokens",
        "output_tokens",
        "requests",
    )

    def __init__(
        self,
        run_id: str,
        *,
        record: SignalStore | None,
        reporters: Sequence[RunReporter],
        budget: Budget | None,
        agents: Iterable[Agent],
        spent: tuple[int, int, float | None] = (0, 0, 0.0),
        spent_before: SpendingSection | None = None,
    ) -> None:
        self._run_id = run_id
        self._record = record
        self._on_request = tuple(map(_ON_REQUEST, reporters)) if reporters else ()
        self.requests: dict[str, ProviderRequest] = {}
        self.input_tokens, self.output_tokens, self.cost_usd = spent
        self._budget = budget
        budgets: dict[str, Budget] = {}
        for agent in agents:  # a loop, not a comprehension: no frame for every run
            if agent.budget is not None and agent.name is not None:
                budgets[agent.name] = agent.budget
        self._agent_budgets: Mapping[str, Budget] = budgets or _NO_BUDGETS
        # Spending is counted only against a budget (thousands of runs have none).
        self._spent: Spending | None = None
        self._by_agent: dict[str, Spending] | None = None
        if budget is not None or budgets:
            before = spent_before if spent_before is not None else SpendingSection()
            self._spent = before.run
            self._by_agent = before.agents

    @classmethod
    def of_run(
        cls, run_id: str, options: RunOptions, agents: Iterable[Agent], resume: ResumePlan | None
    ) -> Costs:
        """The costs of a run (a resumed one starts from what its log spent)."""
        return cls(
            run_id,
            record=options.record,
            reporters=options.hooked,
            budget=options.budget,
            agents=agents,
            spent=(resume.input_tokens, resume.output_tokens, resume.cost_usd)
            if resume is not None
            else (0, 0, 0.0),
            spent_before=resume.sections.get(SpendingSection.key) if resume is not None else None,
        )

    def record_request(self, request: ProviderRequest) -> None:
        """Keep what a provider was asked, once per request hash.

        Runs that ask the same (thousands of runs of one graph often do) keep one
        request between them: equal hashes are equal fingerprints, all a run's result
        reads of a kept request.
        """
        digest = request.request_hash
        if digest in self.requests:
            return
        kept = _KEPT.get(digest)
        if kept is None:
            kept = request
            if _small(request):
                if len(_KEPT) >= _KEEP:
                    _KEPT.clear()
                _KEPT[digest] = request
        self.requests[digest] = kept
        if self._record is not None:
            self._record.record_request(self._run_id, digest, request.fingerprint())
        for on_request in self._on_request:
            on_request(self._run_id, request)

    def check_budget(self, agent: str, provider: Provider, request: ProviderRequest) -> None:
        """Refuse ``agent``'s call if a budget is reached; else count the call.

        Raises:
            BudgetExceededError: The run's budget, or the agent's, is reached.
        """
        spent, by_agent = self._spent, self._by_agent
        if spent is None or by_agent is None:
            return
        own = self._agent_budgets.get(agent)
        mine = by_agent.setdefault(agent, Spending())
        price_known = provider.price_known(request)
        if self._budget is not None:
            check_budget(self._budget, spent, agent=agent, scope="run", price_known=price_known)
        if own is not None:
            check_budget(own, mine, agent=agent, scope="agent", price_known=price_known)
        spent.model_calls += 1
        mine.model_calls += 1

    def count_usage(
        self, usage: Usage, cost_usd: float | None, agent: str = "", model: str | None = None
    ) -> None:
        """Add a call's tokens and cost (an unknown cost makes the total unknown)."""
        self.input_tokens += (  # the prompt cache's too: see payloads.input_tokens
            usage.input_tokens + usage.cache_read_input_tokens + usage.cache_creation_input_tokens
        )
        self.output_tokens += usage.output_tokens
        known = self.cost_usd is not None and cost_usd is not None
        self.cost_usd = self.cost_usd + cost_usd if known else None  # type: ignore[operator]
        spent, by_agent = self._spent, self._by_agent
        if spent is not None and by_agent is not None:
            data = usage.to_dict()
            spent.add(data, cost_usd, model)
            by_agent.setdefault(agent, Spending()).add(data, cost_usd, model)


class SpendingSection:
    """What a run's model calls spent, by agent, folded from its log (a fold section).

    A resumed run's budgets count from it; it is part of every snapshot, so a resume
    that reads only the tail of a long log still knows what was spent before.
    """

    key = "spending"

    def __init__(self) -> None:
        self.run = Spending()
        self.agents: dict[str, Spending] = {}

    def wants(self, name: str) -> bool:
        """Model calls' starts and ends."""
        return name in (PROVIDER_START, PROVIDER_END)

    def fold(self, signal: Signal) -> None:
        """Count one call's start, or its usage and cost."""
        payload: Mapping[str, Any] = signal.payload if isinstance(signal.payload, Mapping) else {}
        agent = str(payload.get("agent") or "")
        mine = self.agents.setdefault(agent, Spending())
        if signal.name == PROVIDER_START:
            self.run.model_calls += 1
            mine.model_calls += 1
        else:
            usage = payload.get("usage") or {}
            self.run.add(usage, payload.get("cost_usd"), None)
            mine.add(usage, payload.get("cost_usd"), None)

    def dump(self) -> Any:
        """The spending as JSON data."""
        return {
            "run": self.run.to_dict(),
            "agents": {agent: spent.to_dict() for agent, spent in self.agents.items()},
        }

    def load(self, data: Any) -> None:
        """Take back what :meth:`dump` gave."""
        self.run = Spending.from_dict(data["run"])
        self.agents = {agent: Spending.from_dict(d) for agent, d in data["agents"].items()}


SECTIONS.append(SpendingSection)

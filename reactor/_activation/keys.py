"""Idempotency keys: the same for one activation however often it runs, unique otherwise.

An activation that was in flight when its process died runs again on resume. Its side
effects outside reactor (an order sent to a broker, a payment) may then be asked for
twice; brokers and payment APIs dedupe by a key the caller chooses
(``client_order_id``, an ``Idempotency-Key`` header). The key of an activation derives
from what the log says it is: the run, the agent, the ``seq`` of the signal that
triggered it, and a label for each effect; so it is the same when the activation runs
again after a crash, and different for every other activation or label.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from typing import Protocol

from reactor._providers.tools import ToolKeys
from reactor._signals.threads import Share

__all__ = ["ActivationKeys", "Shares", "idempotency_key"]


class Shares(Protocol):
    """Where a run's share of the handler threads is kept (made when first asked for)."""

    @property
    def share(self) -> Share:
        """The run's share."""
        ...


def idempotency_key(run_id: str, agent: str, seq: int, label: str = "") -> str:
    """32 hex digits from the run, the agent, its trigger's ``seq`` and ``label``.

    Short and plain enough for any API's idempotency field (brokers often allow 36
    characters of letters and digits).
    """
    text = f"{run_id}\x1f{agent}\x1f{seq}\x1f{label}"
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


class ActivationKeys(ToolKeys):
    """The keys of one activation's tool calls: the nth call of a tool, by its name.

    The model may word a call differently when it is asked again after a crash, but
    its nth call of ``place_order`` is still that activation's nth order.
    """

    __slots__ = ("_agent", "_calls", "_run_id", "_seq", "_shares")

    def __init__(self, run_id: str, agent: str, seq: int, shares: Shares | None = None) -> None:
        self._run_id, self._agent, self._seq, self._shares = run_id, agent, seq, shares
        self._calls: Counter[str] | None = None  # made at the first call: most make none

    @property
    def run_id(self) -> str | None:
        """The run the calls are made in."""
        return self._run_id

    @property
    def agent(self) -> str | None:
        """The agent making them."""
        return self._agent

    @property
    def share(self) -> Share | None:
        """The run's share of the handler threads, which its plain-function tools use."""
        return None if self._shares is None else self._shares.share

    def next_key(self, tool: str) -> str:
        """The key of the next call of ``tool`` in this activation."""
        calls = self._calls
        if calls is None:
            calls = self._calls = Counter()
        calls[tool] += 1
        label = f"{tool}#{calls[tool]}"  # its nth call of that tool
        return idempotency_key(self._run_id, self._agent, self._seq, label)

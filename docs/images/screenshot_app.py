"""The service the screenshots of docs/web.md show (``docs/images/make_screenshots.py``).

The trading bot of ``examples/trading_bot`` and a release graph that asks a person to
approve, registered to start by name; the CRM's reaction agents of
``examples/crm_enrichment`` and a manual agent. Every answer is scripted (offline).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from examples.crm_enrichment.app import AGENTS, TYPES
from examples.crm_enrichment.scripted import scripted_provider as crm_answers
from examples.trading_bot.app import graph as trading_bot
from examples.trading_bot.scripted import scripted_provider as trading_answers
from reactor import AgentContext, Provider, ProviderEvent, ProviderRequest, agent, reactive
from reactor.service import ObjectStore, ReactionService


class Answers(Provider):
    """The offline provider: the CRM's agents get the CRM's answers, the rest the bot's."""

    def __init__(self) -> None:
        self.crm, self.trading = crm_answers(), trading_answers(latency=0.6)

    def stream(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        """Stream the scripted answer to ``request``."""
        chosen = self.crm if request.agent in AGENTS else self.trading
        return chosen.stream(request)


def _checks(ctx: AgentContext[Any]) -> str:
    return f"{ctx.input['version']}: 214 tests passed"


def _ship(ctx: AgentContext[Any]) -> str:
    return f"{ctx.input['version']} shipped"


def _digest(ctx: AgentContext[Any]) -> str:
    return "3 new contacts this week"


release = reactive(
    {
        "checks": agent(run=_checks, updates="checks"),
        "approve": agent(
            ask="Ship {{ input.version }}? {{ state.checks }}",
            choices=["ship it", "hold"],
            activate_on="state:checks:changed",
            updates="decision",
        ),
        "ship": agent(
            run=_ship,
            activate_on="state:decision:changed",
            when="state.decision == 'ship it'",
            updates="shipped",
        ),
    },
    state={"checks": None, "decision": None, "shipped": None},
    name="release",
)


def make_service(url: str) -> ReactionService:
    """The service the screenshots show, on the database at ``url``."""
    return ReactionService(
        objects=ObjectStore(url, types=TYPES),
        agents={**AGENTS, "digest": agent(run=_digest)},
        graphs={"trading-bot": trading_bot, "release": release},
        provider=Answers(),
    )

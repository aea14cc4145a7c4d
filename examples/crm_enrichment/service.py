"""The CRM as a service: ``reactor serve --app examples.crm_enrichment.service:service``.

``service`` is a function of the database URL (``reactor serve --db`` gives it), so one
module serves SQLite on a laptop and PostgreSQL in production. Answers come from the
scripted provider, offline; set ``CRM_PROVIDER=anthropic`` to ask Claude.
"""

from __future__ import annotations

import os

from examples.crm_enrichment.app import AGENTS, TYPES
from examples.crm_enrichment.scripted import scripted_provider
from reactor import Provider
from reactor.service import ObjectStore, ReactionService


def service(url: str) -> ReactionService:
    """The CRM's reaction service on the database at ``url``."""
    provider: Provider
    if os.environ.get("CRM_PROVIDER") == "anthropic":
        from reactor import AnthropicProvider

        provider = AnthropicProvider()
    else:
        provider = scripted_provider()
    return ReactionService(objects=ObjectStore(url, types=TYPES), agents=AGENTS, provider=provider)

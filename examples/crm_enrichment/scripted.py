"""Offline answers for ``enrich``: the employer is read from the email's domain."""

from __future__ import annotations

import re

from reactor import ProviderRequest, ScriptedProvider
from reactor.service import Changes, Create, Update

_PERSON = re.compile(r"^Person (?P<id>\S+): (?P<name>.+) <[^@]+@(?P<domain>[^>]+)>\.", re.M)


def answer(request: ProviderRequest) -> Changes:
    """What a model would propose for the person in the prompt."""
    found = _PERSON.search(request.prompt)
    if found is None:
        return Changes(reasoning="No person in the request.")
    domain = found["domain"]
    company = domain.split(".")[0].replace("-", " ").title()
    return Changes(
        reasoning=f"{found['name']} writes from {domain}, the domain of {company}.",
        operations=(
            Create("Company", {"name": company, "domain": domain}),
            Update(found["id"], {"employer": company}),
        ),
    )


def scripted_provider() -> ScriptedProvider:
    """The CRM's offline provider."""
    return ScriptedProvider({"enrich": answer})

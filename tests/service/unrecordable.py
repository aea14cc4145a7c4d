"""The app of the unrecordable answer's tests: a writer whose model answers a lone surrogate.

``reactor serve --app tests.service.unrecordable:make_service``. The model is the fake
Anthropic endpoint (the real SDK) in the server's own process; each request it gets
adds a line to the file ``UNRECORDABLE_CALLS`` names, so that a test counts the calls a
run made across restarts of the server.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from reactor import agent, reactive
from reactor.service import ObjectStore, ReactionService
from reactor.testing import Turn, fake_anthropic, turn


def _answer(body: dict[str, Any]) -> Turn:
    with Path(os.environ["UNRECORDABLE_CALLS"]).open("a") as calls:
        calls.write("called\n")
    return turn("A word \ud800 too far.")


def make_service(url: str) -> ReactionService:
    """The served service, on the database at ``url``."""
    writing = reactive(
        {"writer": agent(prompt="Write about {{ input }}", updates="text")},
        state={"text": None},
        name="writing",
    )
    return ReactionService(
        objects=ObjectStore(url), graphs={"writing": writing}, provider=fake_anthropic(_answer)
    )

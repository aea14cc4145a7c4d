"""A user's own FastAPI app with the served service mounted under ``/reactor``.

``uvicorn tests.service.mounted:app`` serves it, on the database ``MOUNTED_DB`` names,
with the tokens of :mod:`tests.service.server`.
"""

from __future__ import annotations

import os

import fastapi

from reactor.service import create_app
from tests.service.served import make_service
from tests.service.server import ALICE, BOB

reactor_app = create_app(
    make_service(os.environ.get("MOUNTED_DB", "sqlite:///.reactor/mounted.db")),
    tokens={ALICE: ("alice", "admin"), BOB: ("bob", "approver+operator")},
    prefix="/reactor",
)
app = fastapi.FastAPI(lifespan=reactor_app.router.lifespan_context)


@app.get("/")
def home() -> dict[str, str]:
    """The user's own page."""
    return {"app": "the user's"}


app.mount("/reactor", reactor_app)

"""The baseline of the HTTP-writes workload: a bare FastAPI + SQLAlchemy endpoint.

``POST /api/objects`` inserts the row ``reactor serve`` inserts for a new object (the
same columns, an id, version 1, the data as JSON, the actor, two timestamps) into an
SQLite file through SQLAlchemy's async engine on aiosqlite, in WAL mode, one
transaction per request, and answers 201 with the object as JSON. No tokens, no
middleware, no event log, no reactions: what a hand-written endpoint does. It is served
as ``reactor serve`` is (uvicorn, one process, the same options), by
``python -m bench.bare --db PATH --port PORT``.
"""

from __future__ import annotations

import argparse
import contextlib
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import fastapi
import pydantic
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import create_async_engine

metadata = sa.MetaData()
objects = sa.Table(
    "objects",
    metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("type", sa.String(200), nullable=False, index=True),
    sa.Column("version", sa.Integer, nullable=False),
    sa.Column("data", sa.JSON, nullable=False),
    sa.Column("actor_type", sa.String(16), nullable=False),
    sa.Column("actor_id", sa.String(200), nullable=False),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
)


class NewObject(pydantic.BaseModel):
    """The body ``reactor serve`` takes."""

    type: str
    data: dict[str, Any]


def make_app(path: str) -> fastapi.FastAPI:
    """The app: one table, one route."""
    engine = create_async_engine(f"sqlite+aiosqlite:///{path}")

    @sa.event.listens_for(engine.sync_engine, "connect")
    def _wal(dbapi_connection: Any, record: Any) -> None:
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    @contextlib.asynccontextmanager
    async def lifespan(app: fastapi.FastAPI) -> AsyncIterator[None]:
        async with engine.begin() as conn:
            await conn.run_sync(metadata.create_all)
        yield
        await engine.dispose()

    app = fastapi.FastAPI(lifespan=lifespan)

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.post("/api/objects", status_code=201)
    async def create(body: NewObject) -> dict[str, Any]:
        now = datetime.now(UTC)
        row = {
            "id": f"obj_{uuid.uuid4().hex}",
            "type": body.type,
            "version": 1,
            "data": body.data,
            "actor_type": "user",
            "actor_id": "bench",
            "created_at": now,
            "updated_at": now,
        }
        async with engine.begin() as conn:
            await conn.execute(objects.insert().values(**row))
        return row

    return app


def main() -> None:
    import uvicorn

    parser = argparse.ArgumentParser(prog="python -m bench.bare")
    parser.add_argument("--db", required=True)
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    from reactor.service._api.serve import UVICORN_OPTIONS

    uvicorn.run(make_app(args.db), host="127.0.0.1", port=args.port, **UVICORN_OPTIONS)


if __name__ == "__main__":
    main()

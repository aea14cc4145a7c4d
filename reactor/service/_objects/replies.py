"""The ``prompt_replies`` table: which reply to a prompt came first, decided at once.

A reply through the service is decided before it is answered: the first one for a
(run, prompt) inserts its row, in one statement whose primary key settles a race
between any number of processes; every later one finds that row and is told who
answered. Only then does the accepted reply go into the run's inbox, so that no
caller is told their answer was taken when another was used.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from reactor.service._objects.db import Database
from reactor.service._objects.schema import prompt_replies

__all__ = ["PromptReplies", "ReplyDecision"]


@dataclasses.dataclass(frozen=True)
class ReplyDecision:
    """The reply a prompt was given through the service, and whether it is this caller's.

    Attributes:
        run_id: The run.
        prompt_id: The prompt.
        answer: The accepted answer.
        answered_by: Who gave it (a user id).
        answered_at: When (UTC).
        accepted: Whether it is the reply just offered (else another came first).
        message_id: The inbox message carrying it, once posted.
    """

    run_id: str
    prompt_id: str
    answer: Any
    answered_by: str
    answered_at: datetime
    accepted: bool
    message_id: str | None = None


class PromptReplies:
    """The replies to prompts of one database."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def decide(self, run_id: str, prompt_id: str, answer: Any, user: str) -> ReplyDecision:
        """Offer a reply: it is accepted if it is the first for the prompt, else refused."""
        dialect = postgresql if self.db.dialect == "postgresql" else sqlite
        now = datetime.now(UTC)
        row = {"run_id": run_id, "prompt_id": prompt_id, "answer": answer}
        async with self.db.write() as conn:
            inserted = await conn.execute(
                dialect.insert(prompt_replies)
                .values(**row, answered_by=user, answered_at=now)
                .on_conflict_do_nothing(index_elements=["run_id", "prompt_id"])
                .returning(prompt_replies.c.run_id)
            )
            if inserted.first() is not None:
                return ReplyDecision(run_id, prompt_id, answer, user, now, accepted=True)
            found = (
                await conn.execute(
                    sa.select(prompt_replies).where(
                        prompt_replies.c.run_id == run_id, prompt_replies.c.prompt_id == prompt_id
                    )
                )
            ).one()
        return _decision(found, accepted=False)

    async def delivered(self, run_id: str, prompt_id: str, message_id: str) -> None:
        """Note the inbox message that carries an accepted reply."""
        async with self.db.write() as conn:
            await conn.execute(
                prompt_replies.update()
                .where(prompt_replies.c.run_id == run_id, prompt_replies.c.prompt_id == prompt_id)
                .values(message_id=message_id)
            )

    async def withdraw(self, run_id: str, prompt_id: str) -> None:
        """Forget an accepted reply that could not be posted (the prompt is open again)."""
        async with self.db.write() as conn:
            await conn.execute(
                prompt_replies.delete().where(
                    prompt_replies.c.run_id == run_id,
                    prompt_replies.c.prompt_id == prompt_id,
                    prompt_replies.c.message_id.is_(None),
                )
            )

    async def of_run(self, run_id: str, prompt_ids: Iterable[str]) -> dict[str, ReplyDecision]:
        """The replies decided for these prompts of a run, by prompt id."""
        ids = sorted(set(prompt_ids))
        if not ids:
            return {}
        async with self.db.read() as conn:
            rows = await conn.execute(
                sa.select(prompt_replies).where(
                    prompt_replies.c.run_id == run_id, prompt_replies.c.prompt_id.in_(ids)
                )
            )
            return {row.prompt_id: _decision(row, accepted=False) for row in rows}


def _decision(row: Any, *, accepted: bool) -> ReplyDecision:
    return ReplyDecision(
        row.run_id,
        row.prompt_id,
        row.answer,
        row.answered_by,
        row.answered_at,
        accepted=accepted,
        message_id=row.message_id,
    )

"""A human in the loop: refunds above a limit wait for a person's approval.

The ``approval`` agent is answered by a person, not a model: it asks
(``agent(ask=..., choices=["yes", "no"])``), the run waits (its status is ``waiting``,
and it survives a restart), and the answer goes on like any agent's output. Guards
route everything: small refunds are approved by policy, large ones by you, and
``other`` complaints get a reply without a refund. Every run is recorded, so
``reactor show last`` shows the question and the answer. Run it with::

    python -m examples.human_approval                          # asks on the terminal
    python -m examples.human_approval --complaint "arrived broken" --total 120 --answer yes
    python -m examples.human_approval --complaint "it came 3 days late" --total 40

On the terminal, Ctrl-C aborts the run; end of input while the question waits
suspends it, and ``reactor resume last --interactive`` asks again.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
from typing import Literal

from pydantic import BaseModel, Field

from reactor import (
    AgentContext,
    ConsoleChannel,
    ProviderRequest,
    RunHandle,
    RunSuspendedError,
    ScriptedProvider,
    SQLiteSignalStore,
    agent,
    reactive,
)

AUTO_LIMIT = 50.0
"""Refunds up to this are approved by policy; above it, a person decides."""


class Ticket(BaseModel):
    """A customer's complaint about an order."""

    customer: str
    order_total: float = Field(gt=0)
    complaint: str


class Triage(BaseModel):
    """What kind of complaint it is, and how bad."""

    category: Literal["damaged", "late", "other"]
    severity: int = Field(ge=1, le=3)


class RefundProposal(BaseModel):
    """How much to refund, and why."""

    amount: float = Field(ge=0)
    reason: str


class Approval(BaseModel):
    """Whether a refund may be paid, and who decided."""

    approved: bool
    by: str
    note: str = ""


class Desk(BaseModel):
    """The state of one ticket as it goes through the desk."""

    ticket: Ticket | None = None
    triage: Triage | None = None
    proposal: RefundProposal | None = None
    approval: Approval | None = None
    refunded: float | None = None
    reply: str | None = None


def open_ticket(ctx: AgentContext) -> Ticket:
    return Ticket.model_validate(ctx.input)


def policy_approval(ctx: AgentContext) -> Approval:
    return Approval(approved=True, by="policy", note=f"up to {AUTO_LIMIT:.0f} is automatic")


def record_decision(ctx: AgentContext, answer: str) -> None:
    ctx.store.set("approval", Approval(approved=answer == "yes", by="you", note="asked"))


def pay(ctx: AgentContext) -> float:
    return float(ctx.state.proposal.amount)


graph = reactive(
    {
        "intake": agent(run=open_ticket, output=Ticket, updates="ticket"),
        "triage": agent(
            prompt="Classify this complaint as damaged, late or other, with a severity "
            "from 1 to 3.\n```json\n{{ input | tojson }}\n```",
            output=Triage,
            updates="triage",
        ),
        "refunder": agent(
            prompt="Propose a fair refund.\n```json\n"
            '{"ticket": {{ state.ticket | tojson }}, "triage": {{ state.triage | tojson }}}\n```',
            output=RefundProposal,
            activate_on="state:triage:changed",
            when="state.triage.category != 'other' and state.ticket is not none",
            updates="proposal",
        ),
        "policy": agent(
            run=policy_approval,
            output=Approval,
            activate_on="state:proposal:changed",
            when=f"state.proposal.amount <= {AUTO_LIMIT}",
            updates="approval",
        ),
        "approval": agent(
            ask="Refund {{ '%.2f' | format(state.proposal.amount) }} to "
            "{{ state.ticket.customer }} ({{ state.proposal.reason }})?",
            choices=["yes", "no"],
            activate_on="state:proposal:changed",
            when=f"state.proposal.amount > {AUTO_LIMIT}",
            on_output=record_decision,
            writes=["approval"],
        ),
        "payer": agent(
            run=pay,
            activate_on="state:approval:changed",
            when="state.approval.approved",
            updates="refunded",
        ),
        "responder": agent(
            prompt="Write a short reply to the customer.\n```json\n"
            '{"ticket": {{ state.ticket | tojson }}, "triage": {{ state.triage | tojson }}, '
            '"approval": {{ state.approval | tojson }}, "refunded": {{ state.refunded | tojson }}}'
            "\n```",
            activate_on=[
                "state:refunded:changed",
                "state:approval:changed",
                "state:triage:changed",
            ],
            when="(state.triage.category == 'other' and signal.name == 'state:triage:changed') "
            "or state.refunded is not none "
            "or (state.approval is not none and not state.approval.approved)",
            updates="reply",
        ),
    },
    state=Desk,
    end_when=lambda run: run.state.reply is not None,
    name="refund-desk",
)


_JSON = re.compile(r"```json\n(.*?)\n```", re.DOTALL)


def _data(request: ProviderRequest) -> dict[str, object]:
    return dict(json.loads(_JSON.findall(request.prompt)[-1]))


def _triage(request: ProviderRequest) -> Triage:
    text = str(_data(request)["complaint"]).lower()
    if any(word in text for word in ("broken", "damaged", "cracked", "smashed")):
        return Triage(category="damaged", severity=3)
    if "late" in text or "delay" in text:
        return Triage(category="late", severity=1)
    return Triage(category="other", severity=1)


def _refund(request: ProviderRequest) -> RefundProposal:
    data = _data(request)
    total = float(data["ticket"]["order_total"])  # type: ignore[index]
    category = data["triage"]["category"]  # type: ignore[index]
    share = {"damaged": 1.0, "late": 0.2}[str(category)]
    return RefundProposal(amount=round(total * share, 2), reason=f"{category}: {share:.0%} back")


def _reply(request: ProviderRequest) -> str:
    data = _data(request)
    name = data["ticket"]["customer"]  # type: ignore[index]
    if data.get("refunded") is not None:
        return f"Dear {name}, we are sorry: {data['refunded']:.2f} is on its way back to you."
    if data.get("approval"):
        return f"Dear {name}, we looked into it and cannot offer a refund this time."
    return f"Dear {name}, thank you for telling us; we have passed this on to the team."


def scripted_provider() -> ScriptedProvider:
    """Offline answers, computed from each prompt's JSON."""
    return ScriptedProvider(
        {"triage": _triage, "refunder": _refund, "responder": _reply}, latency=0.05
    )


class Answer:
    """A channel that answers every question with the same answer (``--answer``).

    A channel is anything with ``async def attach(handle)``: it watches the run's
    signals and sends it commands, here a reply to each question.
    """

    def __init__(self, answer: str) -> None:
        self.answer = answer

    async def attach(self, handle: RunHandle) -> None:
        """Answer each question the run asks, until it ends."""
        async for signal in handle.signals():
            if signal.name == "session:prompt":
                print(f"? {signal.payload['question']} {self.answer}")
                handle.reply(signal.payload["prompt_id"], self.answer)


async def handle_ticket(
    ticket: dict[str, object], answer: str | None, *, db: str = ".reactor/runs.db"
) -> int:
    """Take a ticket through the desk, recorded to ``db``; exit status 0 if it went well."""
    channel = Answer(answer) if answer is not None else ConsoleChannel()
    with SQLiteSignalStore(db) as store:
        try:
            result = await graph.run(
                input=ticket,
                provider=scripted_provider(),
                record=store,
                timeout=300,
                channels=[channel],
            )
        except RunSuspendedError as suspended:
            print(f"Run {suspended.run_id} waits for an answer: reactor resume last -i")
            return 1
    for key in ("triage", "proposal", "approval", "refunded"):
        print(f"  {key:<9} {result.state[key]!r}")
    activations = result.metrics.activations
    print(f"\n{result.state['reply']}\n\nRun {result.status}: {activations} activations.")
    print(f"Recorded: reactor show {result.run_id}")
    return 0 if result.ok else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m examples.human_approval")
    parser.add_argument("--customer", default="Ana")
    parser.add_argument("--complaint", default="The vase arrived broken.")
    parser.add_argument("--total", type=float, default=120.0)
    parser.add_argument("--answer", choices=["yes", "no"], help="answer instead of asking")
    parser.add_argument("--db", default=".reactor/runs.db", help="where runs are recorded")
    args = parser.parse_args(argv)
    ticket = {"customer": args.customer, "order_total": args.total, "complaint": args.complaint}
    return asyncio.run(handle_ticket(ticket, args.answer, db=args.db))


if __name__ == "__main__":
    raise SystemExit(main())

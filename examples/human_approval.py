"""A human in the loop: refunds above a limit wait for a person's approval.

A live run (``graph.start()``) stays open while it waits: the program watches the
signal stream, and when ``approval:requested`` arrives it asks you (or answers for you
with ``--answer``) and sends ``approval:given`` into the run. Guards route everything:
small refunds are approved by policy, large ones by you, and ``other`` complaints get
a reply without a refund. Run it with::

    python -m examples.human_approval                          # asks on the terminal
    python -m examples.human_approval --complaint "arrived broken" --total 120 --answer yes
    python -m examples.human_approval --complaint "it came 3 days late" --total 40
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
from typing import Literal

from pydantic import BaseModel, Field

from reactor import AgentContext, ProviderRequest, ScriptedProvider, agent, reactive

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


def ask_a_person(ctx: AgentContext) -> RefundProposal:
    proposal: RefundProposal = ctx.state.proposal
    ctx.emit("approval:requested", proposal)
    return proposal


def record_decision(ctx: AgentContext) -> Approval:
    return Approval.model_validate(ctx.signal.payload)


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
        "escalate": agent(
            run=ask_a_person,
            activate_on="state:proposal:changed",
            when=f"state.proposal.amount > {AUTO_LIMIT}",
            emits=["approval:requested"],
        ),
        "decision": agent(
            run=record_decision, output=Approval, activate_on="approval:given", updates="approval"
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
    external=["approval:given"],
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


async def handle_ticket(ticket: dict[str, object], answer: str | None) -> int:
    handle = graph.start(input=ticket, provider=scripted_provider(), timeout=300)
    async for signal in handle.signals():
        if signal.name == "approval:requested":
            proposal = signal.payload
            question = f"Refund {proposal.amount:.2f} ({proposal.reason})? [y/N] "
            reply = answer if answer is not None else await asyncio.to_thread(input, question)
            approved = reply.strip().lower() in ("y", "yes")
            print(f"{question}{reply if answer is not None else ''}".rstrip())
            handle.send(
                "approval:given",
                {"approved": approved, "by": "you", "note": "from the terminal"},
            )
        elif signal.name.startswith("state:") and signal.name.endswith(":changed"):
            key, new = signal.payload["key"], signal.payload["new"]
            print(f"  {key:<9} <- {new!r}  ({signal.payload['actor']})")
    result = await handle.result()
    activations = result.metrics.activations
    print(f"\n{result.state['reply']}\n\nRun {result.status}: {activations} activations.")
    return 0 if result.ok else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m examples.human_approval")
    parser.add_argument("--customer", default="Ana")
    parser.add_argument("--complaint", default="The vase arrived broken.")
    parser.add_argument("--total", type=float, default=120.0)
    parser.add_argument("--answer", choices=["yes", "no"], help="answer instead of asking")
    args = parser.parse_args(argv)
    ticket = {"customer": args.customer, "order_total": args.total, "complaint": args.complaint}
    return asyncio.run(handle_ticket(ticket, args.answer))


if __name__ == "__main__":
    raise SystemExit(main())

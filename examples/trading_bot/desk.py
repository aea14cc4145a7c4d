"""The trading desk: a quote feed far faster than a model, and an analyst admitted per symbol.

A ``Quote`` object per symbol is updated by the feed many times a second; ``analyst``
reacts to quotes and proposes orders as suggestions for a person to approve. A model
answers in about a second, so it must not answer every change:

* ``Latest()``: per quote (the object id is the key), while the analyst is busy with a
  symbol only its newest quote waits; the older ones are ``superseded`` in the
  processing log, linked to the entry that ran. Every update stays in the quote's
  history; only model calls are saved.
* ``SpendCap(usd, per=...)``: what the analyst's model calls cost is summed through
  the database; past the cap its quotes are ``held`` (never lost) until the hour rolls
  or an admin raises the cap (``PATCH /api/agents/analyst {"spend_cap_usd": ...}``).

Run it offline (scripted answers that take ``--latency`` seconds and are priced like a
model): ``python -m examples.trading_bot.desk``. Serve it to approve in a browser:
``reactor serve --app examples.trading_bot.desk:make_service``, and feed it from
another shell with ``python -m examples.trading_bot.desk --feed-only --db <its db>``.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import re
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

import pydantic

from reactor import Latest, ModelPrice, ProviderRequest, ScriptedProvider, SpendCap, agent
from reactor.service import (
    Capabilities,
    Changes,
    Create,
    ObjectStore,
    Reaction,
    ReactionService,
    User,
)


class Quote(pydantic.BaseModel):
    """The last price of a symbol, and the one before it."""

    symbol: str
    price: float
    previous: float


class Order(pydantic.BaseModel):
    """An order the analyst proposes; a person approves it."""

    symbol: str
    side: str
    quantity: int
    limit: float


TYPES = (Quote, Order)

analyst = agent(
    system="You are a trading desk's analyst. Propose an order only when the move is clear.",
    prompt=(
        "Quote {{ object.data.symbol }}: {{ object.data.price }} "
        "(was {{ object.data.previous }}). Propose an order, or nothing."
    ),
    output=Changes,
    reaction=Reaction(
        types=["Quote"],
        events=["created", "updated"],
        admit=(Latest(), SpendCap(5.0, per=timedelta(hours=1))),
    ),
    execution_mode="suggest",
    capabilities=Capabilities(can_update=False, can_delete=False, allowed_types=["Order"]),
)

AGENTS = {"analyst": analyst}

_QUOTE = re.compile(r"^Quote (?P<symbol>\S+): (?P<price>[\d.]+) \(was (?P<previous>[\d.]+)\)")

PRICE = ModelPrice(input=3.0, output=15.0)
"""What the offline answers cost, as a model's would ($ per million tokens)."""


def answer(request: ProviderRequest) -> Changes:
    """What a model would propose: buy a dip, sell a rise, of more than 0.1%."""
    found = _QUOTE.search(request.prompt)
    if found is None:
        return Changes(reasoning="No quote in the request.")
    price, previous = float(found["price"]), float(found["previous"])
    move = (price - previous) / previous
    if abs(move) < 0.001:
        return Changes(reasoning=f"{found['symbol']} moved {move:.3%}: nothing to do.")
    side = "buy" if move < 0 else "sell"
    order = {"symbol": found["symbol"], "side": side, "quantity": 10, "limit": price}
    return Changes(
        reasoning=f"{found['symbol']} moved {move:+.3%}: {side} 10 at {price}.",
        operations=(Create("Order", order),),
    )


def scripted_provider(latency: float = 1.0) -> ScriptedProvider:
    """The desk's offline model: :func:`answer`, after ``latency`` seconds, priced."""
    return ScriptedProvider({"analyst": answer}, latency=latency, pricing=PRICE)


def make_service(db: str = "sqlite:///.reactor/desk.db") -> ReactionService:
    """The desk as ``reactor serve --app examples.trading_bot.desk:make_service`` runs it."""
    return ReactionService(
        objects=ObjectStore(db, types=TYPES), agents=AGENTS, provider=scripted_provider()
    )


async def feed(
    objects: ObjectStore,
    symbols: Sequence[str],
    rate: float,
    seconds: float,
    seed: int = 7,
    *,
    at_least: int = 0,
) -> int:
    """Update each symbol's quote, ``rate`` updates a second in all, for ``seconds``.

    One writer per symbol, each a random walk of its own paced to its share of the rate
    in small bursts, so the feed goes as fast as the store takes writes at once; returns
    how many updates were written. The quotes are made when missing. A writer behind
    its pace catches up until ``seconds``, not beyond. ``at_least``: go on past
    ``seconds`` until that many were written (a machine too busy for the rate still
    floods).
    """
    prices = {symbol: 100.0 + 10 * n for n, symbol in enumerate(symbols)}
    found = {quote.data["symbol"]: quote.id for quote in await objects.list("Quote")}
    for symbol in symbols:
        if symbol not in found:
            made = await objects.create(
                "Quote",
                {"symbol": symbol, "price": prices[symbol], "previous": prices[symbol]},
                actor=User("feed"),
            )
            found[symbol] = made.id
    share, least = rate / len(symbols), -(-at_least // len(symbols))  # each one's part
    start = time.perf_counter()
    counts = [0] * len(symbols)

    def over(index: int) -> bool:
        return counts[index] >= least and time.perf_counter() - start >= seconds

    async def writer(index: int, symbol: str) -> None:
        chance, price = random.Random(seed * 1_000 + index), prices[symbol]
        while not over(index):
            elapsed = time.perf_counter() - start
            due = int(elapsed * share) + 1 if elapsed < seconds else least
            while counts[index] < due and not over(index):
                previous, price = price, round(price * (1 + chance.gauss(0, 0.002)), 4)
                await objects.update(
                    found[symbol], {"price": price, "previous": previous}, actor=User("feed")
                )
                counts[index] += 1
            await asyncio.sleep(0.005)

    async with asyncio.TaskGroup() as group:
        for index, symbol in enumerate(symbols):
            group.create_task(writer(index, symbol))
    return sum(counts)


@dataclass
class DeskRun:
    """What a run of the desk did."""

    updates: int
    fed_for: float
    """Seconds the feed took (longer than asked when the machine is busy)."""
    outcomes: Counter[str]
    model_calls: int
    suggestions: int
    behind: float
    """Seconds from the feed's end until the last quote of every symbol was processed."""
    latest_seen: bool
    """Whether the analyst's last run of each symbol saw its last quote."""


async def run_desk(
    db: str, *, symbols: int, rate: float, seconds: float, latency: float, at_least: int = 0
) -> DeskRun:
    """Feed the desk's service and wait until the analyst has seen every last quote.

    ``at_least``: the feed goes on past ``seconds`` until that many updates were written.
    """
    names = [f"S{n:02d}" for n in range(symbols)]
    provider = scripted_provider(latency)
    async with (
        ObjectStore(db, types=TYPES) as objects,
        ReactionService(objects=objects, agents=AGENTS, provider=provider) as service,
    ):
        began = time.perf_counter()
        updates = await feed(objects, names, rate, seconds, at_least=at_least)
        ended = time.perf_counter()
        await service.idle(timeout=120 + seconds)
        behind = time.perf_counter() - ended
        entries = await service.processing_log(agent="analyst")
        suggestions = await service.suggestions()
        quotes = await objects.list("Quote")
    seen: dict[str, int] = {}
    for entry in entries:
        if entry.status == "completed":
            seen[entry.object_id] = max(seen.get(entry.object_id, 0), entry.object_version)
    return DeskRun(
        updates=updates,
        fed_for=ended - began,
        outcomes=Counter(entry.status for entry in entries),
        model_calls=len(provider.requests),
        suggestions=len(suggestions),
        behind=behind,
        latest_seen=all(seen.get(quote.id) == quote.version for quote in quotes),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m examples.trading_bot.desk",
        description="A quote feed into a reaction service whose analyst is admitted with "
        "Latest() per symbol and a SpendCap. Offline.",
    )
    parser.add_argument("--db", default="sqlite:///.reactor/desk.db", help="the service's db")
    parser.add_argument("--symbols", type=int, default=20)
    parser.add_argument("--rate", type=float, default=500.0, help="updates a second, in all")
    parser.add_argument("--seconds", type=float, default=5.0, help="how long the feed runs")
    parser.add_argument("--latency", type=float, default=1.0, help="the model's answer, s")
    parser.add_argument("--feed-only", action="store_true", help="feed a served desk's db")
    args = parser.parse_args(argv)
    if args.symbols < 1 or args.rate <= 0 or args.seconds <= 0 or args.latency < 0:
        print(
            "--symbols, --rate and --seconds must be above 0, --latency not below", file=sys.stderr
        )
        return 2
    if args.feed_only:
        names = [f"S{n:02d}" for n in range(args.symbols)]
        written = asyncio.run(_feed_only(args.db, names, args.rate, args.seconds))
        print(f"fed {written:,} quote updates to {args.db}")
        return 0
    done = asyncio.run(
        run_desk(
            args.db,
            symbols=args.symbols,
            rate=args.rate,
            seconds=args.seconds,
            latency=args.latency,
        )
    )
    print(f"reactor trading desk · {args.symbols} symbols · {args.rate:g} quotes/s · offline")
    print(f"  quote updates written   {done.updates:,} (every one in its quote's history)")
    print(f"  analyst entries         {dict(sorted(done.outcomes.items()))}")
    print(f"  model calls             {done.model_calls:,}")
    print(f"  suggestions             {done.suggestions:,} (approve them: reactor serve ...)")
    last = "saw" if done.latest_seen else "did NOT see"
    print(f"  caught up               {done.behind:.2f} s after the feed ended")
    print(f"  the analyst {last} every symbol's last quote")
    return 0


async def _feed_only(db: str, names: Sequence[str], rate: float, seconds: float) -> int:
    async with ObjectStore(db, types=TYPES) as objects:
        return await feed(objects, names, rate, seconds)


if __name__ == "__main__":
    raise SystemExit(main())

"""The SignalBus on its own: patterns, FIFO dispatch, causality and streaming.

Run it with ``python -m examples.bus_demo`` (``make demo`` runs the trading bot).
"""

from __future__ import annotations

import asyncio

from reactor import Signal, SignalBus


def main() -> None:
    bus = SignalBus(run_id="demo")

    # A price tick makes an "analyst" react, and its analysis makes a "trader" react.
    def analyst(signal: Signal) -> None:
        trend = "up" if signal.payload["price"] > 100 else "down"
        bus.emit("analysis:complete", {"trend": trend}, source="analyst")

    def trader(signal: Signal) -> None:
        side = "buy" if signal.payload["trend"] == "up" else "hold"
        bus.emit("trade:proposed", {"side": side}, source="trader")

    bus.subscribe("market:tick", analyst)
    bus.subscribe("analysis:*", trader)
    bus.subscribe("trade:proposed", lambda s: print(f"  trader proposes: {s.payload['side']}"))

    print("Emitting two market ticks:")
    bus.emit("market:tick", {"price": 104.2}, source="user")
    bus.emit("market:tick", {"price": 97.5}, source="user")

    print("\nSignal log (seq, name, source, caused_by):")
    for signal in bus.history:
        print(f"  {signal.seq:>2}  {signal.name:<18} {signal.source:<8} {signal.caused_by}")

    async def stream() -> None:
        async with bus.signals("trade:*", until="trade:closed") as trades:
            bus.emit("trade:proposed", {"side": "sell"}, source="user")
            bus.emit("trade:closed", {"pnl": 12.5}, source="user")
            names = [signal.name async for signal in trades]
        print(f"\nStreamed to async code: {names}")

    asyncio.run(stream())


if __name__ == "__main__":
    main()

"""``reactor graph``: a graph as Mermaid, Graphviz DOT or JSON, with what runs observed."""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Iterable, Mapping

from reactor._cli._base import open_db
from reactor._cli._load import load_graph
from reactor._signals.names import parse_state_event
from reactor._signals.signal import Signal

__all__ = ["FORMATS", "cmd_graph", "observed_writes"]

FORMATS = ("mermaid", "dot", "json")

_KEY = re.compile(r"[\w.\-]+")
"""What a state key drawn from a recording may look like (the recording may be anyone's)."""


def cmd_graph(args: argparse.Namespace) -> int:
    """Print the graph; ``--from-run`` adds the state writes a recorded run observed."""
    _, graph = load_graph(args.target)
    observed: dict[str, list[str]] | None = None
    if args.from_run is not None:
        with open_db(args) as store:
            recording = store.load(store.resolve(args.from_run))
        observed = {
            agent: keys
            for agent, keys in observed_writes(recording.signals).items()
            if agent in graph.agents
        }
    shape = graph.shape(observed=observed)
    if args.format == "json":
        print(json.dumps(shape.to_json(), indent=2))
    elif args.format == "dot":
        print(shape.to_dot())
    else:
        print(shape.to_mermaid())
    return 0


def observed_writes(signals: Iterable[Signal]) -> dict[str, list[str]]:
    """State keys each agent wrote in a run: ``state:<key>:changed`` by ``agent:<name>``."""
    found: dict[str, list[str]] = {}
    for signal in signals:
        parsed = parse_state_event(signal.name)
        payload = signal.payload
        if parsed is None or parsed[1] != "changed" or not isinstance(payload, Mapping):
            continue
        actor = payload.get("actor")
        if isinstance(actor, str) and actor.startswith("agent:") and _KEY.fullmatch(parsed[0]):
            keys = found.setdefault(actor.removeprefix("agent:"), [])
            if parsed[0] not in keys:
                keys.append(parsed[0])
    return found

"""The ledger of a migrated flow's run: which nodes resolved, which edges fired.

It lives in the run's state as ``state["flow"]``, JSON data the join guards read:

* ``clock``: resolutions so far;
* ``done``: node -> the clock value when it resolved in the current pass;
* ``edges``: ``"from->to"`` -> whether the edge fired;
* ``loops``: loop edge -> times it fired;
* ``pending``: loop edges waiting for their body to settle;
* ``looped``: re-opened loop target -> the node whose resolution re-opened it.

:func:`record` applies the edge-based executor's loop rules (see
:mod:`migration._edge.scheduler`) again, on purpose, over this JSON: the property tests
check one against the other.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from migration._spec.models import EdgeSpec
from migration._spec.topology import Topology

__all__ = ["new_ledger", "record", "trigger_of"]


def new_ledger() -> dict[str, Any]:
    """The ledger of a run that has not resolved anything yet."""
    return {"clock": 0, "done": {}, "edges": {}, "loops": {}, "pending": [], "looped": {}}


def trigger_of(signal_name: str) -> str | None:
    """The node of a ``node:<id>:done`` signal, else ``None``."""
    parts = signal_name.split(":")
    return parts[1] if len(parts) == 3 and parts[0] == "node" and parts[2] == "done" else None


def record(
    ledger: dict[str, Any],
    topology: Topology[EdgeSpec],
    node: str,
    fired: Mapping[str, bool],
    loops: list[EdgeSpec],
) -> None:
    """Record ``node``'s resolution in ``ledger``, then re-open settled loop bodies."""
    ledger["clock"] += 1
    ledger["done"][node] = ledger["clock"]
    ledger["looped"].pop(node, None)
    ledger["edges"].update(fired)
    for edge in loops:
        ledger["loops"][edge.key] = ledger["loops"].get(edge.key, 0) + 1
        ledger["pending"].append(edge.key)
    targets = {edge.key: edge.target for edges in topology.loops_in.values() for edge in edges}
    applied = True
    while applied:
        applied = False
        for key in ledger["pending"]:
            target = targets[key]
            body = topology.body[target]
            if all(member in ledger["done"] for member in body):
                ledger["pending"] = [k for k in ledger["pending"] if targets[k] != target]
                for member in body:
                    del ledger["done"][member]
                    for edge in topology.outgoing[member]:
                        ledger["edges"].pop(edge.key, None)
                ledger["looped"][target] = node
                applied = True
                break

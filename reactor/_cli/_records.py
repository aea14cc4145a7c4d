"""``reactor runs``, ``show`` and ``diff``: read recordings, never change them."""

from __future__ import annotations

import argparse
import json
import sys

from reactor._cli._base import db_path, open_db
from reactor._cli._output import Output
from reactor._cli._render import clean, runs_table, show_view

__all__ = ["cmd_diff", "cmd_runs", "cmd_show"]


def cmd_runs(args: argparse.Namespace) -> int:
    """List recorded runs, newest first; say what was filtered when none match."""
    with open_db(args) as store:
        infos = store.runs(graph=args.graph, tag=args.tag, status=args.status, limit=args.limit)
    if args.json:
        for info in infos:
            print(json.dumps(info.to_dict()))
        return 0
    out = Output(plain=args.plain)
    if infos:
        out.table(runs_table(infos))
        return 0
    filters = []
    if args.graph is not None:
        filters.append(f"of graph {args.graph!r}")
    if args.tag is not None:
        filters.append(f"tagged {args.tag!r}")
    if args.status is not None:
        filters.append(f"with status {args.status!r}")
    where = clean(db_path(args))
    if filters:
        out.line(f"No runs {' '.join(filters)} in {where}; `reactor runs` lists them all.")
    else:
        out.line(f"No recorded runs in {where}.")
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    """Show a recorded run: header, agents, timeline and causal tree."""
    with open_db(args) as store:
        recording = store.load(store.resolve(args.run))
    if args.json:
        sys.stdout.write(recording.to_jsonl())
        return 0
    Output(plain=args.plain).show(show_view(recording, payloads=args.payloads, deltas=args.deltas))
    return 0


def cmd_diff(args: argparse.Namespace) -> int:
    """Say where two recorded runs first differ (exit 1 when they do)."""
    with open_db(args) as store:
        left = store.load(store.resolve(args.run_a))
        right = store.load(store.resolve(args.run_b))
    divergence = left.diff(right)
    out = Output(plain=args.plain)
    left_id, right_id = clean(left.run_id), clean(right.run_id)
    if divergence is None:
        out.line(f"{left_id} and {right_id} match ({len(left.signals)} signals).")
        return 0
    out.line(f"{left_id} (left) and {right_id} (right) differ.")
    out.line(clean(divergence, newlines=True))
    return 1

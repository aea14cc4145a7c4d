"""Where the CLI writes: rich tables, trees and colours on a terminal, plain text elsewhere.

rich is an optional dependency (the ``cli`` extra). Without it, with ``--plain``, or
when stdout is not a terminal (a pipe, a file, a test), every view is printed as
plain text, so scripts and ``grep`` see stable lines.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TextIO

from reactor._cli._render import Node, ShowView, Table, plain_show, plain_tree, rich_console

if TYPE_CHECKING:
    pass

__all__ = ["Output", "rich_console"]

_STYLES = {
    "harness": "bold",
    "failed": "bold red",
    "cancelled": "yellow",
    "skipped": "dim",
    "completed": "green",
    "state": "cyan",
}


class Output:
    """Prints the CLI's views on stdout: through rich on a terminal, as text elsewhere.

    Args:
        plain: Never use rich (``--plain``).
        stream: Where to print (stdout by default).
    """

    def __init__(self, *, plain: bool = False, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stdout
        self.console = rich_console(self.stream, plain=plain)

    def line(self, text: str = "", *, style: str | None = None) -> None:
        """Print text as it is (styled on a terminal)."""
        if self.console is None:
            print(text, file=self.stream)
        else:
            self.console.print(_text(text, style), soft_wrap=True)

    def table(self, table: Table, *, title: str | None = None) -> None:
        """Print a table: rich's on a terminal, aligned columns elsewhere."""
        if self.console is None:
            if title:
                print(title, file=self.stream)
            print(table.plain(), file=self.stream)
            return
        self.console.print(_rich_table(table, title))

    def tree(self, roots: Sequence[Node]) -> None:
        """Print a tree of nodes (the causal tree)."""
        if self.console is None:
            print(plain_tree(roots), file=self.stream)
            return
        for root in roots:
            self.console.print(_rich_tree(root))

    def show(self, view: ShowView) -> None:
        """Print ``reactor show``'s view of a run."""
        if self.console is None:
            print(plain_show(view), file=self.stream)
            return
        from rich import box
        from rich.table import Table as RichTable

        self.line(view.title, style="bold")
        header = RichTable.grid(padding=(0, 2))
        for label, value in view.header:
            header.add_row(_text(label, "dim"), _text(value, _status_style(label, value)))
        self.console.print(header)
        self.line()
        self.table(view.agents, title="Agents")
        self.line()
        timeline = RichTable(title="Timeline", title_justify="left", box=box.SIMPLE_HEAD)
        for heading in ("TIME", "SEQ", "SIGNAL", "SOURCE", "DETAIL"):
            timeline.add_column(heading, justify="right" if heading in ("TIME", "SEQ") else "left")
        for row in view.timeline:
            timeline.add_row(*(_text(cell) for cell in row))
        self.console.print(timeline)
        self.line("Causal tree", style="italic")
        self.tree(view.tree)


def _text(text: str, style: str | None = None) -> Any:
    from rich.text import Text

    return Text(text, style=style or "")


def _status_style(label: str, value: str) -> str | None:
    if label != "status":
        return None
    if value.startswith(("completed", "ended")) and "failed" not in value:
        return "green"
    return "bold red"


def _rich_table(table: Table, title: str | None) -> Any:
    from rich import box
    from rich.table import Table as RichTable

    drawn = RichTable(title=title, title_justify="left", box=box.SIMPLE_HEAD)
    for index, heading in enumerate(table.columns):
        drawn.add_column(heading, justify="right" if index in table.right else "left")
    for row in table.rows:
        drawn.add_row(*(_text(cell) for cell in row))
    return drawn


def _rich_tree(root: Node) -> Any:
    from rich.tree import Tree

    drawn = Tree(_text(root.label, _STYLES.get(root.kind)), guide_style="dim")
    stack = [(root, drawn)]
    while stack:  # iterative: a causal chain may be thousands of signals deep
        node, branch = stack.pop()
        for child in node.children:
            stack.append((child, branch.add(_text(child.label, _STYLES.get(child.kind)))))
    return drawn

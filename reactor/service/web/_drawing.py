"""A graph drawn for the web UI: agents as boxes, the signals between them as labelled arrows.

:func:`draw` turns a :class:`~reactor._graph.shape.GraphShape` (agents, signals, and
which agent emits or reacts to which signal) into boxes and arrows with coordinates,
laid out on the server with grandalf's Sugiyama layout (the layered drawing Graphviz's
``dot`` makes), so the page needs no script and no CDN to show it. A signal becomes an
arrow from each agent that emits (or writes) it to each agent it activates; a signal
no agent emits comes from ``start`` (``harness:start``) or from ``outside`` (sent to
the run), and state written that no agent reacts to goes to ``state``. Each arrow's
label is a small vertex of the layout of its own, so labels never overlap the boxes;
an agent that activates itself gets a loop on its right, with room kept for it. The
page's template writes the SVG (every text escaped there).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from typing import Literal

from grandalf.graphs import Edge as LayoutEdge
from grandalf.graphs import Graph, Vertex
from grandalf.layouts import SugiyamaLayout, VertexViewer
from grandalf.routing import EdgeViewer

from reactor._graph.shape import GraphShape
from reactor._signals.names import HARNESS_START

__all__ = ["Arrow", "Box", "BoxKind", "Drawing", "draw"]

BoxKind = Literal["agent", "start", "outside", "state"]

AGENT_CHAR = 7.8
"""Width of a character of an agent's name (13 px monospace), in SVG units."""
LABEL_CHAR = 6.7
"""Width of a character of a signal's name (11 px monospace)."""
LABEL_LINE = 14.0
"""Height of a line of an arrow's label."""
MAX_LINES = 4
"""Signal names an arrow's label lists before ``+N more``."""
MARGIN = 12.0
"""Space around the drawing."""
GAP = 40.0
"""Space between two parts of a graph that no arrow connects."""
LOOP = 18.0
"""How far an agent's loop to itself reaches out of its box."""
_PSEUDO: dict[BoxKind, str] = {"start": "start", "outside": "outside", "state": "state"}


@dataclasses.dataclass(frozen=True)
class Box:
    """A node: an agent, or where signals come from or go to.

    Attributes:
        name: The agent's name (or ``start``, ``outside``, ``state``).
        kind: ``agent``, or one of the three ends.
        x: Left edge. y: Top edge. w: Width. h: Height.
    """

    name: str
    kind: BoxKind
    x: float
    y: float
    w: float
    h: float

    @property
    def cx(self) -> float:
        """The horizontal centre, where the name is written."""
        return self.x + self.w / 2

    @property
    def cy(self) -> float:
        """The vertical centre."""
        return self.y + self.h / 2


@dataclasses.dataclass(frozen=True)
class Arrow:
    """The signals from one box to another.

    Attributes:
        source: The emitting box's name. target: The activated box's name.
        signals: The signals' names, in the order the graph declares them.
        lines: The label's lines (at most :data:`MAX_LINES` names, then ``+N more``).
        path: The SVG path (numbers only), from the source's border to the target's.
        label_x: The label's left edge. label_y: Its top edge.
        label_w: Its width. label_h: Its height.
        state: Whether every signal is a state write (drawn dashed).
    """

    source: str
    target: str
    signals: tuple[str, ...]
    lines: tuple[str, ...]
    path: str
    label_x: float
    label_y: float
    label_w: float
    label_h: float
    state: bool


@dataclasses.dataclass(frozen=True)
class Drawing:
    """A whole graph, ready for an SVG of ``width`` x ``height``."""

    width: float
    height: float
    boxes: tuple[Box, ...]
    arrows: tuple[Arrow, ...]

    @property
    def agents(self) -> tuple[str, ...]:
        """The agents drawn, in drawing order."""
        return tuple(box.name for box in self.boxes if box.kind == "agent")


@dataclasses.dataclass
class _Link:
    """The signals from one box to another, before the layout."""

    source: str
    target: str
    signals: list[str] = dataclasses.field(default_factory=list)
    state: bool = True


def _links(shape: GraphShape) -> tuple[list[str], list[_Link]]:
    """The boxes (agents first) and the arrows between them, signals merged per pair."""
    emitters: dict[str, list[tuple[str, bool]]] = {}
    listeners: dict[str, list[str]] = {}
    for edge in shape.edges:
        if edge.source.startswith("agent:"):
            state = edge.kind in ("updates", "writes", "observed")
            emitters.setdefault(edge.target[7:], []).append((edge.source[6:], state))
        else:
            listeners.setdefault(edge.source[7:], []).append(edge.target[6:])
    links: dict[tuple[str, str], _Link] = {}
    ends: list[str] = []

    def link(source: str, target: str, signal: str, state: bool) -> None:
        found = links.setdefault((source, target), _Link(source, target))
        if signal not in found.signals:
            found.signals.append(signal)
        found.state = found.state and state
        for end in (source, target):
            if end in _PSEUDO and end not in shape.agents and end not in ends:
                ends.append(end)

    for signal in shape.signals:
        sources = emitters.get(signal) or [
            ("start" if signal == HARNESS_START else "outside", False)
        ]
        for source, state in sources:
            for target in listeners.get(signal) or ["state"]:
                link(source, target, signal, state)
    return [*shape.agents, *ends], list(links.values())


def _size(name: str, kind: BoxKind) -> tuple[float, float]:
    if kind == "agent":
        return max(64.0, len(name) * AGENT_CHAR + 24), 34.0
    return max(48.0, len(name) * LABEL_CHAR + 20), 24.0


def _lines(signals: Sequence[str]) -> tuple[str, ...]:
    if len(signals) <= MAX_LINES:
        return tuple(signals)
    return (*signals[: MAX_LINES - 1], f"+{len(signals) - MAX_LINES + 1} more")


def _label_size(lines: Sequence[str]) -> tuple[float, float]:
    return max(len(line) for line in lines) * LABEL_CHAR + 8, len(lines) * LABEL_LINE + 4


def _kind(name: str, agents: Iterable[str]) -> BoxKind:
    if name in agents:
        return "agent"
    assert name in _PSEUDO
    return "start" if name == "start" else "outside" if name == "outside" else "state"


def draw(shape: GraphShape) -> Drawing:
    """Lay ``shape`` out: boxes and labelled arrows, in SVG coordinates from (0, 0)."""
    names, every = _links(shape)
    loops = {link.source: link for link in every if link.source == link.target}
    links = [link for link in every if link.source != link.target]
    vertices, sizes = {}, {}
    for name in names:
        sizes[name] = w, h = _size(name, _kind(name, shape.agents))
        if name in loops:  # room on both sides, so that the box stays in the middle
            label_w, label_h = _label_size(_lines(loops[name].signals))
            w, h = w + 2 * (LOOP + 4 + label_w), max(h, label_h)
        vertices[name] = Vertex(name)
        vertices[name].view = VertexViewer(w, h)
    labels, edges = [], []
    for link in links:
        label = Vertex(link)
        label.view = VertexViewer(*_label_size(_lines(link.signals)))
        labels.append(label)
        for pair in ((vertices[link.source], label), (label, vertices[link.target])):
            edge = LayoutEdge(*pair)
            edge.view = EdgeViewer()
            edges.append(edge)
    graph = Graph(list(vertices.values()) + labels, edges)
    left = 0.0
    for component in graph.C:
        layout = SugiyamaLayout(component)
        layout.xspace, layout.yspace = 24, 26
        layout.init_all()
        layout.draw()
        members = list(component.sV)
        low = min(v.view.xy[0] - v.view.w / 2 for v in members)
        top = min(v.view.xy[1] - v.view.h / 2 for v in members)
        routes = {edge: _route(edge) for edge in component.sE}
        for edge, route in routes.items():
            edge.view.setpath([_moved(p, low, top, left) for p in route])
        for vertex in members:
            vertex.view.xy = _moved(vertex.view.xy, low, top, left)
        left += max(v.view.xy[0] + v.view.w / 2 for v in members) - left - MARGIN + GAP
    boxes = tuple(
        _box(name, _kind(name, shape.agents), vertex.view.xy, sizes[name])
        for name, vertex in vertices.items()
    )
    placed = {box.name: box for box in boxes}
    arrows = tuple(
        [_arrow(label, placed) for label in labels]
        + [_loop(link, placed[name]) for name, link in loops.items()]
    )
    width = max((b.x + b.w for b in boxes), default=0.0)
    width = max(width, *(a.label_x + a.label_w for a in arrows)) if arrows else width
    height = max((b.y + b.h for b in boxes), default=0.0)
    height = max(height, *(a.label_y + a.label_h for a in arrows)) if arrows else height
    return Drawing(round(width + MARGIN), round(height + MARGIN), boxes, arrows)


def _route(edge: LayoutEdge) -> list[tuple[float, float]]:
    """The points an edge passes (its ends' centres and the layout's bends), source first."""
    points = [tuple(p) for p in edge.view._pts]
    source = edge.v[0].view.xy
    if _distance(points[-1], source) < _distance(points[0], source):
        points.reverse()  # an edge the layout turned round to break a cycle
    return points


def _distance(a: Sequence[float], b: Sequence[float]) -> float:
    return float((a[0] - b[0]) ** 2 + (a[1] - b[1]) ** 2)


def _moved(point: Sequence[float], low: float, top: float, left: float) -> tuple[float, float]:
    return (point[0] - low + left + MARGIN, point[1] - top + MARGIN)


def _corner(view: VertexViewer) -> tuple[float, float]:
    x, y = view.xy
    return round(x - view.w / 2, 1), round(y - view.h / 2, 1)


def _box(name: str, kind: BoxKind, centre: Sequence[float], size: tuple[float, float]) -> Box:
    w, h = size
    return Box(name, kind, round(centre[0] - w / 2, 1), round(centre[1] - h / 2, 1), w, h)


def _loop(link: _Link, box: Box) -> Arrow:
    """An agent's arrow to itself: a loop out of its right side, the label beside it."""
    lines = _lines(link.signals)
    label_w, label_h = _label_size(lines)
    right, top, bottom = box.x + box.w, box.cy - box.h / 4, box.cy + box.h / 4
    out = right + LOOP
    path = (
        f"M {right:.1f} {top:.1f} C {out:.1f} {top - 6:.1f} {out:.1f} {bottom + 6:.1f} "
        f"{right:.1f} {bottom:.1f}"
    )
    return Arrow(
        source=link.source,
        target=link.target,
        signals=tuple(link.signals),
        lines=lines,
        path=path,
        label_x=round(out + 4, 1),
        label_y=round(box.cy - label_h / 2, 1),
        label_w=label_w,
        label_h=label_h,
        state=link.state,
    )


def _arrow(label: Vertex, boxes: dict[str, Box]) -> Arrow:
    link: _Link = label.data
    into, out = label.e_in()[0], label.e_out()[0]
    points = [*into.view._pts[:-1], *out.view._pts]
    points[0] = _border(boxes[link.source], points[1])
    points[-1] = _border(boxes[link.target], points[-2])
    lines = _lines(link.signals)
    x, y = _corner(label.view)
    return Arrow(
        source=link.source,
        target=link.target,
        signals=tuple(link.signals),
        lines=lines,
        path=_smooth(points),
        label_x=x,
        label_y=y,
        label_w=label.view.w,
        label_h=label.view.h,
        state=link.state,
    )


def _border(box: Box, toward: Sequence[float]) -> tuple[float, float]:
    """Where the line from a box's centre toward a point leaves the box."""
    cx, cy = box.cx, box.cy
    dx, dy = toward[0] - cx, toward[1] - cy
    if dx == 0 and dy == 0:
        return cx, cy
    scale = min(
        (box.w / 2) / abs(dx) if dx else float("inf"),
        (box.h / 2) / abs(dy) if dy else float("inf"),
    )
    return cx + dx * scale, cy + dy * scale


def _smooth(points: Sequence[Sequence[float]]) -> str:
    """An SVG path through ``points``, its bends rounded (quadratic curves at the corners)."""

    def at(point: Sequence[float]) -> str:
        return f"{point[0]:.1f} {point[1]:.1f}"

    path = [f"M {at(points[0])}"]
    for index in range(1, len(points) - 1):
        before, corner, after = points[index - 1], points[index], points[index + 1]
        entry = ((before[0] + corner[0]) / 2, (before[1] + corner[1]) / 2)
        leave = ((corner[0] + after[0]) / 2, (corner[1] + after[1]) / 2)
        path.append(f"L {at(entry)} Q {at(corner)} {at(leave)}")
    path.append(f"L {at(points[-1])}")
    return " ".join(path)

from __future__ import annotations

import itertools
import re
import warnings
from typing import Any

import pytest

from reactor import agent, reactive
from reactor.exceptions import CycleWarning
from reactor.service.web._drawing import Box, Drawing, draw


def handler(ctx: Any) -> int:
    return 1


def trading() -> Any:
    return reactive(
        {
            "market": agent(run=handler, updates="prices"),
            "analyst": agent(run=handler, activate_on="state:prices:changed", updates="view"),
            "risk": agent(run=handler, activate_on="state:prices:changed", updates="risk"),
            "trader": agent(
                run=handler,
                activate_on=["state:view:changed", "state:risk:changed"],
                emits="trade:proposed",
            ),
            "approve": agent(ask="Trade?", choices=["yes", "no"], activate_on="trade:proposed"),
        },
        state={"prices": None, "view": None, "risk": None},
        name="trading",
    )


def arrows(drawing: Drawing) -> dict[tuple[str, str], tuple[str, ...]]:
    return {(arrow.source, arrow.target): arrow.signals for arrow in drawing.arrows}


def overlap(a: Box, b: Box) -> bool:
    return a.x < b.x + b.w and b.x < a.x + a.w and a.y < b.y + b.h and b.y < a.y + a.h


def test_every_agent_is_a_box_and_every_signal_a_labelled_arrow_between_agents() -> None:
    drawing = draw(trading().shape())
    assert drawing.agents == ("market", "analyst", "risk", "trader", "approve")
    assert [box.name for box in drawing.boxes if box.kind != "agent"] == ["start"]
    assert arrows(drawing) == {
        ("start", "market"): ("harness:start",),
        ("market", "analyst"): ("state:prices:changed",),
        ("market", "risk"): ("state:prices:changed",),
        ("analyst", "trader"): ("state:view:changed",),
        ("risk", "trader"): ("state:risk:changed",),
        ("trader", "approve"): ("trade:proposed",),
    }
    dashed = {(a.source, a.target) for a in drawing.arrows if a.state}
    assert dashed == {
        ("market", "analyst"),
        ("market", "risk"),
        ("analyst", "trader"),
        ("risk", "trader"),
    }


def test_boxes_and_labels_do_not_overlap_and_fit_the_drawing() -> None:
    drawing = draw(trading().shape())
    labels = [
        Box(a.signals[0], "agent", a.label_x, a.label_y, a.label_w, a.label_h)
        for a in drawing.arrows
    ]
    shapes = [*drawing.boxes, *labels]
    for a, b in itertools.combinations(shapes, 2):
        assert not overlap(a, b), (a, b)
    for shape in shapes:
        assert min(shape.x, shape.y) >= 0
        assert shape.x + shape.w <= drawing.width
        assert shape.y + shape.h <= drawing.height


def test_the_run_flows_down_each_arrow_from_its_source_to_its_target() -> None:
    drawing = draw(trading().shape())
    boxes = {box.name: box for box in drawing.boxes}
    for arrow in drawing.arrows:
        numbers = [float(n) for n in re.findall(r"-?\d+(?:\.\d+)?", arrow.path)]
        (x0, y0), (x1, y1) = numbers[:2], numbers[-2:]
        source, target = boxes[arrow.source], boxes[arrow.target]
        assert (x0, y0) == pytest.approx((x0, source.y + source.h), abs=0.2)
        assert (x1, y1) == pytest.approx((x1, target.y), abs=0.2)


def test_signals_from_outside_and_state_nobody_reads_have_ends_of_their_own() -> None:
    graph = reactive(
        {"echo": agent(run=handler, activate_on="go", updates="said")},
        state={"said": None},
        external=["go"],
    )
    drawing = draw(graph.shape())
    assert arrows(drawing) == {
        ("outside", "echo"): ("go",),
        ("echo", "state"): ("state:said:changed",),
    }
    assert {box.name: box.kind for box in drawing.boxes} == {
        "echo": "agent",
        "outside": "outside",
        "state": "state",
    }


def test_an_agent_that_activates_itself_has_a_loop_beside_its_box() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CycleWarning)
        poll = agent(run=handler, activate_on=["harness:start", "again"], emits="again")
        graph = reactive({"poll": poll})
    drawing = draw(graph.shape())
    (loop,) = [arrow for arrow in drawing.arrows if arrow.source == arrow.target]
    (box,) = [box for box in drawing.boxes if box.name == "poll"]
    assert loop.signals == ("again",)
    assert loop.label_x > box.x + box.w
    assert loop.label_x + loop.label_w <= drawing.width


def test_many_signals_between_two_agents_share_one_arrow_with_a_short_label() -> None:
    names = [f"s{n}" for n in range(6)]
    graph = reactive(
        {
            "a": agent(run=handler, emits=names),
            "b": agent(run=handler, activate_on=names),
        }
    )
    (between,) = [arrow for arrow in draw(graph.shape()).arrows if arrow.source == "a"]
    assert between.signals == tuple(names)
    assert between.lines == ("s0", "s1", "s2", "+3 more")

"""The graphs pages: the graphs (``/graphs``), one drawn (``/graphs/{name}``), starting one.

A graph's page draws it as an SVG made on the server (:mod:`._drawing`: agents as
boxes, signals as labelled arrows), lists its recent runs, and has a form that starts a
run with a JSON input (prefilled with the graph's default input, if it has one),
through the same service function as ``POST /api/runs``
(:meth:`ReactionService.submit`); the browser then opens the new run's page. A run's
page draws its graph too, the agents active at that moment highlighted.
"""

from __future__ import annotations

from typing import Annotated

import fastapi
from starlette.requests import Request
from starlette.responses import Response

from reactor._graph.reactive import Reactive
from reactor._recording.info import RunInfo
from reactor._signals.signal import to_jsonable
from reactor.exceptions import ReactorError, ServiceStateError
from reactor.service._api.base import ApiError
from reactor.service._api.runs import listed_runs
from reactor.service._hosting.launch import SERVICE_TAG, RunRequest
from reactor.service._hosting.service import ReactionService
from reactor.service.web._drawing import Drawing, draw
from reactor.service.web._render import (
    Operating,
    Viewing,
    back,
    json_field,
    json_text,
    page,
    service_of,
    web_of,
)
from reactor.service.web._sessions import Session

__all__ = ["drawing_of", "router", "run_drawing"]

router = fastapi.APIRouter(include_in_schema=False)

RECENT = 5
"""Runs a graph's page lists."""

Field = Annotated[str, fastapi.Form()]


def drawing_of(request: Request, graph: Reactive) -> Drawing:
    """``graph`` drawn (once: a graph does not change while it is served)."""
    drawings = web_of(request).drawings
    found = drawings.get(graph)
    if found is None:
        found = drawings[graph] = draw(graph.shape())
    return found


def _graph_of_run(service: ReactionService, info: RunInfo) -> Reactive | None:
    """The graph a run runs: a registered graph, or an agent (a graph of itself)."""
    kind, _, name = info.tags.get(SERVICE_TAG, "").partition(":")
    if kind == "graph":
        return service.runs.graphs.get(name)
    name = name if kind == "agent" else info.graph or ""
    if name not in service.catalog.agents:
        return service.runs.graphs.get(name)
    try:
        return service.runs.graph(RunRequest("agent", name))
    except ReactorError:
        return None


def run_drawing(request: Request, info: RunInfo) -> Drawing | None:
    """The drawing of the graph a run runs, if this service knows it."""
    graph = _graph_of_run(service_of(request), info)
    return None if graph is None else drawing_of(request, graph)


@router.get("/graphs")
async def graphs(request: Request, session: Viewing) -> Response:
    """The graphs this service starts by name, each with its agents."""
    known = service_of(request).runs.graphs
    listed = [(name, known[name]) for name in sorted(known)]
    return page(request, "graphs.html", session, graphs=listed)


def default_input(graph: Reactive) -> str | None:
    """The graph's default input (``reactive(..., input=...)``) as pretty JSON, if any."""
    given = graph.defaults.get("input")
    return None if given is None else json_text(to_jsonable(given))  # a model as its data


async def _graph_page(
    request: Request,
    session: Session,
    name: str,
    given: str | None = None,
    problem: str | None = None,
    code: int = 200,
) -> Response:
    service = service_of(request)
    graph = service.runs.graphs.get(name)
    if graph is None:
        return page(request, "missing.html", session, 404, what=f"graph {name}")
    try:
        recent = await listed_runs(service, graph=name, limit=RECENT)
    except (ApiError, ReactorError):
        recent = []
    default = default_input(graph)
    return page(
        request,
        "graph.html",
        session,
        code,
        name=name,
        graph=graph,
        drawing=drawing_of(request, graph),
        active=(),
        recent=recent,
        given=(default or "") if given is None else given,  # the form starts prefilled
        example=default or "{}",
        problem=problem,
    )


@router.get("/graphs/{name}")
async def graph_page(request: Request, name: str, session: Viewing) -> Response:
    """A graph drawn, its recent runs, and the form that starts one."""
    return await _graph_page(request, session, name)


@router.post("/graphs/{name}/runs")
async def start_form(
    request: Request, name: str, session: Operating, input: Field = ""
) -> Response:
    """Start a run of the graph with the JSON ``input``, then open its page.

    Input that is not JSON is shown again with what is wrong (422), and nothing starts.
    """
    service = service_of(request)
    if name not in service.runs.graphs:
        return page(request, "missing.html", session, 404, what=f"graph {name}")
    try:
        given = json_field(input)
    except ValueError as exc:
        return await _graph_page(request, session, name, input, str(exc), 422)
    try:
        run_id = await service.submit(name, given, user=session.user.id)
    except ServiceStateError as exc:
        return await _graph_page(request, session, name, input, str(exc), 503)
    session.notify("ok", f"Run {run_id} of {name} was started.")
    return back(request, f"/runs/{run_id}")

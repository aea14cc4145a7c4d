"""Templates are data: no path from a prompt or a guard reaches into the process.

The corpus holds every known Jinja escape (the ``cycler``/``joiner``/``namespace``/
``lipsum`` globals, ``__init__.__globals__``, ``self``, ``config``, ``request``, the
``attr()`` filter, format strings) and the path a probe found through a live object of
the service's scope (``objects.store.db.engine.dialect.dbapi...os.popen``). Each is
refused when the agent is defined where the template shows it, and when it renders
where it is built at run time, in the compiled fast path and in Jinja alike; a marker
file a successful escape would write never appears.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import os
import re
import sqlite3
import types
from pathlib import Path
from typing import Any

import pydantic
import pytest

from reactor import (
    ScriptedProvider,
    TemplateError,
    TemplateSecurityError,
    agent,
    reactive,
)
from reactor._agents.sandbox import ObjectsView
from reactor._agents.templates import compile_expression, compile_template, render, render_async

MARKER = "reactor-template-escape-marker"


def _popen(marker: Path) -> str:
    return f'os.popen("touch {marker}").read()'


class _Engine:
    """A live object of the process, as a service's scope holds them (a store, an engine)."""

    def __init__(self) -> None:
        self.dialect = types.SimpleNamespace(dbapi=sqlite3)
        self.os = os
        self.environ = os.environ


class _Store:
    def __init__(self) -> None:
        self.db = types.SimpleNamespace(engine=_Engine())


# -- refused at definition: the template shows the path ------------------------------

SEEN = [
    pytest.param(
        "{{ objects.store.db.engine.dialect.dbapi.aiosqlite.core.logging.os.popen('id').read() }}",
        "objects.store",
        id="the-probe",
    ),
    pytest.param("{{ objects.store }}", "objects.store", id="objects-store"),
    pytest.param(
        "{{ cycler.__init__.__globals__.os.popen('id').read() }}", "cycler.__init__", id="cycler"
    ),
    pytest.param("{{ joiner.__init__.__globals__.os }}", "joiner.__init__", id="joiner"),
    pytest.param("{{ namespace.__init__.__globals__.os }}", "namespace.__init__", id="namespace"),
    pytest.param("{{ lipsum.__globals__['os'] }}", "lipsum.__globals__", id="lipsum"),
    pytest.param("{{ self.__init__.__globals__ }}", "self.__init__", id="self"),
    pytest.param(
        "{{ self._TemplateReference__context }}",
        "self._TemplateReference__context",
        id="self-context",
    ),
    pytest.param("{{ ''.__class__.__mro__[1].__subclasses__() }}", "?.__class__", id="subclasses"),
    pytest.param("{{ config.__class__.__init__.__globals__ }}", "config.__class__", id="config"),
    pytest.param(
        "{{ request.application.__globals__.__builtins__ }}",
        "request.application.__globals__",
        id="request",
    ),
    pytest.param("{{ state|attr('__class__') }}", "attr('__class__')", id="attr-filter"),
    pytest.param("{{ '{0.__class__}'.format(state) }}", "{0.__class__}", id="format-string"),
    pytest.param("{{ input.mro() }}", "input.mro", id="mro"),
    pytest.param("{{ signal.gi_frame.f_globals }}", "signal.gi_frame", id="frames"),
    pytest.param(
        "{% for c in ().__class__.__base__.__subclasses__() %}{{ c }}{% endfor %}",
        "?.__class__",
        id="for-subclasses",
    ),
]


@pytest.mark.parametrize(("prompt", "path"), SEEN)
def test_a_template_that_shows_an_escape_is_refused_when_the_agent_is_defined(
    prompt: str, path: str
) -> None:
    with pytest.raises(TemplateSecurityError) as refused:
        agent(prompt=prompt)
    assert refused.value.path == path
    assert re.match(
        rf"^Agent '\(unnamed\)': the prompt reaches for {re.escape(repr(path))}, "
        r"which is not data \(",
        str(refused.value),
    )


@pytest.mark.parametrize(("prompt", "path"), SEEN[:8])
def test_a_guard_or_a_system_prompt_that_shows_an_escape_is_refused_too(
    prompt: str, path: str
) -> None:
    expression = prompt.removeprefix("{{ ").removesuffix(" }}")
    with pytest.raises(TemplateSecurityError, match="the when expression reaches for"):
        agent(prompt="hi", when=expression)
    with pytest.raises(TemplateSecurityError, match="the system reaches for"):
        agent(prompt="hi", system=prompt)


def test_a_guard_may_not_query_objects() -> None:
    with pytest.raises(TemplateSecurityError, match=r"queries `objects`; a guard is evaluated"):
        agent(prompt="hi", when="objects.get('q_1').data.price > 1")


def test_the_removed_globals_are_not_defined() -> None:
    for name in ("cycler", "joiner", "lipsum"):
        template = compile_template(f"{{{{ {name}() }}}}", agent="a", field="prompt")
        with pytest.raises(TemplateError, match=rf"uses '{name}', which is not defined"):
            render(template, {}, agent="a", field="prompt")


# -- refused when it renders: the path is built at run time ---------------------------

BUILT = [
    pytest.param("{{ store['d' ~ 'b'].engine }}", "_Store.db", id="item-of-a-live-object"),
    pytest.param("{{ objects['st' ~ 'ore'] }}", "objects.store", id="objects-item"),
    pytest.param("{{ state|attr('__cl' ~ 'ass__') }}", "dict.__class__", id="attr-filter"),
    pytest.param("{{ ('{0.' ~ '__class__}').format(input) }}", "dict.__class__", id="format"),
    pytest.param("{{ dict.fromkeys }}", "dict.fromkeys", id="a-class"),
    pytest.param("{{ namespace['mr' ~ 'o'] }}", "Namespace.mro", id="namespace-class"),
    pytest.param("{{ (1).real }}", "int.real", id="a-number-attribute"),
    pytest.param(
        "{{ input.items['__se' ~ 'lf__'] }}", "builtin_function_or_method.__self__", id="a-method"
    ),
    pytest.param("{{ holder.module.path }}", "Holder.module", id="a-module-in-a-model"),
    pytest.param("{{ holder.helper() }}", "Holder.helper", id="a-model-method"),
    pytest.param("{{ signal.matches }}", "Signal.matches", id="a-signal-method"),
    pytest.param("{{ side.value.x }}", "Side.value", id="an-enum-holding-a-function"),
]


class Holder(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(arbitrary_types_allowed=True)
    module: Any = os
    price: float = 1.5

    def helper(self) -> str:
        return "called"


class Side(enum.Enum):
    BUY = "buy"
    BAD = types.SimpleNamespace(x=os)


def _names(marker: Path) -> dict[str, Any]:
    return {
        "state": {"count": 1},
        "input": {"symbol": "ACME"},
        "signal": None,
        "agent": "a",
        "run_id": "run_1",
        "store": _Store(),
        "objects": ObjectsView(_never, _never, _never),
        "holder": Holder(),
        "side": Side.BAD,
    }


async def _never(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("no template here reads objects")


@pytest.mark.parametrize("body", ["{body}", "{{% if true %}}{body}{{% endif %}}"])
@pytest.mark.parametrize(("prompt", "path"), BUILT)
async def test_a_path_built_at_run_time_is_refused_when_it_renders(
    prompt: str, path: str, body: str, tmp_path: Path
) -> None:
    from reactor import Signal

    template = compile_template(body.format(body=prompt), agent="a", field="prompt")
    names = {**_names(tmp_path), "signal": Signal("tick", {"n": 1})}
    with pytest.raises(TemplateSecurityError) as refused:
        await render_async(template, names, agent="a", field="prompt")
    assert refused.value.path == path
    assert str(refused.value).startswith(f"Agent 'a': the prompt reaches for {path!r}")


@pytest.mark.parametrize(
    "expression",
    ["store['d' ~ 'b']", "holder.module", "(1).real > 0", "dict['fromkeys']"],
)
def test_a_guard_built_at_run_time_is_refused_in_the_fast_path_too(
    expression: str, tmp_path: Path
) -> None:
    guard = compile_expression(expression, agent="a")
    with pytest.raises(TemplateSecurityError):
        render(guard, _names(tmp_path), agent="a", field="when expression")


async def test_the_probe_never_runs_code_in_a_run(tmp_path: Path) -> None:
    marker = tmp_path / MARKER
    prompt = "{{ store['d' ~ 'b'].engine.os." + _popen(marker) + " }}"
    graph = reactive({"a": agent(prompt=prompt)}, scope={"store": _Store()})
    result = await graph.run(provider=ScriptedProvider({"a": ["x"]}))
    assert result.status == "failed"
    assert isinstance(result.error, TemplateSecurityError)
    failed = [s for s in result.signals if s.name == "agent:a:failed"]
    assert failed[0].payload["error"]["type"] == "TemplateSecurityError"
    assert not marker.exists()


# -- what templates may do with data ------------------------------------------------


class Quote(pydantic.BaseModel):
    symbol: str
    price: float
    history: list[float] = []

    @property
    def doubled(self) -> float:
        return self.price * 2

    @pydantic.computed_field  # type: ignore[prop-decorator]
    @property
    def label(self) -> str:
        return f"{self.symbol}@{self.price}"


@dataclasses.dataclass
class Fill:
    side: str
    size: int


class Book(pydantic.BaseModel):
    quote: Quote = Quote(symbol="ACME", price=2.0, history=[1.0, 2.0])
    fills: list[dict[str, Any]] = [{"side": "buy", "size": 3}]
    at: dt.datetime = dt.datetime(2026, 12, 7, 9, 30, tzinfo=dt.UTC)
    notes: str = "calm"


DATA = [
    pytest.param("{{ state.quote.symbol }} {{ state.quote.price }}", "ACME 2.0", id="fields"),
    pytest.param("{{ state.quote.doubled }} {{ state.quote.label }}", "4.0 ACME@2.0", id="props"),
    pytest.param("{{ state.quote.model_dump()['symbol'] }}", "ACME", id="model-dump"),
    pytest.param(
        "{{ state.quote.history[-1] }} {{ state.quote.history.index(1.0) }}", "2.0 0", id="lists"
    ),
    pytest.param(
        "{% for f in state.fills %}{{ f.side }}{{ f['size'] }}{% endfor %}", "buy3", id="dicts"
    ),
    pytest.param("{{ state.fills[0].items()|list|length }}", "2", id="dict-methods"),
    pytest.param(
        "{{ state.notes.upper() }} {{ '{} {}'.format(state.notes, 1) }}",
        "CALM calm 1",
        id="strings",
    ),
    pytest.param("{{ state.at.year }} {{ state.at.strftime('%H:%M') }}", "2026 09:30", id="dates"),
    pytest.param(
        "{% for x in range(3) %}{{ loop.index }}{{ loop.cycle('a', 'b') }}{% endfor %}",
        "1a2b3a",
        id="loops",
    ),
    pytest.param(
        "{% set ns = namespace(n=0) %}{% for x in range(3) %}{% set ns.n = ns.n + x %}"
        "{% endfor %}{{ ns.n }}",
        "3",
        id="namespace",
    ),
    pytest.param(
        "{% macro tag(x) %}<{{ x }}>{% endmacro %}{{ tag(input.symbol) }}", "<ACME>", id="macros"
    ),
    pytest.param("{{ state.fills|map(attribute='side')|join(',') }}", "buy", id="map-attribute"),
    pytest.param(
        "{{ fill.side }}{{ fill.size }} {{ side.value }}", "buy3 buy", id="dataclass-enum"
    ),
    pytest.param("{{ state|attr('notes') }}", "calm", id="attr-of-data"),
]


@pytest.mark.parametrize(("prompt", "expected"), DATA)
async def test_templates_read_data_as_before(prompt: str, expected: str) -> None:
    graph = reactive(
        {"a": agent(prompt=prompt, updates="notes")},
        state=Book,
    )
    answers = ScriptedProvider({"a": ["done"]})
    result = await graph.run(
        input={"symbol": "ACME"}, scope={"fill": Fill("buy", 3), "side": Side.BUY}, provider=answers
    )
    assert result.status == "completed", result.error
    assert answers.requests[0].prompt == expected

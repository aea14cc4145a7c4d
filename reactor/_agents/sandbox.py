"""What a template may reach: plain data, attribute by attribute, and nothing else.

Prompts, system prompts and ``when`` expressions are data that may come over HTTP
from anyone holding a token, so they render against plain data only: ``input``,
``state``, ``signal``, ``object``, ``objects`` (:class:`ObjectsView`: ``get``,
``find`` and ``list``, each returning plain dicts) and the run's other ``scope``
values. Jinja's sandbox refuses only ``_``-prefixed attributes and a few known ones,
so a plain attribute of a live object could lead to a module and its functions
(``objects.store.db.engine.dialect.dbapi...os.popen``). Here it is the other way
round: an attribute, an item or a call is allowed only on data and only where it is
known to be data:

* a mapping's keys (and its ``get``, ``items``, ``keys``, ``values``); a list's items
  (and ``index``, ``count``); a string's text methods; a date's fields;
* a pydantic model's fields, extras and properties (and ``model_dump``,
  ``model_dump_json``); a dataclass's fields (a :class:`~reactor.Signal`'s); an enum
  member's ``name`` and ``value``;
* Jinja's own ``loop``, ``namespace()``, ``range()``, ``dict()`` and macros.

Everything else (a module, a function, a class, a frame, a store, an engine, an
object of any other type) is refused with :class:`Refused`, which the renderer
raises as :class:`~reactor.exceptions.TemplateSecurityError` naming the path; every
value an attribute, item or call yields is checked the same way, so no path leaves
the data. The compiled fast path (:mod:`reactor._agents.compiled`) reads through the
same functions. :func:`refused_path` finds what can be seen before rendering (an
``objects`` attribute other than ``get``/``find``/``list``, a ``_``-prefixed or known
escape attribute), so that a definition is refused when it is made.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import enum
import types
import uuid
from collections.abc import (
    Awaitable,
    Callable,
    ItemsView,
    KeysView,
    Mapping,
    ValuesView,
)
from typing import Any, TypeVar

import jinja2
import jinja2.nodes as nodes
import pydantic
from jinja2.runtime import LoopContext, Macro
from jinja2.sandbox import SandboxedEnvironment, SandboxedFormatter
from jinja2.utils import Namespace

from reactor._signals.frozen import FrozenDict, FrozenList
from reactor._signals.views import DictView, ListView, ModelView, unwrap

__all__ = [
    "OBJECTS_METHODS",
    "DataEnvironment",
    "ObjectsView",
    "Refused",
    "data_getattr",
    "data_getitem",
    "refused_path",
    "register_template_value",
    "template_values",
]

T = TypeVar("T")

OBJECTS_METHODS = ("get", "find", "list")
"""What a template may do with ``objects``."""


class Refused(jinja2.exceptions.SecurityError):
    """A template reached for something that is not data.

    Attributes:
        path: What it reached for (``objects.store``, ``str.mro``).
    """

    def __init__(self, path: str, why: str) -> None:
        super().__init__(f"{path}: {why}")
        self.path = path
        self.why = why


class ObjectsView:
    """``objects`` as templates see it: reads that return plain dicts and lists.

    The service makes one per run from its object store, as the agent sees it; a
    template awaits nothing itself (``{{ objects.get("q_1").data.price }}``, ``{% for q in
    objects.list("Quote") %}``): templates that name ``objects`` render asynchronously.

    Args:
        get: ``get(id)``: the object as a dict (``id``, ``type``, ``version``, ``data``, ...).
        find: ``find(type, **fields)``: the objects of ``type`` whose data has these values.
        list: ``list(type=None, limit=...)``: objects, newest first.
    """

    __slots__ = ("_find", "_get", "_list")

    def __init__(
        self,
        get: Callable[[str], Awaitable[Any]],
        find: Callable[..., Awaitable[Any]],
        list: Callable[..., Awaitable[Any]],
    ) -> None:
        self._get = get
        self._find = find
        self._list = list

    def get(self, id: str) -> Awaitable[Any]:
        """The object with this id, as a dict."""
        return self._get(id)

    def find(self, type: str, **fields: Any) -> Awaitable[Any]:
        """The objects of ``type`` whose data has the given field values, as dicts."""
        return self._find(type, **fields)

    def list(self, type: str | None = None, limit: int = 50) -> Awaitable[Any]:
        """Objects (of ``type``), newest first, at most ``limit``, as dicts."""
        return self._list(type, limit=limit)

    def __repr__(self) -> str:
        return "<objects: get, find, list>"


# -- what is data ------------------------------------------------------------------

_SCALARS: frozenset[type[Any]] = frozenset(
    {
        str,
        int,
        float,
        bool,
        type(None),
        bytes,
        decimal.Decimal,
        dt.datetime,
        dt.date,
        dt.time,
        dt.timedelta,
        uuid.UUID,
    }
)
_PLAIN: frozenset[type[Any]] = _SCALARS - {str}
"""Scalars a template reads nothing of (a string has its text methods)."""
_MAPPINGS: frozenset[type[Any]] = frozenset({dict, FrozenDict, DictView})
_SEQUENCES: frozenset[type[Any]] = frozenset({list, tuple, FrozenList, ListView, range})
_COLLECTIONS: frozenset[type[Any]] = frozenset(
    {
        set,
        frozenset,
        type({}.keys()),
        type({}.values()),
        type({}.items()),
        KeysView,
        ValuesView,
        ItemsView,
    }
)

_STR_METHODS = frozenset(
    [
        "capitalize",
        "casefold",
        "center",
        "count",
        "endswith",
        "find",
        "format",
        "format_map",
        "index",
        "isalnum",
        "isalpha",
        "isdecimal",
        "isdigit",
        "islower",
        "isnumeric",
        "isspace",
        "istitle",
        "isupper",
        "join",
        "ljust",
        "lower",
        "lstrip",
        "partition",
        "removeprefix",
        "removesuffix",
        "replace",
        "rfind",
        "rindex",
        "rjust",
        "rpartition",
        "rsplit",
        "rstrip",
        "split",
        "splitlines",
        "startswith",
        "strip",
        "swapcase",
        "title",
        "upper",
        "zfill",
    ]
)
_DATE_ATTRIBUTES = frozenset(
    [
        "year",
        "month",
        "day",
        "hour",
        "minute",
        "second",
        "microsecond",
        "isoformat",
        "strftime",
        "date",
        "time",
        "weekday",
        "isoweekday",
        "timestamp",
        "days",
        "seconds",
        "microseconds",
        "total_seconds",
    ]
)
_LOOP_ATTRIBUTES = frozenset(
    [
        "index",
        "index0",
        "revindex",
        "revindex0",
        "first",
        "last",
        "length",
        "depth",
        "depth0",
        "previtem",
        "nextitem",
        "changed",
        "cycle",
    ]
)
_MAPPING_METHODS = frozenset({"get", "items", "keys", "values"})
_SEQUENCE_METHODS = frozenset({"index", "count"})
_MODEL_METHODS = frozenset({"model_dump", "model_dump_json"})

_METHOD_TYPES = (types.MethodType, types.BuiltinMethodType, types.MethodWrapperType)


def _methods_of(owner: object) -> frozenset[str]:
    """The methods a template may call on ``owner``."""
    kind = type(owner)
    if isinstance(owner, str):
        return _STR_METHODS
    if kind in _MAPPINGS:
        return _MAPPING_METHODS
    if kind in _SEQUENCES:
        return _SEQUENCE_METHODS
    if kind in (dt.datetime, dt.date, dt.time, dt.timedelta):
        return _DATE_ATTRIBUTES
    if kind is ObjectsView:
        return frozenset(OBJECTS_METHODS)
    if isinstance(owner, LoopContext):
        return frozenset({"cycle", "changed"})
    if isinstance(owner, pydantic.BaseModel):
        return _MODEL_METHODS
    return frozenset()


def _allowed_method(value: Any) -> bool:
    """Whether ``value`` is a bound method a template may call (by owner and name)."""
    if not isinstance(value, _METHOD_TYPES):
        return False
    owner = getattr(value, "__self__", None)
    return owner is not None and value.__name__ in _methods_of(owner)


def is_data(value: Any) -> bool:
    """Whether a template may hold ``value``: plain data, or what reads it."""
    kind = type(value)
    if kind in _SCALARS or kind in _MAPPINGS or kind in _SEQUENCES or kind in _COLLECTIONS:
        return True
    if kind in (ModelView, ObjectsView, Namespace, Macro, _SafeFormat):
        return True
    if isinstance(value, pydantic.BaseModel | enum.Enum | jinja2.Undefined | LoopContext | str):
        return True
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return True
    return _allowed_method(value)


def _checked(value: T, owner: Any, attr: Any) -> T:
    """``value`` (read as ``owner.attr``) if it is data; else refused, naming the path."""
    if is_data(value):
        return value
    raise Refused(_path(owner, attr), f"it is {_described(value)}, not data")


def _path(owner: Any, attr: Any) -> str:
    return f"{_name_of(owner)}.{attr}" if isinstance(attr, str) else f"{_name_of(owner)}[{attr!r}]"


def _described(value: Any) -> str:
    if isinstance(value, type):
        return f"the class {value.__name__}"
    kind = type(value)
    if kind.__name__ == "module":
        return f"the module {getattr(value, '__name__', '?')}"
    if callable(value):
        return "a function"
    return f"a {kind.__name__} object"


# -- reading attributes and items -------------------------------------------------


def data_getattr(env: jinja2.Environment, obj: Any, attr: str) -> Any:
    """``obj.attr`` for a template: data's own fields and allowed methods, else refused."""
    if attr[:1] == "_":
        raise Refused(_path(obj, attr), "names starting with '_' are not data")
    kind = type(obj)
    if kind is ModelView:
        return _model_attribute(env, obj, object.__getattribute__(obj, "_target"), attr)
    if kind in _MAPPINGS:
        if attr in _MAPPING_METHODS:
            return getattr(obj, attr)
        try:
            return _checked(obj[attr], obj, attr)
        except KeyError:
            return env.undefined(obj=obj, name=attr)
    if kind in _PLAIN or kind in _SEQUENCES or isinstance(obj, str):
        return _method_or_undefined(env, obj, attr)
    if isinstance(obj, pydantic.BaseModel):
        return _model_attribute(env, obj, obj, attr)
    return _other_attribute(env, obj, attr)


def _other_attribute(env: jinja2.Environment, obj: Any, attr: str) -> Any:
    """``obj.attr`` of what is neither a mapping, a sequence, a scalar nor a model."""
    kind = type(obj)
    if kind is ObjectsView and attr in OBJECTS_METHODS:
        return getattr(obj, attr)
    if isinstance(obj, LoopContext) and attr in _LOOP_ATTRIBUTES:
        return _checked(getattr(obj, attr), obj, attr)
    if kind is ObjectsView or isinstance(obj, LoopContext):
        raise Refused(_path(obj, attr), _only(obj))
    if kind is Namespace:
        return _checked(getattr(obj, attr, env.undefined(obj=obj, name=attr)), obj, attr)
    if isinstance(obj, enum.Enum):
        return _enum_attribute(obj, attr)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return _dataclass_attribute(env, obj, attr)
    if isinstance(obj, jinja2.Undefined):
        return getattr(obj, attr)  # a strict undefined value raises, naming what is missing
    raise Refused(_path(obj, attr), f"it is {_described(obj)}, not data")


def data_getitem(env: jinja2.Environment, obj: Any, key: Any) -> Any:
    """``obj[key]`` for a template: items of data; a string key falls back to the attribute."""
    kind = type(obj)
    if kind in _MAPPINGS or kind in _SEQUENCES or isinstance(obj, str):
        try:
            return _checked(obj[key], obj, key)
        except (TypeError, LookupError):
            pass
    elif not is_data(obj):
        raise Refused(_path(obj, key), f"it is {_described(obj)}, not data")
    if isinstance(key, str):
        return data_getattr(env, obj, key)
    return env.undefined(obj=obj, name=key)


def _method_or_undefined(env: jinja2.Environment, obj: Any, attr: str) -> Any:
    if attr in _methods_of(obj):
        if isinstance(obj, str) and attr in ("format", "format_map"):
            return _SafeFormat(env, obj, mapping=attr == "format_map")
        return getattr(obj, attr)
    if hasattr(obj, attr):
        raise Refused(_path(obj, attr), _only(obj))
    return env.undefined(obj=obj, name=attr)


_READABLE: dict[type[Any], frozenset[str]] = {}
"""Per model class: the names a template reads (fields, computed fields, properties)."""


def _readable(kind: type[pydantic.BaseModel]) -> frozenset[str]:
    names = _READABLE.get(kind)
    if names is None:
        properties = {
            name
            for klass in kind.__mro__
            for name, value in vars(klass).items()
            if isinstance(value, property) and not name.startswith("_")
        }
        names = frozenset({*kind.model_fields, *kind.model_computed_fields, *properties})
        _READABLE[kind] = names
    return names


def _model_attribute(
    env: jinja2.Environment, obj: Any, model: pydantic.BaseModel, attr: str
) -> Any:
    """``obj.attr`` of a model (``obj``: the model, or a read-only view of it)."""
    kind = type(model)
    if attr in _readable(kind) or attr in (model.__pydantic_extra__ or ()):
        return _checked(getattr(obj, attr), model, attr)
    if attr in _MODEL_METHODS:
        return getattr(model, attr)
    if hasattr(kind, attr):
        raise Refused(_path(model, attr), "only a model's fields and properties are data")
    return env.undefined(obj=obj, name=attr)


def _dataclass_attribute(env: jinja2.Environment, obj: Any, attr: str) -> Any:
    if attr in {field.name for field in dataclasses.fields(obj)}:
        return _checked(getattr(obj, attr), obj, attr)
    if hasattr(obj, attr):
        raise Refused(_path(obj, attr), "only a dataclass's fields are data")
    return env.undefined(obj=obj, name=attr)


def _enum_attribute(obj: enum.Enum, attr: str) -> Any:
    if attr in ("name", "value"):
        return _checked(getattr(obj, attr), obj, attr)
    raise Refused(_path(obj, attr), "only an enum member's name and value are data")


def _name_of(obj: Any) -> str:
    if isinstance(obj, ObjectsView):
        return "objects"
    if isinstance(obj, LoopContext):
        return "loop"
    if isinstance(obj, type):
        return obj.__name__
    return type(unwrap(obj)).__name__


def _only(obj: Any) -> str:
    allowed = sorted(_LOOP_ATTRIBUTES if isinstance(obj, LoopContext) else _methods_of(obj))
    if not allowed:
        return "it has no attributes a template may read"
    return "a template may use only " + ", ".join(allowed)


class _SafeFormat:
    """``str.format`` through Jinja's sandboxed formatter (its fields read as data)."""

    __slots__ = ("_env", "_mapping", "_text")

    def __init__(self, env: jinja2.Environment, text: str, *, mapping: bool) -> None:
        self._env = env
        self._text = text
        self._mapping = mapping

    def __call__(self, *args: Any, **kwargs: Any) -> str:
        assert isinstance(self._env, SandboxedEnvironment)
        formatter = SandboxedFormatter(self._env)
        if self._mapping:
            if kwargs or len(args) != 1:
                raise TypeError("format_map() takes exactly one mapping")
            return str(formatter.vformat(self._text, (), args[0]))
        return str(formatter.vformat(self._text, args, kwargs))


# -- calls ------------------------------------------------------------------------


def _callable(env: jinja2.Environment, obj: Any) -> bool:
    if _allowed_method(obj) or type(obj) in (Macro, _SafeFormat):
        return True
    return any(obj is allowed for allowed in env.globals.values())


class DataEnvironment(SandboxedEnvironment):
    """Jinja's sandbox, reading only data: attributes, items and calls as listed above."""

    def getattr(self, obj: Any, attribute: str) -> Any:
        return data_getattr(self, obj, attribute)

    def getitem(self, obj: Any, argument: Any) -> Any:
        return data_getitem(self, obj, argument)

    def is_safe_attribute(self, obj: Any, attr: str, value: Any) -> bool:
        return not attr.startswith("_") and is_data(obj) and is_data(value)

    def is_safe_callable(self, obj: Any) -> bool:
        return _callable(self, obj)

    def call(
        __self, __context: Any, __obj: Any, *args: Any, **kwargs: Any
    ) -> Any:  # Jinja's own signature: its names cannot clash with the call's keywords
        if isinstance(__obj, jinja2.Undefined):
            return __obj(*args, **kwargs)  # a strict undefined value raises, naming it
        if not _callable(__self, __obj):
            raise Refused(_call_path(__obj), f"{_described(__obj)} may not be called")
        result = __context.call(__obj, *args, **kwargs)
        if type(getattr(__obj, "__self__", None)) is ObjectsView:
            return result  # an awaitable of plain data, awaited by the async renderer
        if is_data(result):
            return result
        raise Refused(_call_path(__obj) + "()", f"it returned {_described(result)}, not data")


def _call_path(obj: Any) -> str:
    owner = getattr(obj, "__self__", None)
    name = getattr(obj, "__name__", type(obj).__name__)
    return f"{_name_of(owner)}.{name}" if owner is not None else str(name)


# -- values of the scope ----------------------------------------------------------

_CONVERTERS: dict[type[Any], Callable[[Any], Any]] = {}


def register_template_value(kind: type[T], convert: Callable[[T], Any]) -> None:
    """Templates see a ``kind`` value of a run's scope as ``convert(value)`` (plain data).

    The service registers its stored objects and events (as dicts) and its object store
    views (as an :class:`ObjectsView`).
    """
    _CONVERTERS[kind] = convert


def template_values(scope: Mapping[str, Any]) -> dict[str, Any]:
    """A run's scope as templates see it: each value converted to data where it can be."""
    return {name: _template_value(value) for name, value in scope.items()}


def _template_value(value: Any) -> Any:
    if isinstance(value, list | tuple):  # a batch of events: each converted
        return [_template_value(item) for item in value]
    for kind in type(value).__mro__:
        convert = _CONVERTERS.get(kind)
        if convert is not None:
            return convert(value)
    return value


# -- what can be seen before rendering ----------------------------------------------

_ESCAPES = frozenset(
    [
        "mro",
        "func_globals",
        "func_code",
        "im_func",
        "im_self",
        "f_globals",
        "f_locals",
        "f_builtins",
        "f_back",
        "f_code",
        "gi_frame",
        "gi_code",
        "cr_frame",
        "cr_code",
        "ag_frame",
        "ag_code",
        "tb_frame",
        "tb_next",
        "co_code",
    ]
)
"""Attribute names no data has, that every known template escape goes through."""


def refused_path(tree: nodes.Template) -> Refused | None:
    """The first path of a parsed template that is refused before it renders, if any.

    ``objects`` other than ``get``/``find``/``list``, an attribute starting with ``_``
    or naming a known escape (``mro``, ``f_globals``, ``environ``, ...), also through
    the ``attr`` filter and ``format`` fields.
    """
    found = [
        refused
        for node in tree.find_all((nodes.Getattr, nodes.Filter, nodes.Const))
        if (refused := _refused_node(node)) is not None
    ]
    # A chain's shortest refused path is where it first leaves the data.
    return min(found, key=lambda refused: len(refused.path), default=None)


def _refused_node(node: nodes.Node) -> Refused | None:
    if isinstance(node, nodes.Getattr):
        target = node.node
        if (
            isinstance(target, nodes.Name)
            and target.name == "objects"
            and node.attr not in OBJECTS_METHODS
        ):
            return Refused(f"objects.{node.attr}", "objects has only get, find and list")
        return _refused_name(_spelled(node), node.attr)
    if isinstance(node, nodes.Filter) and node.name == "attr" and node.args:
        argument = node.args[0]
        if isinstance(argument, nodes.Const) and isinstance(argument.value, str):
            return _refused_name(f"attr({argument.value!r})", argument.value)
    if isinstance(node, nodes.Const) and isinstance(node.value, str) and "{" in node.value:
        for field, names in _format_fields(node.value):
            for name in names:
                found = _refused_name(f"{{{field}}}", name)
                if found is not None:
                    return found
    return None


def _refused_name(path: str, name: str) -> Refused | None:
    if name.startswith("_"):
        return Refused(path, "names starting with '_' are not data")
    if name in _ESCAPES:
        return Refused(path, "no data has this attribute")
    return None


def _format_fields(text: str) -> list[tuple[str, list[str]]]:
    """``str.format`` fields in ``text`` and their attribute parts (``{0.__class__}``)."""
    fields = []
    for piece in text.split("{")[1:]:
        field = piece.split("}", 1)[0].split("!", 1)[0].split(":", 1)[0]
        names = [part.rstrip("]") for part in field.replace("[", ".").split(".")[1:]]
        fields.append((field, [name for name in names if name]))
    return fields


def _spelled(node: nodes.Getattr) -> str:
    """``a.b.c`` as the template wrote it (``?`` for what is not a plain name)."""
    names = [node.attr]
    target: nodes.Node = node.node
    while isinstance(target, nodes.Getattr):
        names.append(target.attr)
        target = target.node
    names.append(target.name if isinstance(target, nodes.Name) else "?")
    return ".".join(reversed(names))

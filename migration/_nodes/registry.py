"""Node types: what a node of a given ``type`` does with its (bound) input.

A :class:`NodeRegistry` starts with the built-in types; ``register`` adds yours. A
type is a function ``fn(input)`` or ``fn(input, ctx)`` (sync or async) returning the
node's output; ``ctx`` is a :class:`NodeContext`.

Types come in *packs*, named groups a flow declares in ``nodePacks``: the built-in
``core`` and ``claude``, and any others. Installed packages add packs through entry
points in the group ``reactor.node_types``: the entry point's name is the pack's, its
object a :class:`NodeRegistry`, a mapping ``{type: function}``, or a function
returning either (called anew for each executor, so stateful types start fresh).
:meth:`NodeRegistry.discover` builds a registry with every installed pack; the
executors use it when given no registry.
"""

from __future__ import annotations

import importlib.metadata
import inspect
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from migration._expressions.errors import FlowSpecError, UnknownNodeTypeError
from migration._nodes.builtins import BUILTIN_PACKS
from migration._nodes.context import NodeContext, NodeFunction
from reactor._signals.diagnostics import log

__all__ = ["ENTRY_POINT_GROUP", "NodeRegistry", "RegistrySource", "registry_of"]

ENTRY_POINT_GROUP = "reactor.node_types"
"""The entry point group installed packages declare their node packs in."""

_BUILTIN_FUNCTIONS = {name: fn for types in BUILTIN_PACKS.values() for name, fn in types.items()}
_HOW = (
    "Register yours with registry.register(type, fn) and pass registry= (or reactor migrate "
    f"--registry MODULE:ATTR), or install a package that provides it (entry point group "
    f"{ENTRY_POINT_GROUP})."
)


class NodeRegistry:
    """Node types by name, in packs; a new registry already holds the built-in ones.

    Built-ins (pack ``core``): ``echo`` (``{text}`` -> ``{text}``), ``constant``
    (``{value}`` -> ``{value}``), ``condition.equals`` (``{left, right}`` ->
    ``{value}``, compared as JSON values), ``control.if`` (``{condition}`` ->
    ``{condition}``), ``control.switch`` (``{value, cases: [{when, route}]}`` ->
    ``{route, value}``, route ``"default"`` when no case matches), ``control.noop``
    (``{value}`` -> ``{value}``), ``control.fail`` (``{message}``: fails the node),
    ``control.wait`` (``{ms}`` -> ``{waitedMs}``, cancellable), ``control.foreach``
    (``{items, as, body, concurrency?}`` -> ``{iterations: [{item, outputs}]}``),
    ``system.state.get`` (``{key}`` -> ``{value}``) and ``system.state.set``
    (``{key, value}`` -> ``{ok}``). Pack ``claude``: the LLM node ``claude.agent``
    (alias ``anthropic.text``): input ``prompt``, optional ``system`` and
    ``options`` (``model``, ``outputSchema``); config ``schema`` (or
    ``outputSchema``), ``model``, ``options``; output ``{text, structuredOutput?,
    structured_output?, usage}``.

    ::

        registry = NodeRegistry()
        registry.register("http.get", fetch)              # fetch(input) or fetch(input, ctx)
    """

    def __init__(self) -> None:
        self._types: dict[str, tuple[NodeFunction, bool]] = {}
        self._packs: dict[str, set[str]] = {}
        for pack, types in BUILTIN_PACKS.items():
            for name, fn in types.items():
                self.register(name, fn, pack=pack)

    def register(
        self, type: str, fn: NodeFunction, *, replace: bool = False, pack: str | None = None
    ) -> NodeFunction:
        """Add node type ``type``, run by ``fn(input)`` or ``fn(input, ctx)``; return ``fn``.

        Args:
            type: The type's name, as nodes give it.
            fn: The function that runs it.
            replace: Replace a type registered already.
            pack: The pack it belongs to (default: the name's first part,
                ``"tutorial"`` for ``"tutorial.flaky"``).

        Raises:
            TypeError: ``fn`` is not callable.
            ValueError: ``type`` is registered already and ``replace`` is false.
        """
        if not callable(fn):
            raise TypeError(f"Node type {type!r} needs a function fn(input[, ctx]), got {fn!r}.")
        if type in self._types and not replace:
            raise ValueError(
                f"Node type {type!r} is registered already; pass replace=True to override it."
            )
        self._types[type] = (fn, _takes_context(fn))
        name = pack if pack is not None else type.partition(".")[0] if "." in type else None
        if name is not None:
            self._packs.setdefault(name, set()).add(type)
        return fn

    def add_pack(self, name: str, types: Mapping[str, NodeFunction] | NodeRegistry) -> None:
        """Register ``types`` (a mapping, or another registry's own types) as pack ``name``.

        Raises:
            ValueError: A type is registered already.
        """
        if isinstance(types, NodeRegistry):
            types = {
                t: types.function(t)
                for t in types
                if types.function(t) is not _BUILTIN_FUNCTIONS.get(t)
            }
        for type, fn in types.items():
            self.register(type, fn, pack=name)
        self._packs.setdefault(name, set())

    @property
    def packs(self) -> tuple[str, ...]:
        """The packs this registry has, sorted."""
        return tuple(sorted(self._packs))

    def __contains__(self, type: object) -> bool:
        return type in self._types

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._types))

    def __len__(self) -> int:
        return len(self._types)

    def function(self, type: str) -> NodeFunction:
        """The function registered for ``type``.

        Raises:
            UnknownNodeTypeError: No such type.
        """
        if type not in self._types:
            self.require({"?": type})
        return self._types[type][0]

    def require(self, types: Mapping[str, str]) -> None:
        """Check that every ``{node_id: type}`` is registered.

        Raises:
            UnknownNodeTypeError: Naming every unknown type, its nodes, the known
                types, and how to add one.
        """
        unknown: dict[str, list[str]] = {}
        for node, type in types.items():
            if type not in self._types:
                unknown.setdefault(type, []).append(node)
        if unknown:
            first, nodes = next(iter(unknown.items()))
            listed = "; ".join(
                f"{t!r} (node{'s' if len(n) > 1 else ''} {', '.join(map(repr, n))})"
                for t, n in unknown.items()
            )
            raise UnknownNodeTypeError(
                f"Unknown node type{'s' if len(unknown) > 1 else ''}: {listed}. Known types: "
                f"{', '.join(self)}. {_HOW}",
                type=first,
                node=nodes[0],
                known=list(self),
            )

    def require_packs(self, packs: Iterable[str], *, flow: str | None = None) -> None:
        """Check that every pack a flow declares (``nodePacks``) is available.

        Raises:
            FlowSpecError: Naming the missing packs and the available ones.
        """
        missing = [pack for pack in dict.fromkeys(packs) if pack not in self._packs]
        if missing:
            raise FlowSpecError(
                f"Node pack{'s' if len(missing) > 1 else ''} {', '.join(map(repr, missing))} "
                f"{'are' if len(missing) > 1 else 'is'} not available (available: "
                f"{', '.join(self.packs)}). Install a package that provides "
                f"{'them' if len(missing) > 1 else 'it'} (entry point group {ENTRY_POINT_GROUP}), "
                "or pass a registry that has its types (--registry MODULE:ATTR).",
                flow=flow,
            )

    async def call(self, type: str, input: Any, ctx: NodeContext) -> Any:
        """Run node type ``type`` on ``input``; await it if it is async."""
        if type not in self._types:
            self.require({ctx.node: type})
        fn, takes_context = self._types[type]
        result = fn(input, ctx) if takes_context else fn(input)
        if inspect.isawaitable(result):
            result = await result
        return result

    def copy(self) -> NodeRegistry:
        """A new registry with the same types and packs."""
        clone = NodeRegistry()
        clone._types = dict(self._types)
        clone._packs = {name: set(types) for name, types in self._packs.items()}
        return clone

    @classmethod
    def discover(cls) -> NodeRegistry:
        """The built-in types plus every pack installed through entry points.

        A pack that fails to load, or gives something else than a registry, a
        mapping of types or a function returning one, is left out with a warning.
        """
        registry = cls()
        for entry in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
            try:
                found: Any = entry.load()
                if callable(found) and not isinstance(found, NodeRegistry | Mapping):
                    found = found()
                if not isinstance(found, NodeRegistry | Mapping):
                    raise TypeError(
                        f"it gives {type(found).__name__}, not a NodeRegistry, a mapping "
                        "{type: function}, or a function returning one"
                    )
                registry.add_pack(entry.name, found)
            except Exception as exc:  # a broken plugin must not break every flow
                log(
                    "migration",
                    "warning",
                    "node pack left out",
                    pack=entry.name,
                    entry_point=entry.value,
                    error=f"{type(exc).__name__}: {exc}",
                )
        return registry

    def __repr__(self) -> str:
        return f"<NodeRegistry {len(self)} types, packs {', '.join(self.packs)}>"


RegistrySource = NodeRegistry | Callable[[], NodeRegistry]
"""A registry, or a function building one (called once per executor)."""


def registry_of(source: RegistrySource | None) -> NodeRegistry:
    """The registry an executor uses: ``source``, what it builds, or :meth:`NodeRegistry.discover`.

    Raises:
        TypeError: ``source`` is, or builds, something else than a ``NodeRegistry``.
    """
    if source is None:
        return NodeRegistry.discover()
    if isinstance(source, NodeRegistry):
        return source
    built = source() if callable(source) else source
    if not isinstance(built, NodeRegistry):
        raise TypeError(
            f"registry= takes a NodeRegistry or a function returning one; got {built!r}."
        )
    return built


def _takes_context(fn: NodeFunction) -> bool:
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):  # builtins without a signature take the input only
        return False
    positional = [
        p
        for p in parameters
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)
    ]
    return len(positional) >= 2 or any(p.kind is p.VAR_POSITIONAL for p in positional)

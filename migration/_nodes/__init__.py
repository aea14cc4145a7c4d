"""Nodes: what a node type is given, which types there are, and settling one node.

``context`` (:class:`NodeContext`, :data:`NodeFunction`, and ``each_item``, the
per-item loop), ``registry`` (:class:`NodeRegistry`: node types in packs, entry point
group ``reactor.node_types``), ``builtins`` (the ``core`` and ``claude`` packs),
``llm`` (one model call from inside a node), ``agents`` (nodes that are reactor
agents), ``node`` (settling one node: ``when``, policy, markers, which edges fire),
``each`` (settling a ``forEach`` edge's per-item part). Both executors use them the
same way.

May use: ``_spec``, ``_expressions``, reactor's public API, :mod:`reactor.typing` and
the diagnostics log of ``reactor._signals`` (and Jinja2, pydantic).
"""

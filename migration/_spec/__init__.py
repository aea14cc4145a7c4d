"""FlowSpec: the edge-based flow format, its pieces, reading it and checking it.

``spec`` (:class:`FlowSpec`: loaded and checked, every problem reported at once),
``models`` (policies, nodes and edges as frozen pydantic models), ``load`` (a path,
YAML text, a mapping or a Python definition, to FlowSpec fields), ``limits`` (reading
files that may be hostile: bounded size, depth and alias expansion), ``scopes`` (the
top level and the ``control.foreach`` bodies), ``topology`` (the flow's shape: checks,
topological order, joins and loop bodies).

May use: ``_expressions``, :class:`reactor.Agent` (Python definitions) and the
diagnostics log of ``reactor._signals`` (and pydantic, PyYAML).
"""

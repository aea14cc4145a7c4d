"""The edge-based executor: the oracle the reactive graphs are checked against.

``edge`` (:func:`run_edge_harness`: a flow's top level settled one node at a time),
``scheduler`` (the old kernel's scheduler of one scope: the top level here, and a
``control.foreach`` body in both executors).

May use: ``_nodes``, ``_spec``, ``_expressions`` and :mod:`reactor.typing`.
"""

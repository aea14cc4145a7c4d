"""Conversion: an edge-based flow as a reactive graph, as Python, and checked both ways.

``convert`` (:func:`harness_to_reactive`: the flow as a reactive graph), ``codegen``
(:func:`to_python`: that graph as Python to paste and edit; ``literal`` writes its
values), ``check`` (:func:`check`:
run a flow both ways and compare the node outputs; :func:`scripted_provider`), ``cli``
(``reactor migrate``, which the ``reactor`` command hands over to).

May use: every room below it (``_reactive``, ``_edge``, ``_nodes``, ``_spec``,
``_expressions``), reactor's public API, :mod:`reactor.typing`, :mod:`reactor.logging`
and the diagnostics log of ``reactor._signals``.
"""

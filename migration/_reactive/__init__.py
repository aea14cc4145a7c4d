"""The migrated flow as a reactive graph: its edges as activations, guards and state.

``flow`` (:class:`Flow`: one agent per top-level node, its join guard and its step),
``phase`` (the ``flow`` agent, whose activation is the ``Run Flow`` phase), ``ledger``
(``state["flow"]``: which nodes resolved and which edges fired, as the guards read it).

May use: ``_edge`` (its scheduler runs ``control.foreach`` bodies, as in the oracle),
the rooms below it, reactor's public API, :mod:`reactor.typing` and the signal names
of ``reactor._signals``.
"""

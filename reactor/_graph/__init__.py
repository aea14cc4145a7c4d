"""The graph: what users build and start, and how they talk to a live run.

``reactive`` (:func:`reactive`, :class:`Reactive`, :func:`run_reactive`), ``handle``
(:class:`RunHandle` and channels), ``console`` (:class:`ConsoleChannel`), ``validate``
(build-time checks, every problem at once with a hint), ``shape`` (the graph as
data: Mermaid, Graphviz, JSON), ``origin`` (the ``module:attribute`` a recorded run
can be imported from again), ``compat`` (may this graph resume that run?),
``forking`` (a fork's copied log), ``reads`` (what a run reads of its store before it
begins, off the event loop), ``evaluate``, ``recorded`` and ``report`` (recorded runs as
a regression suite: the cases, the recordings checked first, the report).

May use: ``_engine`` and everything below it. Used by the CLI, :mod:`reactor.service`
and :mod:`migration`.
"""

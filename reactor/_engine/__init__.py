"""The runtime: one run from ``harness:start`` to ``harness:end``.

``run`` (:class:`Run`: lifecycle, stops, the services activations use), ``scheduler``
(triggers, guards, concurrency modes, limits, the run's tasks), ``routes`` (which
agents a signal triggers, once per graph), ``outside`` (a run's durable inbox and a
replay's recorded outside input), ``subruns`` (MCP servers and child runs, made only
when asked), ``runspec`` (what a run is made of, seen from outside), ``options`` (the
run options), ``result`` (:class:`RunResult`, :class:`RunMetrics`), ``collector``
(the runs in flight in the process; rarer full collections while busy), ``costs``
(requests, tokens, cost and budgets), ``opening`` (how a log begins: new, resumed,
forked), ``snapshots`` (``harness:snapshot`` every ``snapshot_every`` signals),
``pacing`` (a recorded run's activations wait for their store between steps:
backpressure on the run, never on the loop).

May use: ``_activation`` and everything below it. The public :mod:`reactor.typing`
sits beside it.
"""

"""The service and the runs it hosts: where runs are recorded, started, followed, resumed.

``service`` (:class:`ReactionService`), ``hosting`` (the runs half of a service:
signal store, queue or process, start, stop, resume), ``launch`` (every run the
service starts goes through here: graphs by name, agents, reactions, resumed runs),
``controls`` (the service's hands on each run it executes: aborts with their actors,
suspensions), ``live`` (the feeds of the runs executing in this process), ``record``
(the store the service's runs record to, less what fenced-off runs say), ``upkeep``
(heartbeats, stuck and cut-off reactions), ``retention`` (``REACTOR_RETENTION``),
``telemetry`` (``REACTOR_OTEL=1``: OpenTelemetry traces of every run).

May use: ``_reactions``, ``_objects`` and ``_scaleout`` (its sibling: the queue and
leases a service uses when it scales out).
"""

"""The service and the runs it hosts: where runs are recorded, started, followed, resumed.

``service`` (:class:`ReactionService`), ``hosting`` (the runs half of a service:
signal store, queue or process, start, stop, resume), ``launch`` (every run the
service starts goes through here: graphs by name, agents, resumed runs), ``live``
(the runs executing in this process and their feeds), ``telemetry``
(``REACTOR_OTEL=1``: OpenTelemetry traces of every run).

May use: ``_reactions``, ``_objects`` and ``_scaleout`` (its sibling: the queue and
leases a service uses when it scales out).
"""

"""Objects in the database: typed objects, their events, the processing log, suggestions.

``db`` (one database: URL, async engine, transactions, migrations), ``schema`` (the
tables, as SQLAlchemy Core), ``rows`` (rows as values), ``values`` (actors, stored
objects, events), ``changes`` (what agents propose: :class:`Changes` and its
operations; processing entries and suggestions), ``models`` (the registered types and
data checked against them), ``objects`` (:class:`ObjectStore`), ``processing`` (the
processing log), ``history`` (its history: people's decisions), ``suggestions`` (the
``suggestions`` table), ``batch`` (many small concurrent writes as one transaction),
``writes`` (object writes committed in groups), ``owners`` (processes' heartbeats, what
the dead left), ``blocks`` (runs not resumed by themselves), ``replies`` (the first
reply to a prompt wins).

May use: the engine's lower rooms (``_signals``, ``_agents`` for reaction settings)
and :mod:`reactor.exceptions`. Nothing else of the service.
"""

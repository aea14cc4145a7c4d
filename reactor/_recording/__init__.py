"""Recording: signal logs, recordings, signal stores and their protocols.

``log`` (the :class:`SignalLog` views shared by results and recordings), ``diff``
(where two logs part), ``info`` (run metadata), ``recording`` (:class:`Recording`),
``store`` (the :class:`SignalStore` and :class:`Reporter` protocols and a base class),
``memory``, ``sqlite`` and ``postgres`` (the stores reactor ships; ``sqlite_db``,
``postgres_db`` and ``postgres_writer`` hold their schemas and writers), ``inbox``
(messages posted to a run), ``eventtree`` (a log as nodes: activations, prompts,
tools, steps).

May use: ``_signals`` and :mod:`reactor.exceptions` (and the database drivers).
"""

"""The signal stores reactor ships: in memory, SQLite and PostgreSQL.

``memory`` (:class:`MemorySignalStore`); the SQL stores, one class over a dialect:
``sql`` (:class:`SqlSignalStore`: every behaviour) with ``sql_read`` (its reads) and
``sql_writer`` (its writer thread), ``dialect`` (what differs between databases: SQL
text, connections, errors, migrations); ``sqlite`` (:class:`SQLiteSignalStore` and its
dialect) with ``sqlite_db`` (its schema and migrations), ``postgres``
(:class:`PostgresSignalStore` and its dialect) with ``postgres_db``; shared by both:
``tally`` (what a batch of signals adds to each run's row: counters, status, pending
prompts and timers, the latest state), ``paging`` (one page of a log in SQL) and
``chained`` (the runs' hash chains: a snapshot's link checked, runs verified). Each store
implements the whole contract of ``_recording.store``.

May use: ``_recording``, ``_signals`` and :mod:`reactor.exceptions` (and the database
drivers).
"""

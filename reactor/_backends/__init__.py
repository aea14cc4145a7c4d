"""The signal stores reactor ships: in memory, SQLite and PostgreSQL.

``memory`` (:class:`MemorySignalStore`), ``sqlite`` (:class:`SQLiteSignalStore`) with
``sqlite_db`` (its schema and migrations), ``sqlite_read`` (its readers) and
``sqlite_writer`` (its writer thread), ``postgres`` (:class:`PostgresSignalStore`) with
``postgres_db``, ``postgres_read`` and ``postgres_writer``; shared by both: ``tally``
(what a batch of signals adds to each run's row: counters, status, pending prompts
and timers, the latest state), ``paging`` (one page of a log in SQL) and ``chained``
(the runs' hash chains: a snapshot's link checked, runs verified). Each store
implements the whole contract of ``_recording.store``.

May use: ``_recording``, ``_signals`` and :mod:`reactor.exceptions` (and the database
drivers).
"""

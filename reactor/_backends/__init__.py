"""The signal stores reactor ships: in memory, SQLite and PostgreSQL.

``memory`` (:class:`MemorySignalStore`), ``sqlite`` (:class:`SQLiteSignalStore`) with
``sqlite_db`` (its schema and migrations) and ``sqlite_writer`` (its writer thread),
``postgres`` (:class:`PostgresSignalStore`) with ``postgres_db`` and
``postgres_writer``, and ``tally`` (what a batch of signals adds to each run's row:
counters, status, pending prompts and timers, the latest state), shared by both
writers. Each implements the whole contract of ``_recording.store``.

May use: ``_recording``, ``_signals`` and :mod:`reactor.exceptions` (and the database
drivers).
"""

"""Signals: the bottom layer, which every other room uses and which uses none of them.

``names`` (every signal name and payload shape: constants, builders, TypedDicts),
``signal`` (the immutable :class:`Signal`), ``patterns`` (glob patterns over names),
``bus`` (the :class:`SignalBus` on blinker: FIFO dispatch, causality), ``stream``
(signals as async iterators), ``payloads`` (the payload of each signal, as types),
``frozen`` (the read-only containers payloads and snapshots are made of),
``diagnostics`` (the library's own log lines), ``door`` (the check every value
entering a run or a store passes: :class:`~reactor.PayloadError` for what the log
cannot hold), ``offloop`` (calls from a handler's worker thread, run on the run's
loop), ``views`` (read-only views over committed state), ``settings`` (the
vocabulary of the environment: every ``REACTOR_*`` variable, read once),
``sharedkeys`` (payload dicts of one shape sharing one table of keys),
``redisclient`` (the Redis client that never loses a cancellation).

May use: the standard library, blinker, pydantic, pydantic-settings, structlog and
:mod:`reactor.exceptions`; ``redisclient`` uses redis, and is imported only where Redis
is configured. Nothing above it.
"""

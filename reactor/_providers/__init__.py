"""Providers: their base class, its request and event types, and the providers reactor ships.

``base`` (the :class:`Provider` base class, requests, events), ``tools`` and ``toolrun``
(Python tools and the tool-use loop's execution), ``scripted`` (offline answers),
``anthropic`` and ``anthropic_wire`` (Claude, and the Messages API on the wire),
``replay`` and ``sequence`` (answers from a recording, in their recorded order),
``pricing``, ``limits`` (requests at once and per minute, retries), ``hooks`` (code
that sees every tool call), ``mcp`` (MCP servers' tools).
Modules are imported where they are used: the anthropic SDK is slow to import.

May use: its siblings in this layer (``_agents`` for templates, ``_recording`` for
replay), ``_signals`` and :mod:`reactor.exceptions`.
"""

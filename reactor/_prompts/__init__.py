"""Prompts and model calls: one question to a model, in a run or on its own.

``prompt`` (:class:`Prompt`, an immutable question, and the settings a call may
override), ``modelcall`` (:class:`ModelCall`: render, stream a provider's events as
signals, validate, ask again), ``signalled`` (one call as signals, each event checked
at the door), ``prompting`` (``agent.prompt()``: precedence, hooks,
MCP, reflection), ``session`` (an activation with hooks, MCP tools or reflection),
``trace`` (:func:`reactor.trace`: a bus for prompts made outside any run).

May use: its siblings in this layer (``_agents``, ``_providers``, ``_recording``,
``_reporting``), :mod:`stores` and ``_signals``.
"""

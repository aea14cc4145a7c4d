"""Agents: what an agent is, and what its code sees while it runs.

``agent`` (:func:`agent`, the :class:`Agent` definition, compiled once), ``check``
(its definition checked, every problem at once), ``templates`` and ``compiled`` (Jinja2
prompts and guards, sandboxed and compiled to closures), ``output`` (an ``output=``
type: what the model is asked for, how answers are checked), ``context``
(:class:`AgentContext`, :class:`RunView`), ``asking`` (questions to people), ``spans``
(phases and tasks), ``reaction`` (what a reaction agent reacts to and may change),
``skills`` (``SKILL.md`` into the system prompt), ``env`` (:func:`reactor.getenv`'s
overlay), ``budget`` (what a run or an agent may spend), ``admission``
(admission policies, and what they do with waiting triggers), ``schedule`` (cron
expressions), ``fingerprint`` (a hash of each part of an agent that decides what it
does).

May use: its siblings in this layer (``_prompts``, ``_providers``, ``_recording``,
``_reporting``, :mod:`reactor.logging`), :mod:`stores` and ``_signals``. Never the
activation, the engine, the graph or anything above them.
"""

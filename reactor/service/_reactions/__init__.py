"""Reaction agents: the service's agents, and object events made into reactions.

``registry`` (code-defined agents as rows, and the reaction agents the service runs),
``definitions`` (agents as rows, checked like code), ``catalog`` (code and rows kept in
step), ``cron`` (cron agents on APScheduler), ``dispatcher`` (from stored events to
finished reactions), ``reaction`` (one event processed by one agent as a recorded run),
``view`` (``ctx.objects``: the store as one agent, within its capabilities),
``resolve`` (approving and rejecting suggestions), ``evaluated`` (a recorded reaction
as an evaluation case: the object it saw, its changes held).

May use: ``_objects`` and the engine's public graph API. Never the hosting, the
scale-out, the API or the web UI.
"""

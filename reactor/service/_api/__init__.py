"""The HTTP API: FastAPI routers over the service, and ``reactor serve``.

``app`` (:func:`create_app`), ``guard`` (hosts, origins and bodies, before any route,
and a log line per request it answers), ``base`` (what every route shares: the caller
and the role it needs, the service, JSON errors), ``agents``, ``objects``, ``runs``,
``paging``, ``resumes``, ``stream`` and ``audit`` (the routers: ``/api/agents``,
``/api/objects`` and decisions, ``/api/runs``, a run read in pages, resume and fork,
Server-Sent Events and the WebSocket channel, the audit trail's hash chains checked),
``reads`` (what is read of a run: its row and pages, never a whole log), ``follow``
(following a run, bounded), ``serve`` (the app on uvicorn, stopped gracefully).

May use: everything of the service below it; the web UI is its sibling.
"""

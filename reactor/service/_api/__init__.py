"""The HTTP API: FastAPI routers over the service, and ``reactor serve``.

``app`` (:func:`create_app`), ``access`` (bearer tokens), ``base`` (what every route
shares: the caller, the service, JSON errors), ``agents``, ``objects``, ``runs`` and
``stream`` (the routers: ``/api/agents``, ``/api/objects`` and decisions,
``/api/runs``, Server-Sent Events and the WebSocket channel), ``serve`` (the app on
uvicorn, stopped gracefully).

May use: everything of the service below it; the web UI is its sibling.
"""

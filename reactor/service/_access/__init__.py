"""Who calls the service, and what they may do: authenticators and the roles of routes.

``authenticators`` (the :class:`Authenticator` protocol, a service without tokens'
local principal, and the one the settings configure), ``tokens`` (:class:`TokenAuth`:
the token list and file, each line a user and their roles), ``jwts``
(:class:`JWTAuth`: bearer JWTs checked against a JWKS URL or a PEM key), ``roles``
(the role each route declares, and refusing a principal that lacks it, in one
sentence and one log line).

May use: ``_objects`` (the :class:`~reactor.service.Principal` and its roles), the
settings and the log; the reactions, the runs and the HTTP API use it.
"""

"""The role each route needs, and refusing a principal that lacks it.

Every route of the HTTP API and the web UI declares the role it needs with one
dependency, a :class:`RoleGate` (``viewer`` reads and follows; ``operator`` writes
objects and drives runs; ``approver`` decides on suggestions; ``admin`` changes agents
and schedules, retries, prunes), or declares itself public (the sign-in form, the health
check); a test walks the app's routes and fails for one that declares nothing. A
principal without the role is refused with one sentence naming the role needed
(``403``, or :class:`~reactor.exceptions.PermissionDeniedError` in Python) and one log
line ``permission denied`` with the principal, what it asked for and the role.
"""

from __future__ import annotations

from reactor._signals.diagnostics import log
from reactor.exceptions import PermissionDeniedError
from reactor.service._objects.values import ROLES, Principal, Role

__all__ = ["RoleGate", "denied", "refusal", "require"]


class RoleGate:
    """A route's declaration of the role it needs (``None``: public, no principal needed).

    Subclasses are the dependencies that enforce it: the API's (a bearer principal,
    ``403`` JSON) and the web UI's (a signed-in session, a ``403`` page).

    Raises:
        ValueError: ``role`` is not a role.
    """

    def __init__(self, role: Role | None) -> None:
        if role is not None and role not in ROLES:
            raise ValueError(f"{role!r} is not a role; use one of {', '.join(ROLES)}.")
        self.role: Role | None = role

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.role or 'public'}>"


def refusal(principal: Principal, role: str, what: str) -> str:
    """The sentence a refused principal reads: what it asked, the role it needs, its own."""
    held = ", ".join(sorted(principal.roles)) or "no role"
    return (
        f"{what} needs the {role} role, and {principal} holds {held}; ask an admin of "
        f"the service for the {role} role, or use a token that has it."
    )


def denied(
    principal: Principal, role: str, what: str, message: str | None = None
) -> PermissionDeniedError:
    """Log a refusal (``permission denied``) and return its error, to raise.

    ``message``: the sentence, when :func:`refusal`'s is not the right one.
    """
    log(
        "reactor.service",
        "warning",
        "permission denied",
        principal=principal.id,
        roles=sorted(principal.roles),
        authenticator=principal.authenticator,
        route=what,
        role_needed=role,
    )
    sentence = message if message is not None else refusal(principal, role, what)
    return PermissionDeniedError(sentence, principal=principal.id, role=role)


def require(principal: Principal | None, role: Role, what: str) -> None:
    """Raise :class:`PermissionDeniedError` unless ``principal`` holds ``role``.

    ``None`` (the application's own code, acting without a principal) is not checked.
    """
    if principal is not None and not principal.may(role):
        raise denied(principal, role, what)

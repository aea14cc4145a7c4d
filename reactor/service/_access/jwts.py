"""``JWTAuth``: bearer JWTs, verified with PyJWT against a JWKS URL or a PEM public key.

``REACTOR_AUTH=jwt`` makes ``reactor serve`` authenticate with it: the signing keys are
fetched from ``REACTOR_JWT_JWKS_URL`` (off the event loop, cached, fetched again for a
key id it has not seen, at most every 30 s) or read from ``REACTOR_JWT_PUBLIC_KEY`` (PEM
text or a PEM file's path). A token must be signed by one of those keys with an
algorithm of the key's own kind (RSA: ``RS*``/``PS*``, EC: ``ES*``, Ed25519: ``EdDSA``;
never ``none``, never an HMAC algorithm, whose "key" a public key would be), carry
``exp`` and ``sub`` (the user), and name ``REACTOR_JWT_AUDIENCE`` and
``REACTOR_JWT_ISSUER`` when they are set. The principal's roles are the known roles
(``viewer``, ``operator``, ``approver``, ``admin``) listed by the claim
``REACTOR_JWT_ROLES_CLAIM`` (default ``roles``; a dotted path reaches into an object,
``realm_access.roles``; a list, or one string of names separated by spaces or
commas); a token naming none of them may read, as every principal may.

A refused token is a ``401`` saying why in reactor's words (expired, another audience
or issuer, a signature that does not verify...), never PyJWT's.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, rsa
from cryptography.hazmat.primitives.serialization import load_pem_public_key

from reactor._signals.settings import Settings
from reactor.exceptions import ServiceConfigError, ServiceStateError
from reactor.service._access.authenticators import BearerAuth, NotAuthenticated
from reactor.service._objects.values import NAME_LENGTH, ROLES, Principal

__all__ = ["LEEWAY", "JWTAuth"]

LEEWAY = 10
"""Seconds of clock difference allowed when ``exp``, ``nbf`` and ``iat`` are checked."""

_RSA = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512")
_EC = ("ES256", "ES384", "ES512")
_EDDSA = ("EdDSA",)
_SPLIT = re.compile(r"[\s,]+")


def _algorithms(key: Any) -> tuple[str, ...]:
    """The algorithms a public key may verify (none for a key of another kind)."""
    if isinstance(key, rsa.RSAPublicKey):
        return _RSA
    if isinstance(key, ec.EllipticCurvePublicKey):
        return _EC
    if isinstance(key, ed25519.Ed25519PublicKey | ed448.Ed448PublicKey):
        return _EDDSA
    return ()


def _public_key(given: str) -> Any:
    """The public key of PEM text, or of the PEM file ``given`` names.

    Raises:
        ServiceConfigError: It cannot be read, is not a PEM public key, or is of a kind
            JWTs are not verified with here.
    """
    text = given
    if "-----BEGIN" not in given:
        try:
            text = Path(given).read_text()
        except OSError as exc:
            raise ServiceConfigError(
                f"REACTOR_JWT_PUBLIC_KEY names the file {given!r}, which cannot be read "
                f"({exc.strerror or exc}); give PEM text or the path of a PEM file."
            ) from None
    try:
        key = load_pem_public_key(text.encode())
    except ValueError:
        raise ServiceConfigError(
            "REACTOR_JWT_PUBLIC_KEY is not a PEM public key; give the text that begins "
            "with -----BEGIN PUBLIC KEY----- (or the path of a file holding it)."
        ) from None
    if not _algorithms(key):
        raise ServiceConfigError(
            "REACTOR_JWT_PUBLIC_KEY is neither an RSA, an EC nor an Ed25519 public key; "
            "JWTs are verified with one of those."
        )
    return key


def _claim(claims: Mapping[str, Any], path: str) -> Any:
    value: Any = claims
    for part in path.split("."):
        if not isinstance(value, Mapping):
            return None
        value = value.get(part)
    return value


def _roles(value: Any) -> frozenset[str]:
    """The known roles a claim lists (others are the identity provider's own: left out)."""
    if isinstance(value, str):
        names: Iterable[Any] = _SPLIT.split(value)
    elif isinstance(value, list | tuple):
        names = value
    else:
        return frozenset()
    return frozenset(name for name in names if isinstance(name, str) and name in ROLES)


_REFUSALS: tuple[tuple[type[Exception], str], ...] = (
    (jwt.ExpiredSignatureError, "The token has expired; get a new one and send it again."),
    (
        jwt.InvalidAudienceError,
        "The token is meant for another audience than this service (REACTOR_JWT_AUDIENCE); "
        "ask for a token for this service.",
    ),
    (
        jwt.InvalidIssuerError,
        "The token was issued by another issuer than the one this service trusts "
        "(REACTOR_JWT_ISSUER).",
    ),
    (
        jwt.ImmatureSignatureError,
        "The token is not valid yet (its nbf or iat lies in the future); check the clocks.",
    ),
    (
        jwt.MissingRequiredClaimError,
        "The token lacks a required claim: it must carry exp and sub (and aud and iss when "
        "the service names them).",
    ),
    (
        jwt.InvalidAlgorithmError,
        "The token is signed with an algorithm this service does not accept for its keys.",
    ),
    (
        jwt.InvalidSignatureError,
        "The token's signature does not verify against the keys this service trusts.",
    ),
)


def _refusal(exc: Exception) -> NotAuthenticated:
    for kind, detail in _REFUSALS:
        if isinstance(exc, kind):
            return NotAuthenticated(detail)
    return NotAuthenticated("The token is not a valid JWT; send the token your sign-in gave.")


class JWTAuth(BearerAuth):
    """Bearer JWTs, verified against a JWKS URL or a PEM public key (see the module).

    Args:
        jwks_url: Where the signing keys are published (a JWKS document).
        public_key: Or the one public key: PEM text, or the path of a PEM file.
        audience: The ``aud`` tokens must name (not checked when ``None``).
        issuer: The ``iss`` tokens must name (not checked when ``None``).
        roles_claim: The claim that lists the roles (a dotted path reaches into objects).

    Raises:
        ServiceConfigError: Neither or both of ``jwks_url`` and ``public_key``, or a key
            that cannot be used.
    """

    name = "jwt"

    def __init__(
        self,
        *,
        jwks_url: str | None = None,
        public_key: str | None = None,
        audience: str | None = None,
        issuer: str | None = None,
        roles_claim: str = "roles",
    ) -> None:
        if (jwks_url is None) == (public_key is None):
            raise ServiceConfigError(
                "REACTOR_AUTH=jwt needs where the tokens' keys are: set REACTOR_JWT_JWKS_URL "
                "(the identity provider's JWKS URL) or REACTOR_JWT_PUBLIC_KEY (a PEM public "
                "key, or its file), one of the two."
            )
        self.jwks_url, self.audience, self.issuer = jwks_url, audience, issuer
        self.roles_claim = roles_claim
        self._key = _public_key(public_key) if public_key is not None else None
        self._client = jwt.PyJWKClient(jwks_url, cache_keys=True) if jwks_url else None

    @classmethod
    def from_settings(cls, config: Settings) -> JWTAuth:
        """The authenticator the ``REACTOR_JWT_*`` settings describe.

        Raises:
            ServiceConfigError: They do not describe a usable one.
        """
        return cls(
            jwks_url=config.jwt_jwks_url,
            public_key=config.jwt_public_key,
            audience=config.jwt_audience,
            issuer=config.jwt_issuer,
            roles_claim=config.jwt_roles_claim,
        )

    async def principal(self, token: str) -> Principal | None:
        """The principal a valid token names (its ``sub``).

        Raises:
            NotAuthenticated: The token is refused; the detail says why.
            ServiceStateError: The JWKS URL cannot be reached (``503``: try again).
        """
        key = self._key
        if self._client is not None:
            key = await asyncio.to_thread(self._signing_key, token)
        claims = self._verified(token, key)
        subject = claims.get("sub")
        if not isinstance(subject, str) or not subject.strip() or len(subject) > NAME_LENGTH:
            raise NotAuthenticated(
                f"The token's sub (the user) must be text of 1 to {NAME_LENGTH} characters."
            )
        return Principal(subject, _roles(_claim(claims, self.roles_claim)), self.name)

    def _signing_key(self, token: str) -> Any:
        """The key of the JWKS that signed ``token`` (in a thread: it may fetch the JWKS)."""
        assert self._client is not None
        try:
            return self._client.get_signing_key_from_jwt(token).key
        except jwt.PyJWKClientConnectionError as exc:
            raise ServiceStateError(
                f"The identity provider's keys cannot be fetched from REACTOR_JWT_JWKS_URL "
                f"right now ({str(exc).splitlines()[0][:200]}); try again shortly."
            ) from None
        except jwt.DecodeError:
            raise _refusal(jwt.DecodeError()) from None
        except (jwt.PyJWKClientError, jwt.PyJWKError, jwt.PyJWKSetError):
            raise NotAuthenticated(
                "The token was signed with a key this service does not know (its kid is "
                "not in the identity provider's keys)."
            ) from None

    def _verified(self, token: str, key: Any) -> dict[str, Any]:
        algorithms = _algorithms(key)
        if not algorithms:
            raise NotAuthenticated(
                "The token's key is of a kind this service does not verify JWTs with."
            )
        named = (("aud", self.audience), ("iss", self.issuer))
        required = ["exp", "sub", *(claim for claim, value in named if value)]
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key,
                algorithms=list(algorithms),
                audience=self.audience,
                issuer=self.issuer,
                leeway=LEEWAY,
                options={"require": required, "verify_aud": self.audience is not None},
            )
        except jwt.PyJWTError as exc:
            raise _refusal(exc) from None
        return claims

    def __repr__(self) -> str:
        where = self.jwks_url if self.jwks_url else "a PEM public key"
        return f"<JWTAuth: keys from {where}>"

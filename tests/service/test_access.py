"""Who calls the service: tokens and their roles, JWTs, and a role declared on every route.

The JWT tests sign tokens with an RSA key made here and publish its JWKS from a small
HTTP server on 127.0.0.1; ``reactor serve`` with ``REACTOR_AUTH=jwt`` checks them.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import http.server
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fastapi
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from fastapi.routing import APIRoute, APIWebSocketRoute

from reactor.service import (
    JWTAuth,
    ObjectStore,
    Principal,
    ReactionService,
    ServiceConfigError,
    TokenAuth,
    create_app,
)
from reactor.service._access.authenticators import NotAuthenticated
from reactor.service._access.roles import RoleGate
from tests.service.server import serving


def test_a_token_line_names_a_user_and_roles_and_without_roles_is_an_operator() -> None:
    tokens = TokenAuth.parse(
        "s3cret:alice:admin, 0ther:bob\n# a comment\nthird:carol:viewer+approver"
    )
    assert len(tokens) == 3
    assert tokens.find("0ther") == Principal("bob", frozenset({"operator"}), "token")
    assert tokens.find("s3cret") == Principal("alice", frozenset({"admin"}), "token")
    assert tokens.find("third") == Principal("carol", frozenset({"viewer", "approver"}), "token")
    assert tokens.find("s3cre") is None
    assert "s3cret" not in repr(tokens)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param(
            "a:b,nouser",
            r"^Entry 2 of REACTOR_API_TOKENS is not token:user_id or token:user_id:role\+role; "
            r"write entries such as s3cret:alice or s3cret:alice:approver\+operator \(no ':' "
            r"in tokens or user ids\)\.$",
            id="no-user",
        ),
        pytest.param(
            "a:b:root",
            r"^Entry 1 of REACTOR_API_TOKENS names the unknown role\(s\) 'root'; the roles are "
            r"viewer, operator, approver, admin\.$",
            id="unknown-role",
        ),
    ],
)
def test_a_bad_token_line_is_one_sentence(text: str, message: str) -> None:
    with pytest.raises(ServiceConfigError, match=message):
        TokenAuth.parse(text)


def test_an_unreadable_tokens_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ServiceConfigError, match=r"^Cannot read the tokens file '.*missing'"):
        TokenAuth.read(tmp_path / "missing")


def test_tokens_given_in_python_take_roles_too() -> None:
    tokens = TokenAuth({"s3cret": ("alice", "approver+operator"), "other": "bob"})
    assert tokens.find("s3cret") == Principal("alice", frozenset({"approver", "operator"}))
    with pytest.raises(ServiceConfigError, match=r"names the unknown role\(s\) 'boss'"):
        TokenAuth({"s3cret": ("alice", "boss")})


# -- every route declares a role ---------------------------------------------------------


def _routes(routes: list[Any]) -> Iterator[Any]:
    """Every route of an app, those of the routers it includes too."""
    for route in routes:
        included = getattr(route, "original_router", None)  # FastAPI >= 0.160 nests them
        if included is not None:
            yield from _routes(included.routes)
        else:
            yield route


def _gates(dependant: Any) -> list[RoleGate]:
    found = [dependant.call] if isinstance(dependant.call, RoleGate) else []
    for sub in dependant.dependencies:
        found += _gates(sub)
    return found


async def test_every_route_of_the_api_and_the_web_ui_declares_the_role_it_needs(
    tmp_path: Path,
) -> None:
    service = ReactionService(objects=ObjectStore(f"sqlite:///{tmp_path / 'app.db'}"))
    app: fastapi.FastAPI = create_app(service)
    routes = [r for r in _routes(app.routes) if isinstance(r, APIRoute | APIWebSocketRoute)]
    assert len(routes) > 60
    undeclared = []
    for route in routes:
        declared = {gate.role for gate in _gates(route.dependant)}
        if len(declared) != 1:
            undeclared.append((route.path, sorted(map(str, declared))))
    assert undeclared == []
    public = sorted(r.path for r in routes if None in {g.role for g in _gates(r.dependant)})
    assert public == ["/", "/", "/docs", "/healthz"]  # sign-in (its form and its post)


# -- JWTs ----------------------------------------------------------------------------------


def _rsa() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _jwk(key: rsa.RSAPrivateKey, kid: str) -> dict[str, Any]:
    numbers = key.public_key().public_numbers()

    def b64(value: int) -> str:
        raw = value.to_bytes((value.bit_length() + 7) // 8, "big")
        return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()

    return {"kty": "RSA", "kid": kid, "use": "sig", "alg": "RS256", "n": b64(numbers.n),
            "e": b64(numbers.e)}  # fmt: skip


class JWKS:
    """A JWKS document served on 127.0.0.1 (how often it was fetched is counted)."""

    def __init__(self, keys: list[dict[str, Any]]) -> None:
        body = json.dumps({"keys": keys}).encode()
        served = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                served.fetched += 1
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.fetched = 0
        self.http = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}/jwks.json"
        self.thread = threading.Thread(target=self.http.serve_forever, daemon=True)

    def __enter__(self) -> JWKS:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.http.shutdown()
        self.http.server_close()


KEY = _rsa()
OTHER = _rsa()


def _hs256(claims: dict[str, Any], secret: bytes) -> str:
    """A JWT signed with HMAC-SHA-256, made by hand (PyJWT refuses a public key as secret)."""

    def part(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    header = part(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    signing = f"{header}.{part(json.dumps(claims).encode())}"
    signature = hmac.new(secret, signing.encode(), hashlib.sha256).digest()
    return f"{signing}.{part(signature)}"


def token(
    key: rsa.RSAPrivateKey = KEY,
    *,
    kid: str = "k1",
    sub: str = "ada",
    roles: Any = ("approver",),
    aud: str = "reactor-tests",
    iss: str = "https://id.example",
    expires_in: float = 300,
    **claims: Any,
) -> str:
    payload = {"sub": sub, "aud": aud, "iss": iss, "exp": int(time.time() + expires_in),
               "roles": roles, **claims}  # fmt: skip
    return jwt.encode(payload, key, algorithm="RS256", headers={"kid": kid})


@pytest.fixture(scope="module")
def jwks() -> Iterator[JWKS]:
    with JWKS([_jwk(KEY, "k1")]) as served:
        yield served


def _auth(jwks: JWKS) -> JWTAuth:
    return JWTAuth(jwks_url=jwks.url, audience="reactor-tests", issuer="https://id.example")


async def test_a_valid_jwt_is_its_subject_with_the_roles_its_claim_lists(jwks: JWKS) -> None:
    auth = _auth(jwks)
    assert await auth.principal(token(roles=["approver", "viewer", "idp-admin"])) == Principal(
        "ada", frozenset({"approver", "viewer"}), "jwt"
    )
    assert (await auth.principal(token(roles="operator admin"))) == Principal(
        "ada", frozenset({"operator", "admin"}), "jwt"
    )
    nested = JWTAuth(jwks_url=jwks.url, audience="reactor-tests", roles_claim="realm.roles")
    found = await nested.principal(token(roles=None, realm={"roles": ["admin"]}))
    assert found is not None
    assert found.roles == frozenset({"admin"})
    assert jwks.fetched == 2  # once per authenticator: its keys are cached


@pytest.mark.parametrize(
    ("made", "message"),
    [
        pytest.param(
            lambda: token(expires_in=-3600),
            "The token has expired; get a new one and send it again.",
            id="expired",
        ),
        pytest.param(
            lambda: token(aud="another-service"),
            "The token is meant for another audience than this service "
            "(REACTOR_JWT_AUDIENCE); ask for a token for this service.",
            id="audience",
        ),
        pytest.param(
            lambda: token(iss="https://elsewhere"),
            "The token was issued by another issuer than the one this service trusts "
            "(REACTOR_JWT_ISSUER).",
            id="issuer",
        ),
        pytest.param(
            lambda: token(OTHER),
            "The token's signature does not verify against the keys this service trusts.",
            id="wrong-key",
        ),
        pytest.param(
            lambda: token(OTHER, kid="k9"),
            "The token was signed with a key this service does not know (its kid is not in "
            "the identity provider's keys).",
            id="unknown-kid",
        ),
        pytest.param(
            lambda: jwt.encode({"sub": "ada", "exp": int(time.time()) + 60}, "", "none"),
            "The token was signed with a key this service does not know (its kid is not in "
            "the identity provider's keys).",
            id="alg-none",
        ),
        pytest.param(
            lambda: "not.a.jwt",
            "The token is not a valid JWT; send the token your sign-in gave.",
            id="garbage",
        ),
    ],
)
async def test_a_bad_jwt_is_refused_in_reactors_words(jwks: JWKS, made: Any, message: str) -> None:
    with pytest.raises(NotAuthenticated) as refused:
        await _auth(jwks).principal(made())
    assert refused.value.detail == message


async def test_a_pem_key_pins_its_algorithms_and_refuses_hmac_with_the_public_key(
    tmp_path: Path,
) -> None:
    pem = KEY.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    (tmp_path / "key.pem").write_bytes(pem)
    auth = JWTAuth(public_key=str(tmp_path / "key.pem"), audience="reactor-tests")
    assert (await auth.principal(token())) == Principal("ada", frozenset({"approver"}), "jwt")
    forged = _hs256(  # "signed" with the public key's PEM as an HMAC secret
        {
            "sub": "mallory",
            "aud": "reactor-tests",
            "exp": int(time.time()) + 60,
            "roles": ["admin"],
        },
        pem,
    )
    with pytest.raises(NotAuthenticated, match="algorithm this service does not accept"):
        await auth.principal(forged)


def test_jwt_settings_that_name_no_key_are_refused() -> None:
    with pytest.raises(ServiceConfigError, match=r"^REACTOR_AUTH=jwt needs where the tokens"):
        JWTAuth(audience="x")
    with pytest.raises(ServiceConfigError, match=r"^REACTOR_JWT_PUBLIC_KEY is not a PEM"):
        JWTAuth(public_key="-----BEGIN PUBLIC KEY-----\nnope\n-----END PUBLIC KEY-----")


def test_reactor_serve_authenticates_jwts_from_a_jwks_url(jwks: JWKS, tmp_path: Path) -> None:
    env = {
        "REACTOR_AUTH": "jwt",
        "REACTOR_JWT_JWKS_URL": jwks.url,
        "REACTOR_JWT_AUDIENCE": "reactor-tests",
        "REACTOR_JWT_ISSUER": "https://id.example",
        "REACTOR_API_TOKENS": "",
    }
    db = f"sqlite:///{tmp_path / 'app.db'}"
    with serving(db, tmp_path / "serve.log", env=env) as server:
        with server.client(token(roles=["operator"])) as operator:
            made = operator.post("/api/objects", json={"type": "Person", "data": {"name": "A"}})
            assert made.status_code == 201, made.text
            assert made.json()["actor"] == {"type": "user", "id": "ada"}
        with server.client(token(sub="vic", roles=[])) as viewer:
            assert viewer.get("/api/objects").status_code == 200
            refused = viewer.post("/api/objects", json={"type": "Person", "data": {"name": "B"}})
            assert refused.status_code == 403
            assert "needs the operator role, and user:vic holds no role" in refused.json()["detail"]
        for bad, detail in [
            (token(expires_in=-3600), "The token has expired; get a new one and send it again."),
            (token(aud="other"), "The token is meant for another audience than this service"),
            (token(OTHER), "The token's signature does not verify against the keys"),
        ]:
            with server.client(bad) as refused_client:
                answer = refused_client.get("/api/objects")
                assert answer.status_code == 401, answer.text
                assert answer.json()["detail"].startswith(detail)
    assert "Traceback" not in server.output()

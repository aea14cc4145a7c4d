from __future__ import annotations

import pytest
import sqlalchemy as sa
from starlette.requests import Request

from reactor.service import Principal, User
from reactor.service._objects.db import Database
from reactor.service._objects.schema import web_sessions
from reactor.service.web._sessions import Sessions, same_origin, tokens_match

ALICE = Principal("alice", frozenset({"approver", "operator"}), "jwt")


async def test_a_session_is_found_by_its_id_until_it_is_closed() -> None:
    sessions = Sessions()
    session = await sessions.open(ALICE)
    assert await sessions.get(session.id) is session
    assert session.id != session.csrf
    await sessions.close(session.id)
    assert await sessions.get(session.id) is None
    assert await sessions.get(None) is None


async def test_a_session_unused_for_its_lifetime_ends() -> None:
    sessions = Sessions(lifetime=-1)
    session = await sessions.open(ALICE)
    assert await sessions.get(session.id) is None
    assert len(sessions) == 0


async def test_notices_are_shown_once() -> None:
    session = await Sessions().open(ALICE)
    session.notify("ok", "Saved.")
    assert session.take_notices() == [("ok", "Saved.")]
    assert session.take_notices() == []


async def test_sessions_in_the_database_are_every_serving_processes_and_outlive_them(
    url: str,
) -> None:
    """Two processes (two Sessions on one database): signed in on one, known to the other."""
    first_db, second_db = Database(url), Database(url)
    await first_db.open()
    await second_db.open()
    try:
        first, second = Sessions(first_db), Sessions(second_db)
        session = await first.open(ALICE)
        found = await second.get(session.id)
        assert found is not None
        assert (found.user, found.csrf) == (User("alice"), session.csrf)
        assert found.principal == ALICE  # its roles and authenticator too
        session.notify("ok", "Saved.")  # notices stay with the process that made them
        again = await first.get(session.id)
        assert again is not None
        assert again.take_notices() == [("ok", "Saved.")]
        assert found.take_notices() == []
        async with first_db.read() as conn:
            kept = list((await conn.execute(sa.select(web_sessions.c.id_hash))).scalars())
        assert session.id not in kept  # only a hash of the cookie's value is stored
        assert len(kept) == 1
        await second.close(session.id)  # signing out on one signs out on all
        assert await first.get(session.id) is None
        assert await first.get("not-a-session") is None
        stale = await Sessions(first_db, lifetime=-1).open(Principal("bob"))
        assert await first.get(stale.id) is not None
        assert await Sessions(second_db, lifetime=-1).get(stale.id) is None  # expired: gone
        assert await first.get(stale.id) is None
    finally:
        await first_db.close()
        await second_db.close()


@pytest.mark.parametrize(
    ("expected", "given", "match"),
    [
        pytest.param("abc", "abc", True, id="same"),
        pytest.param("abc", "abd", False, id="different"),
        pytest.param("abc", None, False, id="missing"),
        pytest.param(None, "abc", False, id="no-session"),
        pytest.param("", "", False, id="empty"),
    ],
)
def test_csrf_tokens_match_only_when_equal_and_present(
    expected: str | None, given: str | None, match: bool
) -> None:
    assert tokens_match(expected, given) is match


def _request(headers: dict[str, str]) -> Request:
    raw = [(k.lower().encode(), v.encode()) for k, v in headers.items()]
    return Request({"type": "http", "method": "POST", "path": "/", "headers": raw})


@pytest.mark.parametrize(
    ("origin", "same"),
    [
        pytest.param(None, True, id="no-origin"),
        pytest.param("http://127.0.0.1:8000", True, id="this-site"),
        pytest.param("https://evil.example", False, id="other-site"),
        pytest.param("null", False, id="opaque"),
    ],
)
def test_a_form_is_from_this_site_when_its_origin_is_this_host(
    origin: str | None, same: bool
) -> None:
    headers = {"Host": "127.0.0.1:8000", **({"Origin": origin} if origin else {})}
    assert same_origin(_request(headers)) is same

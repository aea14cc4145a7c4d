from __future__ import annotations

import pytest
from starlette.requests import Request

from reactor.service import User
from reactor.service.web._sessions import Sessions, same_origin, tokens_match


def test_a_session_is_found_by_its_id_until_it_is_closed() -> None:
    sessions = Sessions()
    session = sessions.open(User("alice"))
    assert sessions.get(session.id) is session
    assert session.id != session.csrf
    sessions.close(session.id)
    assert sessions.get(session.id) is None
    assert sessions.get(None) is None


def test_a_session_unused_for_its_lifetime_ends() -> None:
    sessions = Sessions(lifetime=-1)
    session = sessions.open(User("alice"))
    assert sessions.get(session.id) is None
    assert len(sessions) == 0


def test_notices_are_shown_once() -> None:
    session = Sessions().open(User("alice"))
    session.notify("ok", "Saved.")
    assert session.take_notices() == [("ok", "Saved.")]
    assert session.take_notices() == []


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

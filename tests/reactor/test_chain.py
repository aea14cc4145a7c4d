"""Hash chains: the canonical form of an entry, the link, and what a verifier detects.

The stores and the service use these; the tests of what they store (and of ``reactor
audit verify`` on real databases) are in ``test_audit.py`` and
``tests/service/test_audit_verify.py``.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from reactor._recording import chain
from reactor._recording.chain import (
    HMAC_SHA256,
    SHA256,
    Chain,
    Heads,
    Report,
    Walk,
    row_entry,
    signal_entry,
)

KEY = b"k3y-of-the-audit-trail"
ROW = ("run_1", 3, "sig_a", "state:n:changed", '{"key":"n","new":2}', 1_700_000_000.25, "count",
       "sig_0", 1)  # fmt: skip


def as_python_writes_it(value: Any) -> bytes:
    """The documented form: Python's ``json.dumps``, keys sorted, no spaces, UTF-8."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def test_a_signal_entry_is_its_stored_fields_as_canonical_json() -> None:
    assert signal_entry(ROW) == (
        b'{"caused_by":"sig_0","depth":1,"id":"sig_a","name":"state:n:changed",'
        b'"payload":"{\\"key\\":\\"n\\",\\"new\\":2}","run_id":"run_1","seq":3,'
        b'"source":"count","time":1700000000.25}'
    )


texts = st.text() | st.none()
times = (
    st.floats(allow_nan=False, allow_infinity=False)
    | st.floats(1.6e9, 2.0e9)  # UNIX times, the writers' common case
    | st.integers(-(2**70), 2**70)
    | st.sampled_from([0.0, -0.0, 1.0, 2.0**52, 2.0**53, 1e16, 1e-4, 1e-5, 0.1, 1e300])
)


@given(
    run_id=st.text(),
    seq=st.integers(0, 2**64),
    name=st.text(),
    payload=texts,
    time=times,
    source=texts,
    caused_by=texts,
    depth=st.integers(-(2**63), 2**63),
)
@settings(max_examples=500)
@example(
    run_id="run", seq=1, name="a\x00\x1f\x7f\"\\\n\r\t\b\f é 😀", payload='{"a":"\\u0000"}',
    time=1765130000.123456, source=None, caused_by=None, depth=0,
)  # fmt: skip
def test_a_signal_entry_is_what_python_json_writes(
    run_id: str,
    seq: int,
    name: str,
    payload: str | None,
    time: float,
    source: str | None,
    caused_by: str | None,
    depth: int,
) -> None:
    """Both ways: ``signal_entry`` (Python), and the compiled loop's where it answers."""
    row = (run_id, seq, "sig_x", name, payload, time, source, caused_by, depth)
    fields = {
        "caused_by": caused_by, "depth": depth, "id": "sig_x", "name": name, "payload": payload,
        "run_id": run_id, "seq": seq, "source": source, "time": float(time),
    }  # fmt: skip
    try:
        expected = as_python_writes_it(fields)
    except UnicodeEncodeError:  # a lone surrogate: the database could not hold it either
        with pytest.raises(ValueError):  # noqa: PT011  (pydantic's or the codec's, both ValueError)
            signal_entry(row)
        expected = None
    else:
        assert signal_entry(row) == expected
    assert chain._native is not None, "reactor._recording._chainlink was not built"
    try:
        compiled = chain._native.entry(row)
    except (TypeError, ValueError, OverflowError):
        # what the compiled loop declines, the writer links the Python way; it declines
        # only what it must: a lone surrogate, an int beyond 64 bits
        assert expected is None or max(abs(seq), abs(depth)) >= 2**63
    else:
        assert compiled == expected


def test_a_row_entry_leaves_out_nulls_and_writes_times_in_utc() -> None:
    when = datetime(2026, 1, 2, 3, 4, 5, 123456, tzinfo=UTC)
    entry = row_entry({"id": 7, "payload": {"b": [1, 2.5], "a": "é"}, "gone": None, "at": when})
    expected = '{"at":"2026-01-02T03:04:05.123456+00:00","id":7,"payload":{"a":"é","b":[1,2.5]}}'
    assert entry == expected.encode()


def test_a_link_is_sha256_of_the_previous_hash_and_the_entry() -> None:
    first = Chain().link(None, b"{}")
    assert first == SHA256 + hashlib.sha256(b"{}").hexdigest()
    second = Chain().link(first, b'{"a":1}')
    assert second == SHA256 + hashlib.sha256(first.encode() + b'{"a":1}').hexdigest()


def test_a_link_with_a_key_is_an_hmac() -> None:
    linked = Chain(KEY).link("sha256:ab", b"{}")
    assert linked == HMAC_SHA256 + hmac.new(KEY, b"sha256:ab{}", "sha256").hexdigest()


def chain_of(entries: list[bytes], key: bytes | None = None) -> list[str]:
    hashes: list[str] = []
    for entry in entries:
        hashes.append(Chain(key).link(hashes[-1] if hashes else None, entry))
    return hashes


ENTRIES = [json.dumps({"n": n}).encode() for n in range(6)]


def walked(
    hashes: list[str | None], entries: list[bytes], key: bytes | None = None
) -> tuple[int, str] | None:
    """Where a walk of the chain breaks (index, problem), or ``None``."""
    walk = Walk(key, since=None)
    for index, (stored, entry) in enumerate(zip(hashes, entries, strict=True)):
        problem = walk.step(stored, entry, None)
        if problem is not None:
            return index, problem
    return None


def test_an_intact_chain_walks_through() -> None:
    assert walked(list(chain_of(ENTRIES)), ENTRIES) is None
    assert walked(list(chain_of(ENTRIES, KEY)), ENTRIES, KEY) is None


def test_an_edited_entry_breaks_the_chain_at_it() -> None:
    hashes = chain_of(ENTRIES)
    edited = [*ENTRIES[:3], b'{"n": 99}', *ENTRIES[4:]]
    assert walked(list(hashes), edited) == (
        3,
        "its content does not match its hash: it was changed, or an entry before it was "
        "removed, added or moved",
    )


def test_a_deleted_entry_breaks_the_chain_at_the_next() -> None:
    hashes = chain_of(ENTRIES)
    broken = walked([*hashes[:2], *hashes[3:]], [*ENTRIES[:2], *ENTRIES[3:]])
    assert broken is not None
    assert broken[0] == 2


def test_swapped_entries_break_the_chain() -> None:
    hashes = chain_of(ENTRIES)
    order = [0, 2, 1, 3, 4, 5]
    broken = walked([hashes[i] for i in order], [ENTRIES[i] for i in order])
    assert broken is not None
    assert broken[0] == 1


def test_a_chain_recomputed_without_the_key_is_caught_with_it() -> None:
    keyed = chain_of(ENTRIES, KEY)
    edited = [*ENTRIES[:3], b'{"n": 99}', *ENTRIES[4:]]
    forged = [*keyed[:3], *chain_of(edited, None)[3:]]
    assert walked(list(forged), edited) is not None  # keyed: without the key, it cannot say
    assert walked(list(forged), edited, KEY) == (
        3,
        "it is chained without the key (SHA-256), so the key does not vouch for it: someone "
        "without REACTOR_AUDIT_KEY rewrote it, or a process without the key wrote it (verify "
        "such a chain without the key)",
    )
    wholly = chain_of(edited, None)  # every hash recomputed, from the first
    assert walked(list(wholly), edited, KEY) is not None


def test_a_chain_made_with_another_key_does_not_match() -> None:
    other = chain_of(ENTRIES, b"an0ther-key-of-the-trail")
    broken = walked(list(other), ENTRIES, KEY)
    assert broken is not None
    assert broken[1].endswith("(or it was chained with another key)")


def test_a_keyed_chain_needs_the_key() -> None:
    assert walked(list(chain_of(ENTRIES, KEY)), ENTRIES) == (
        0,
        "its chain was written with a key (HMAC-SHA-256); set REACTOR_AUDIT_KEY to that key "
        "to verify it",
    )


def test_entries_without_a_hash_before_the_chain_began_are_counted_not_checked() -> None:
    walk = Walk(None, since=1000.0)
    assert walk.step(None, ENTRIES[0], 999.0) is None
    assert walk.step(None, ENTRIES[1], 999.5) is None
    hashes = chain_of(ENTRIES[2:])  # chained from the first entry with a hash on
    for stored, entry in zip(hashes, ENTRIES[2:], strict=True):
        assert walk.step(stored, entry, 1001.0) is None
    assert (walk.unchained, walk.checked) == (2, 4)


def test_an_entry_whose_hash_was_removed_is_caught() -> None:
    hashes: list[str | None] = list(chain_of(ENTRIES))
    hashes[4] = None
    broken = walked(hashes, ENTRIES)
    assert broken == (
        4,
        "it has no hash, though the entries before it have one: its hash was removed",
    )
    walk = Walk(None, since=1000.0)  # every hash removed: the entries are too recent
    problem = walk.step(None, ENTRIES[0], 1000.0)
    assert problem is not None
    assert problem.startswith(
        "it has no hash, though it was written after the trail was chained "
        "(1970-01-01T00:16:40+00:00): its hash was removed"
    )


def test_a_hash_reactor_does_not_write_is_named() -> None:
    assert walked(["md5:abc"], ENTRIES[:1]) == (
        0,
        "its hash is not one reactor writes (sha256:... or hmac-sha256:...)",
    )


@pytest.fixture(params=["compiled", "python"])
def linking(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """The writers' two ways to link: the compiled loop, and Python's where none is built."""
    if request.param == "python":
        monkeypatch.setattr(chain, "_native", None)
    else:
        assert chain._native is not None, "reactor._recording._chainlink was not built"


def rows(run_id: str, seqs: range) -> list[list[Any]]:
    """A writer's rows: a signal's stored fields, and a last item for its hash."""
    return [[run_id, seq, f"sig_{seq}", "tick", None, 1.5, None, None, 0, None] for seq in seqs]


@pytest.mark.usefixtures("linking")
def test_heads_read_a_run_they_do_not_know_and_keep_it_once_committed() -> None:
    heads = Heads(Chain())
    asked: list[list[str]] = []

    def lookup(run_ids: list[str]) -> dict[str, tuple[int, str | None]]:
        asked.append(run_ids)
        return {"run_old": (4, "sha256:00")} if "run_old" in run_ids else {}

    batch = [*rows("run_new", range(1, 3)), *rows("run_old", range(5, 6))]
    linked = heads.link(batch, lookup)
    assert asked == [["run_old"]]  # a run from its first signal on has nothing before it
    assert batch[0][9] == Chain().link(None, signal_entry(batch[0][:9]))
    assert batch[1][9] == Chain().link(batch[0][9], signal_entry(batch[1][:9]))
    assert batch[2][9] == Chain().link("sha256:00", signal_entry(batch[2][:9]))
    assert linked == {"run_new": (2, batch[1][9]), "run_old": (5, batch[2][9])}
    heads.keep(linked)
    heads.link(rows("run_new", range(3, 4)), lookup)  # follows what was kept: not read
    heads.link(rows("run_old", range(9, 10)), lookup)  # a gap: another wrote since
    assert asked == [["run_old"], ["run_old"]]


@pytest.mark.usefixtures("linking")
def test_heads_link_runs_whose_rows_are_interleaved() -> None:
    batch = [*rows("run_a", range(1, 4)), *rows("run_b", range(1, 4))]
    mixed = [batch[0], batch[3], batch[1], batch[4], batch[2], batch[5]]
    Heads(Chain()).link(mixed, lambda runs: {})
    for run in (batch[:3], batch[3:]):
        previous = None
        for row in run:
            assert row[9] == Chain().link(previous, signal_entry(row[:9]))
            previous = row[9]


@pytest.mark.usefixtures("linking")
def test_heads_do_not_chain_a_row_already_stored() -> None:
    heads = Heads(Chain())
    batch = rows("run_a", range(3, 6))
    linked = heads.link(batch, lambda runs: {"run_a": (4, "sha256:ff")})
    assert [row[9] for row in batch[:2]] == [None, None]
    assert batch[2][9] == Chain().link("sha256:ff", signal_entry(batch[2][:9]))
    assert linked["run_a"] == (5, batch[2][9])


@pytest.mark.usefixtures("linking")
def test_heads_without_a_chain_set_no_hashes() -> None:
    batch = rows("run_a", range(1, 4))
    assert Heads(None).link(batch, lambda runs: {}) == {}
    assert [row[9] for row in batch] == [None, None, None]


@pytest.mark.usefixtures("linking")
def test_heads_link_a_time_outside_the_fast_form_as_python_writes_it() -> None:
    batch = rows("run_a", range(1, 2))
    batch[0][5] = 1e-7
    Heads(Chain()).link(batch, lambda runs: {})
    assert batch[0][9] == Chain().link(None, signal_entry(batch[0][:9]))
    assert b'"time":1e-07' in signal_entry(batch[0][:9])


def test_a_report_says_what_it_checked_or_where_it_broke() -> None:
    report = Report()
    walk = Walk(None, since=None)
    for stored, entry in zip(chain_of(ENTRIES), ENTRIES, strict=True):
        walk.step(stored, entry, None)
    report.table("signals").add(walk)
    assert report.lines() == [
        "signals: 1 run, 6 entries chained",
        "The trail is intact. Without REACTOR_AUDIT_KEY this shows edits, not a writer who "
        "recomputed the chain (see docs/audit.md).",
    ]
    assert report.to_dict()["checked"] == [
        {"table": "signals", "chains": 1, "entries": 6, "unchained": 0, "keyed": 0}
    ]

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reactor import PatternError, Signal, SignalBus, SignalNameError
from reactor._signals.patterns import compile_pattern, normalize_patterns, validate_name


@pytest.mark.parametrize(
    ("pattern", "name", "expected"),
    [
        pytest.param("node:*:completed", "node:a:completed", True, id="star-one-segment"),
        pytest.param("node:*:completed", "node:a:b:completed", False, id="star-not-two"),
        pytest.param("node:*:completed", "node::completed", False, id="star-not-empty"),
        pytest.param("trade:**", "trade", True, id="globstar-zero"),
        pytest.param("trade:**", "trade:x", True, id="globstar-one"),
        pytest.param("trade:**", "trade:x:y", True, id="globstar-two"),
        pytest.param("trade:**", "trades", False, id="globstar-segment-boundary"),
        pytest.param("**", "anything:at:all", True, id="globstar-alone"),
        pytest.param("**:end", "end", True, id="leading-globstar-zero"),
        pytest.param("**:end", "a:b:end", True, id="leading-globstar-many"),
        pytest.param("a:**:z", "a:z", True, id="inner-globstar-zero"),
        pytest.param("a:**:z", "a:b:c:z", True, id="inner-globstar-many"),
        pytest.param("a:**:z", "a:b:c", False, id="inner-globstar-needs-tail"),
        pytest.param("state:*:changed", "state:a:b:changed", False, id="state-star"),
        pytest.param("state:*:changed", "state:analysis:changed", True, id="state-key"),
        pytest.param("trade*", "trades", True, id="star-inside-segment"),
        pytest.param("trade*", "trade:x", False, id="star-inside-stays-in-segment"),
        pytest.param("a.b", "a.b", True, id="dot-literal"),
        pytest.param("a.b", "axb", False, id="dot-not-regex"),
        pytest.param("x[1]", "x[1]", True, id="brackets-literal"),
        pytest.param("x[1]", "x1", False, id="brackets-not-class"),
        pytest.param("a+", "aa", False, id="plus-literal"),
        pytest.param("harness:start", "harness:start", True, id="literal"),
        pytest.param("harness:start", "harness:started", False, id="literal-exact"),
    ],
)
def test_glob_matching(pattern: str, name: str, expected: bool) -> None:
    assert compile_pattern(pattern)(name) is expected
    assert Signal(name).matches(pattern) is expected


def test_compiled_regex_must_match_the_whole_name() -> None:
    matcher = compile_pattern(re.compile(r"agent:\w+:failed"))
    assert matcher("agent:trader:failed")
    assert not matcher("agent:trader:failed:again")
    assert not compile_pattern(re.compile("trade"))("untrade")


def test_compiled_patterns_are_cached() -> None:
    assert compile_pattern("cache:*:me") is compile_pattern("cache:*:me")


@pytest.mark.parametrize(
    ("pattern", "message"),
    [
        pytest.param("", r"^Invalid pattern '': a pattern cannot be empty\.$", id="empty"),
        pytest.param(
            "***",
            r"^Invalid pattern '\*\*\*': '\*\*' must be a whole segment "
            r"\(write 'a:\*\*', not 'a\*\*'\), found '\*\*\*'\.$",
            id="triple-star",
        ),
        pytest.param("a**b", r"'\*\*' must be a whole segment", id="globstar-inside"),
        pytest.param("a::b", r"segments between ':' cannot be empty", id="empty-segment"),
        pytest.param(":a", r"segments between ':' cannot be empty", id="leading-colon"),
        pytest.param("a:*:", r"segments between ':' cannot be empty", id="trailing-colon"),
        pytest.param("a b", r"cannot contain whitespace", id="whitespace"),
        pytest.param("a:\x00", r"cannot contain a NUL character", id="nul"),
        pytest.param("a:*\x00", r"cannot contain whitespace or a NUL character", id="nul-glob"),
    ],
)
def test_invalid_patterns_raise_at_subscription(pattern: str, message: str) -> None:
    bus = SignalBus()
    with pytest.raises(PatternError, match=message) as info:
        bus.subscribe(pattern, lambda s: None)
    assert info.value.pattern == pattern


def test_a_bad_pattern_among_good_ones_fails_the_whole_subscription() -> None:
    bus = SignalBus()
    with pytest.raises(PatternError):
        bus.subscribe(["ok:*", "bad**"], lambda s: None)
    seen: list[str] = []
    bus.subscribe("ok:*", lambda s: seen.append(s.name))
    bus.emit("ok:1")
    assert seen == ["ok:1"]


def test_non_pattern_values_are_rejected() -> None:
    with pytest.raises(PatternError, match=r"^A pattern is a string or a compiled re\.Pattern"):
        normalize_patterns([42])  # type: ignore[list-item]
    with pytest.raises(PatternError, match=r"^At least one pattern is required\.$"):
        normalize_patterns([])


def test_normalize_deduplicates_and_keeps_order() -> None:
    assert normalize_patterns(["b", "a", "b"]) == ("b", "a")


@pytest.mark.parametrize(
    ("name", "message"),
    [
        pytest.param("", "a name cannot be empty", id="empty"),
        pytest.param("a::b", "segments between ':' cannot be empty", id="empty-segment"),
        pytest.param("a *", "cannot contain whitespace", id="whitespace"),
        pytest.param("a:*", "'\\*' is reserved for patterns", id="star"),
        pytest.param(
            "order:pla\x00ced",
            r"^Invalid signal name 'order:pla\\x00ced': names cannot contain a NUL character "
            r"\('\\x00' at index 9\)\.$",
            id="nul",
        ),
        pytest.param(
            "order:\ud800",
            r"names must be valid Unicode text \(a lone surrogate at index 6\)",
            id="lone-surrogate",
        ),
    ],
)
def test_invalid_names_raise(name: str, message: str) -> None:
    with pytest.raises(SignalNameError, match=message):
        validate_name(name)


# -- properties against a reference matcher ---------------------------------------

SEGMENTS = st.sampled_from(["a", "b", "ab", "x.y", "[z]"])
NAMES = st.lists(SEGMENTS, min_size=1, max_size=5)
PATTERN_SEGMENTS = st.one_of(SEGMENTS, st.just("*"), st.just("**"), st.just("a*"), st.just("*b"))
PATTERNS = st.lists(PATTERN_SEGMENTS, min_size=1, max_size=5)


def _segment_matches(pattern: str, segment: str) -> bool:
    if "*" not in pattern:
        return pattern == segment
    head, *middle, tail = pattern.split("*")
    if not (segment.startswith(head) and segment.endswith(tail)):
        return False
    rest = segment[len(head) : len(segment) - len(tail) if tail else None]
    if len(head) + len(tail) > len(segment):
        return False
    for piece in middle:
        found = rest.find(piece)
        if found < 0:
            return False
        rest = rest[found + len(piece) :]
    return True


def _reference(pattern: list[str], name: list[str]) -> bool:
    """Segment-wise recursive matcher: the specification, written plainly."""
    if not pattern:
        return not name
    first, rest = pattern[0], pattern[1:]
    if first == "**":
        return any(_reference(rest, name[i:]) for i in range(len(name) + 1))
    return bool(name) and _segment_matches(first, name[0]) and _reference(rest, name[1:])


@given(pattern=PATTERNS, name=NAMES)
def test_glob_agrees_with_reference_matcher(pattern: list[str], name: list[str]) -> None:
    assert compile_pattern(":".join(pattern))(":".join(name)) == _reference(pattern, name)


@given(name=NAMES)
def test_a_literal_name_matches_only_itself(name: list[str]) -> None:
    joined = ":".join(name)
    assert compile_pattern(joined)(joined)
    assert not compile_pattern(joined)(joined + ":more")


@given(name=NAMES)
def test_globstar_matches_every_name(name: list[str]) -> None:
    assert compile_pattern("**")(":".join(name))


@given(name=NAMES)
def test_prefix_globstar_matches_its_prefix_and_below(name: list[str]) -> None:
    matcher = compile_pattern(f"{name[0]}:**")
    assert matcher(":".join(name))
    assert not matcher("other:" + ":".join(name))

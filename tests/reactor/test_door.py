"""A NUL is refused where a database cannot hold it, so every backend answers the same.

PostgreSQL keeps no NUL character in text or ``jsonb``; SQLite keeps it. The door
(``reactor/_signals/door.py``) refuses it where one backend would fail: object data
(``check_payload(..., nul=True)``), text stored or compared in a column
(``check_text``), and so the filters of a runs listing on every signal store.
"""

from __future__ import annotations

from typing import Any

import pytest

from reactor import PayloadError, agent, reactive
from reactor._signals.door import check_payload, check_text
from tests.reactor.databases import StorePlace

NUL = "\x00"
REASON = (
    r"a string with a NUL character \('\\x00' at index {index}\), which PostgreSQL cannot "
    r"keep \(so neither database takes it\): remove it"
)


@pytest.mark.parametrize(
    ("value", "path", "index"),
    [
        pytest.param({"name": f"Ada{NUL}"}, "data.name", 3, id="value"),
        pytest.param({f"na{NUL}me": "Ada"}, r"data \(a key\)", 2, id="key"),
        pytest.param({"tags": [{"x": "ok"}, {"x": f"{NUL}"}]}, r"data.tags\[1\].x", 0, id="deep"),
        pytest.param({"note": f"é{NUL}"}, "data.note", 1, id="beside-non-ascii"),
    ],
)
def test_object_data_with_a_nul_anywhere_is_refused_with_its_path(
    value: Any, path: str, index: int
) -> None:
    reason = REASON.format(index=index)
    with pytest.raises(
        PayloadError, match=rf"^{path} cannot be recorded: it is {reason}\. "
    ) as info:
        check_payload(value, "data", nul=True)
    assert info.value.path == path.replace("\\", "")


def test_a_signal_payload_may_hold_a_nul_the_log_keeps_it() -> None:
    check_payload({"text": f"a{NUL}b", f"k{NUL}": 1}, "payload")


def test_an_escaped_nul_is_plain_text_and_passes() -> None:
    check_payload({"text": "\\u0000"}, "data", nul=True)  # a backslash, then "u0000"


def test_text_with_a_nul_is_refused_naming_where() -> None:
    with pytest.raises(
        PayloadError, match=rf"^tag cannot be used: it is {REASON.format(index=7)}\.$"
    ) as info:
        check_text(f"nightly{NUL}", "tag")
    assert info.value.path == "tag"


def test_text_with_a_lone_surrogate_is_refused() -> None:
    with pytest.raises(PayloadError, match=r"^graph cannot be used: it is a string with a lone"):
        check_text("book\ud800", "graph")


@pytest.mark.parametrize(
    "where",
    [
        pytest.param({"tag": f"env{NUL}"}, id="tag-key"),
        pytest.param({"tag": f"env=prod{NUL}"}, id="tag-value"),
        pytest.param({"graph": f"book{NUL}"}, id="graph"),
        pytest.param({"status": f"completed{NUL}"}, id="status"),
    ],
)
async def test_a_runs_filter_with_a_nul_is_refused_by_every_signal_store(
    store_place: StorePlace, where: dict[str, Any]
) -> None:
    graph = reactive({"hello": agent(run=lambda ctx: "hi")}, name="book")
    with store_place.open() as store:
        await graph.run(record=store, tags={"env": "prod"})
        (name,) = where
        with pytest.raises(PayloadError, match=rf"^{name} cannot be used: it is a string with"):
            store.runs(**where)
        assert [info.graph for info in store.runs(tag="env=prod")] == ["book"]

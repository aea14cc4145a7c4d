"""The hash chain's compiled loop writes exactly what the Python loop writes.

``reactor._recording._chainlink`` links a writer's batch of signals in C (OpenSSL's
SHA-256, its own canonical JSON and float repr); ``reactor._recording.chain._link`` is
the reference it must match byte for byte, and what runs where the extension was not
built. ``test_chain.py`` runs the writers' tests both ways, and checks each entry the
compiled loop writes against ``json.dumps``.
"""

from __future__ import annotations

import copy
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reactor._recording import chain
from reactor._recording.chain import Chain, Heads

native = chain._native
ROOT = Path(__file__).resolve().parents[2]
KEYS = [None, b"k", b"k3y-of-the-audit-trail", b"x" * 64, b"long" * 40]  # > 64: hashed first


def test_the_compiled_loop_is_built_here() -> None:
    """CI must notice an install that fell back to Python (the chain's cost doubles)."""
    assert native is not None, "reactor._recording._chainlink was not built: run `make` again"


batches = st.lists(
    st.tuples(
        st.sampled_from(["run_a", "run_b", "run_c"]),
        st.text(max_size=40),
        st.text() | st.none(),
        st.floats(1e-6, 1e12) | st.integers(0, 2**31),
    ),
    max_size=30,
)


@given(batch=batches, key=st.sampled_from(KEYS), stored=st.integers(0, 3))
@settings(max_examples=300)
def test_a_batch_links_as_the_python_loop_links_it(
    batch: list[tuple[str, str, str | None, float]], key: bytes | None, stored: int
) -> None:
    assert native is not None
    seqs: dict[str, int] = {}
    rows: list[list[Any]] = []
    for run_id, name, payload, time in batch:
        seqs[run_id] = seqs.get(run_id, 0) + 1
        rows.append([run_id, seqs[run_id], f"sig_{len(rows)}", name, payload, time, None, None,
                     1, "stale"])  # fmt: skip
    # run_b's first `stored` signals are in the store already: they get no hash
    heads = {run: (stored, "sha256:00") if run == "run_b" else (0, None) for run in seqs}
    compiled_rows, compiled_heads = copy.deepcopy(rows), dict(heads)
    try:
        native.link(compiled_rows, compiled_heads, key)
    except ValueError:  # a lone surrogate
        return
    python_heads = chain._link(Chain(key), rows, dict(heads))
    assert compiled_rows == rows
    assert compiled_heads == python_heads


def test_a_row_the_compiled_loop_does_not_take_is_linked_the_python_way() -> None:
    def batch() -> list[list[Any]]:
        return [
            ["run_a", 1, "sig_1", "tick", None, 1.5, None, None, 0, None],
            ["run_a", 2, "sig_2", "tick", None, float("inf"), None, None, 0, None],
            ["run_a", 3, "sig_3", "tick", None, 2.5, None, None, 2**64, None],
        ]

    linked, expected = batch(), batch()
    heads = Heads(Chain()).link(linked, lambda runs: {})
    assert heads == chain._link(Chain(), expected, {"run_a": (0, None)})
    assert linked == expected
    assert all(row[9] is not None for row in linked)
    # a stored head that is not a hash reactor writes (edited in the database): linked
    # as Python links it, for the verifier to report
    edited, expected = batch()[:1], batch()[:1]
    edited[0][1] = expected[0][1] = 8
    heads = Heads(Chain()).link(edited, lambda runs: {"run_a": (7, "sha256:é")})
    assert heads == chain._link(Chain(), expected, {"run_a": (7, "sha256:é")})
    assert edited == expected


def test_bad_arguments_are_refused_with_a_type_error() -> None:
    assert native is not None
    with pytest.raises(TypeError):
        native.link([("run_a", 1)], {}, None)
    with pytest.raises(TypeError):
        native.link([["run_a"] * 9], {"run_a": (0, None)}, None)
    with pytest.raises(KeyError):
        native.link([["run_a", 1, "i", "n", None, 1.0, None, None, 0, None]], {}, None)


def test_reactor_records_and_verifies_without_the_compiled_loop(tmp_path: Path) -> None:
    """An install where the extension could not be built links in Python, the same chain."""
    script = textwrap.dedent(
        """
        import sys
        sys.modules["reactor._recording._chainlink"] = None  # as if it was never built
        from reactor import SQLiteSignalStore
        from reactor._recording import chain
        from tests.reactor.support import ticking
        assert chain._native is None
        with SQLiteSignalStore(sys.argv[1]) as store:
            result = ticking(50).run_sync(record=store, max_activations=None)
        assert result.status == "completed", result.error
        """
    )
    database = tmp_path / "runs.db"
    done = subprocess.run(
        [sys.executable, "-c", script, str(database)],
        capture_output=True, text=True, timeout=120, cwd=ROOT, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    with sqlite3.connect(database) as conn:
        hashes = conn.execute("SELECT count(hash) FROM signals").fetchone()[0]
    assert hashes > 200  # 4 signals a tick, each linked
    verified = subprocess.run(
        [sys.executable, "-m", "reactor", "audit", "verify", "--db", str(database)],
        capture_output=True, text=True, timeout=120, cwd=ROOT, check=False,
    )  # fmt: skip
    assert verified.returncode == 0, verified.stdout + verified.stderr

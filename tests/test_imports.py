"""Each package imports on its own, in any order (no import cycles)."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.parametrize(
    "statement",
    [
        pytest.param("import stores", id="stores"),
        pytest.param("import reactor", id="reactor"),
        pytest.param("import migration", id="migration"),
        pytest.param("import stores, reactor, migration", id="stores-first"),
        pytest.param("import reactor.logging", id="logging"),
    ],
)
def test_package_imports_alone(statement: str) -> None:
    result = subprocess.run(
        [sys.executable, "-W", "error", "-c", statement], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr

"""The examples of docs/migration.md run, and print what the text says they print."""

from __future__ import annotations

import contextlib
import io
import re
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
GUIDE = ROOT / "docs" / "migration.md"
BLOCK = re.compile(r"(<!-- excerpt[^>]*-->\n)?```(\w+)\n(.*?)```", re.DOTALL)


def test_the_guide_examples_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocks = [(m.group(2), m.group(3), bool(m.group(1))) for m in BLOCK.finditer(GUIDE.read_text())]
    shutil.copytree(
        ROOT / "tests" / "migration" / "data", tmp_path / "tests" / "migration" / "data"
    )
    (tmp_path / "triage.yaml").write_text(next(code for lang, code, _ in blocks if lang == "yaml"))
    monkeypatch.chdir(tmp_path)
    ran = 0
    for lang, code, excerpt in blocks:
        if lang != "python" or excerpt:
            continue
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            exec(compile(code, f"{GUIDE.name} block {ran}", "exec"), {"__name__": "docs"})
        expected = re.findall(r"print\(.*\)  # (.*)", code)
        lines = [line for line in printed.getvalue().splitlines() if "[debug" not in line]
        if expected:
            assert lines == expected
        ran += 1
    assert ran == 4

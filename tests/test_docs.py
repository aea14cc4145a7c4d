"""The README's and the guides' Python snippets run as written.

Each file's ``python`` blocks run in order in one namespace (a later block may use what
an earlier one defined), in a scratch folder (where ``examples/`` and ``tests/`` are
the repository's), as the main module (``if __name__ == "__main__":`` blocks run). No
block uses top-level ``await``: copied into a script, every snippet runs. A
comment after a ``print(...)`` statement says what it prints: a block whose prints
carry such comments must print exactly those lines. A block after ``<!-- excerpt -->``
is a fragment, not run; one after ``<!-- file: NAME -->`` is written to ``NAME``.
Blocks that call Claude (``AnthropicProvider``) are skipped: tests never reach the
real API.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest
import structlog

import reactor

ROOT = Path(__file__).parent.parent
FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_BLOCK = re.compile(
    r"^(?:<!-- (?P<marker>[^>]*) -->\n)?```(?P<lang>\w+)\n(?P<code>.*?)^```",
    re.DOTALL | re.MULTILINE,
)


def expected_output(code: str) -> list[str]:
    """The comments after ``print(...)`` statements: what each prints (in order)."""
    lines = code.splitlines()
    found = []
    for node in ast.walk(ast.parse(code)):
        if (
            isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Call)
            and getattr(node.value.func, "id", None) == "print"
            and node.end_lineno is not None
        ):
            last = lines[node.end_lineno - 1]
            if "  # " in last:
                found.append((node.lineno, last.split("  # ", 1)[1]))
    return [comment for _, comment in sorted(found)]


def blocks(path: Path) -> list[str]:
    """The runnable Python blocks (a block marked ``<!-- excerpt ... -->`` is not)."""
    return [
        m["code"]
        for m in _BLOCK.finditer(path.read_text())
        if m["lang"] == "python" and not (m["marker"] or "").startswith("excerpt")
    ]


def files(path: Path) -> dict[str, str]:
    """Blocks marked ``<!-- file: NAME -->``: files the snippets read, by name."""
    return {
        m["marker"].removeprefix("file:").strip(): m["code"]
        for m in _BLOCK.finditer(path.read_text())
        if (m["marker"] or "").startswith("file:")
    }


def offline(code: str) -> bool:
    """Whether a block runs without Claude: it never calls ``AnthropicProvider``."""
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Call):
            name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
            if name == "AnthropicProvider":
                return False
    return True


@pytest.mark.parametrize("path", [pytest.param(p, id=p.name) for p in FILES])
def test_snippets_run_and_print_what_they_say(
    path: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for shared in ("examples", "tests"):  # snippets may read the repository's files
        (tmp_path / shared).symlink_to(ROOT / shared)
    for name, content in files(path).items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(content)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))  # snippets import the files they wrote
    monkeypatch.setattr(reactor, "model_prices", dict(reactor.model_prices))
    for name in files(path):  # a module a snippet wrote is imported afresh
        monkeypatch.delitem(sys.modules, Path(name).stem, raising=False)
    namespace: dict[str, object] = {"__name__": "__main__"}
    ran = 0
    for number, code in enumerate(blocks(path), start=1):
        if not offline(code):
            continue
        compiled = compile(code, f"{path.name}#{number}", "exec", dont_inherit=True)
        capsys.readouterr()
        with structlog.testing.capture_logs():  # a run's own log lines are not its output
            exec(compiled, namespace)
        expected = expected_output(code)
        if expected:
            printed = capsys.readouterr().out.splitlines()
            assert printed == expected, f"{path.name} block {number}"
        ran += 1
    assert ran > 0 or not blocks(path)


@pytest.mark.parametrize("path", [pytest.param(p, id=p.name) for p in FILES])
def test_no_snippet_needs_top_level_await(path: Path) -> None:
    for number, code in enumerate(blocks(path), start=1):
        try:
            compile(code, f"{path.name}#{number}", "exec", dont_inherit=True)
        except SyntaxError as exc:
            pytest.fail(f"{path.name} block {number} is not a script: {exc}")


def test_every_guide_is_linked_from_the_readme() -> None:
    readme = (ROOT / "README.md").read_text()
    for guide in sorted((ROOT / "docs").glob("*.md")):
        assert f"docs/{guide.name}" in readme, f"README does not link docs/{guide.name}"

"""The guides' offline snippets run as written (those needing an API key are skipped)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import structlog

import reactor

DOCS = Path(__file__).parent.parent / "docs"
_SNIPPET = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)
_PRINT = re.compile(r"^print\(.*\)  # (.*)$", re.MULTILINE)


def offline_snippets() -> list[object]:
    snippets = []
    for path in sorted(DOCS.glob("*.md")):
        for number, match in enumerate(_SNIPPET.finditer(path.read_text()), start=1):
            code = match.group(1)
            if "AnthropicProvider" not in code:
                snippets.append(pytest.param(code, id=f"{path.stem}-{number}"))
    return snippets


@pytest.mark.parametrize("code", offline_snippets())
def test_offline_snippet_prints_what_its_comments_say(
    code: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # snippets may edit the process-wide price table; give each its own copy
    monkeypatch.setattr(reactor, "model_prices", dict(reactor.model_prices))
    with structlog.testing.capture_logs():  # the run's own log lines are not the output
        exec(compile(code, "<snippet>", "exec", dont_inherit=True), {"__name__": "__main__"})
    assert capsys.readouterr().out.splitlines() == _PRINT.findall(code)

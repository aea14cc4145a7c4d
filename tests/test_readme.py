"""The README as a new user follows it: a fresh clone, then exactly the commands it shows.

Shell blocks after ``<!-- shell: fresh clone -->`` are run in order in one shell, in a
copy of the repository's files with no ``.venv``; Python blocks after ``<!-- file:
NAME -->`` are saved as ``NAME`` first, as the README asks. This bootstraps a
virtualenv of its own (what ``make demo`` does on a fresh clone), so it takes a while.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
README = (ROOT / "README.md").read_text()
_BLOCK = re.compile(
    r"^<!-- (?P<marker>[^>]*) -->\n```(?P<lang>\w+)\n(?P<code>.*?)^```", re.DOTALL | re.MULTILINE
)


def marked(marker: str) -> list[str]:
    return [m["code"] for m in _BLOCK.finditer(README) if m["marker"] == marker]


def saved_files() -> dict[str, str]:
    return {
        m["marker"].removeprefix("file:").strip(): m["code"]
        for m in _BLOCK.finditer(README)
        if m["marker"].startswith("file:")
    }


def fresh_clone(into: Path) -> Path:
    """The repository's files, as a clone has them: tracked (or new), never ignored."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs a git checkout to know the repository's files")
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    for name in filter(None, (entry.decode() for entry in listed)):
        source = ROOT / name
        if source.is_file():
            (into / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, into / name)
    return into


def a_new_shell() -> dict[str, str]:
    """A user's shell: none of this checkout's virtualenv, make or Python settings."""
    venv = str(ROOT / ".venv" / "bin")
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS", "VIRTUAL_ENV", "PYTHONPATH", "PYTHON")
        and not key.startswith(("PYTEST", "REACTOR_"))
    }
    env["PATH"] = os.pathsep.join(
        part for part in env.get("PATH", "").split(os.pathsep) if part != venv
    )
    if shutil.which("python3", path=env["PATH"]) is None:
        env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env["PATH"]])
    return env


def test_the_readme_shows_commands_for_a_fresh_clone() -> None:
    commands = "\n".join(marked("shell: fresh clone"))
    assert "make demo" in commands
    assert ". .venv/bin/activate" in commands
    assert set(saved_files()) == {"quickstart.py", "record.py"}


@pytest.mark.timeout(900)
def test_a_fresh_clone_runs_the_readme_verbatim(tmp_path: Path) -> None:
    clone = fresh_clone(tmp_path / "reactor")
    for name, code in saved_files().items():
        (clone / name).write_text(code)
    script = "set -e\n" + "\n".join(marked("shell: fresh clone"))
    completed = subprocess.run(
        ["bash", "-c", script],
        cwd=clone,
        env=a_new_shell(),
        capture_output=True,
        text=True,
        timeout=870,
    )
    output = completed.stdout + completed.stderr
    assert completed.returncode == 0, output
    assert "Decision: " in completed.stdout  # make demo ran the trading bot
    lines = completed.stdout.splitlines()
    assert "completed buy" in lines
    assert "True" in lines
    assert re.search(r"^Run run_\w+$", completed.stdout, re.MULTILINE)  # reactor show last
    assert lines[-1].startswith("Replay matches run_")  # reactor replay last
    assert "project.license" not in output  # the metadata builds without warnings
    assert "Traceback" not in output


def test_every_example_says_how_to_run_it() -> None:
    section = README.split("\n## Examples\n", 1)[1].split("\n## ", 1)[0]
    entries = section.split("\n* ")[1:]
    examples = sorted(
        path.stem if path.suffix == ".py" else path.name
        for path in (ROOT / "examples").iterdir()
        if not path.name.startswith(("_", ".")) and (path.suffix == ".py" or path.is_dir())
    )
    assert len(entries) == len(examples)
    for name in examples:
        entry = next(entry for entry in entries if f"examples/{name}" in entry)
        assert f"`python -m examples.{name}" in entry, entry


def test_examples_say_make_demo_only_for_what_it_runs() -> None:
    demo = re.search(r"^demo:.*\n\t(.*)$", (ROOT / "Makefile").read_text(), re.MULTILINE)
    assert demo is not None
    for path in sorted((ROOT / "examples").rglob("*.py")):
        text = path.read_text()
        if re.search(r"Run it with ``make demo``", text):
            module = ".".join(path.relative_to(ROOT).with_suffix("").parts[:2])
            assert demo.group(1).endswith(f"-m {module}"), path

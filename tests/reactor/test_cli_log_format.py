"""``--log-format`` of ``reactor serve`` and ``reactor worker``: lines for a person on a
terminal, JSON lines for a machine everywhere else, errors included."""

from __future__ import annotations

import io
import json
import os
import pty
from pathlib import Path

import pytest

from reactor._cli._parser import build_parser
from reactor._cli._service import default_log_format
from tests.reactor.cli_support import cli_env, reactor_on_a_terminal, reactor_process

REFUSED = (
    "refusing to listen on 0.0.0.0 without API tokens; set REACTOR_API_TOKENS='token:user,...' "
    "or --tokens-file, or use --host 127.0.0.1"
)


def test_the_default_is_console_on_a_terminal_and_json_elsewhere(tmp_path: Path) -> None:
    controller, terminal = pty.openpty()
    try:
        with open(terminal, "w") as tty:
            assert default_log_format(tty) == "console"
    finally:
        os.close(controller)
    reading, writing = os.pipe()
    try:
        with open(writing, "w") as pipe:
            assert default_log_format(pipe) == "json"
    finally:
        os.close(reading)
    with (tmp_path / "out.log").open("w") as file:
        assert default_log_format(file) == "json"
    assert default_log_format(io.StringIO()) == "json"
    assert default_log_format(None) == "json"  # no stdout at all (pythonw, a daemon)
    closed = (tmp_path / "closed.log").open("w")
    closed.close()
    assert default_log_format(closed) == "json"


@pytest.mark.parametrize("command", ["serve", "worker"])
def test_log_format_is_json_or_console(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    parser = build_parser()
    app = ["--app", "app:service"] if command == "worker" else []
    assert parser.parse_args([command, *app]).log_format is None  # chosen when it starts
    assert parser.parse_args([command, *app, "--log-format", "json"]).log_format == "json"
    with pytest.raises(SystemExit):
        parser.parse_args([command, *app, "--log-format", "xml"])
    assert "argument --log-format: invalid choice: 'xml'" in capsys.readouterr().err


def test_a_refusal_to_serve_is_a_line_for_a_person_on_a_terminal(tmp_path: Path) -> None:
    args = ("serve", "--host", "0.0.0.0", "--db", f"sqlite:///{tmp_path / 'app.db'}")
    status, drawn = reactor_on_a_terminal(tmp_path, *args)
    assert status == 2
    assert drawn.splitlines() == [f"reactor serve: error: {REFUSED}"]


def test_a_refusal_to_serve_is_a_json_line_off_a_terminal(tmp_path: Path) -> None:
    # serve and worker set up the process's logging and excepthooks as they start: a new
    # process each, as for the terminal above.
    done = reactor_process(
        tmp_path, "serve", "--host", "0.0.0.0", "--db", f"sqlite:///{tmp_path}/a"
    )
    assert done.returncode == 2
    assert done.stderr == ""
    [line] = [json.loads(text) for text in done.stdout.splitlines()]
    assert (line["event"], line["level"], line["logger"]) == (
        "reactor serve: error",
        "error",
        "reactor.cli",
    )
    assert line["error"] == REFUSED


def test_a_worker_that_cannot_start_says_why_in_a_json_line(tmp_path: Path) -> None:
    env = {k: v for k, v in cli_env().items() if k != "REACTOR_REDIS_URL"}
    done = reactor_process(tmp_path, "worker", "--app", "app:service", env=env)
    assert done.returncode == 1
    assert done.stderr == ""
    [line] = [json.loads(text) for text in done.stdout.splitlines()]
    assert (line["event"], line["level"]) == ("reactor worker: error", "error")
    assert line["error"].startswith("REACTOR_REDIS_URL is not set")

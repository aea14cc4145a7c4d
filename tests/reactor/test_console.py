"""ConsoleChannel on a real pseudo-terminal: it asks, takes the typed answer, and Ctrl-C aborts."""

from __future__ import annotations

import os
import pty
import select
import signal
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


class Terminal:
    """A program run on a pseudo-terminal, as a person at a keyboard runs it."""

    def __init__(self, *args: str, cwd: Path) -> None:
        env = {**os.environ, "PYTHONPATH": str(ROOT), "TERM": "xterm-256color", "COLUMNS": "120"}
        pid, fd = pty.fork()
        if pid == 0:  # the child: the terminal is its controlling terminal
            os.chdir(cwd)
            os.execvpe(sys.executable, [sys.executable, *args], env)
        self.pid, self.fd = pid, fd
        self.seen = ""

    def expect(self, text: str, timeout: float = 30) -> str:
        """Read until ``text`` has been drawn."""
        deadline = time.monotonic() + timeout
        while text not in self.seen:
            left = deadline - time.monotonic()
            if left <= 0 or not self._read(left):
                pytest.fail(f"never saw {text!r}; the terminal shows:\n{self.seen}")
        return self.seen

    def type(self, keys: bytes) -> None:
        os.write(self.fd, keys)

    def wait(self, timeout: float = 30) -> int:
        """Read to the end and return the exit status."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self._read(deadline - time.monotonic()):
                break
        for _ in range(100):
            done, status = os.waitpid(self.pid, os.WNOHANG)
            if done:
                os.close(self.fd)
                return os.waitstatus_to_exitcode(status)
            time.sleep(0.05)
        os.kill(self.pid, signal.SIGKILL)
        os.waitpid(self.pid, 0)
        pytest.fail(f"the program did not exit; the terminal shows:\n{self.seen}")

    def _read(self, timeout: float) -> bool:
        ready, _, _ = select.select([self.fd], [], [], max(0.0, timeout))
        if not ready:
            return False
        try:
            chunk = os.read(self.fd, 65536)
        except OSError:  # the program exited and closed the terminal
            return False
        self.seen += chunk.decode(errors="replace").replace("\r\n", "\n")
        return bool(chunk)


def test_the_console_asks_on_the_terminal_and_takes_the_answer(tmp_path: Path) -> None:
    desk = Terminal("-m", "examples.human_approval", "--db", "runs.db", cwd=tmp_path)
    desk.expect("? Refund 120.00 to Ana (damaged: 100% back)?")
    desk.expect("> ")
    desk.type(b"yes\n")
    assert desk.wait() == 0
    assert "answered 'yes' (by user)" in desk.seen
    assert "120.00 is on its way back" in desk.seen
    assert desk.seen.count("? Refund") == 1  # asked once, not again after the answer
    assert "Traceback" not in desk.seen


def test_ctrl_c_aborts_the_run_cleanly_while_it_waits_for_an_answer(tmp_path: Path) -> None:
    desk = Terminal("-m", "examples.human_approval", "--db", "runs.db", cwd=tmp_path)
    desk.expect("> ")
    started = time.monotonic()
    desk.type(b"\x03")  # Ctrl-C: the terminal sends SIGINT
    status = desk.wait(timeout=15)
    assert time.monotonic() - started < 10  # no waiting for Enter
    assert status == 1
    assert "interrupted: aborting the run" in desk.seen
    assert "Run aborted" in desk.seen
    assert "Traceback" not in desk.seen


def test_reactor_run_interactive_answers_from_the_keyboard(tmp_path: Path) -> None:
    (tmp_path / "ask.py").write_text(
        "from reactor import agent, reactive\n"
        "graph = reactive({'pick': agent(ask='Which side?', choices=['buy', 'sell'],"
        " updates='side')}, state={'side': None}, name='picker')\n"
    )
    run = Terminal("-m", "reactor", "run", "ask:graph", "--interactive", cwd=tmp_path)
    run.expect("1) buy  2) sell")
    run.type(b"2\n")
    assert run.wait() == 0
    assert "answered 'sell'" in run.seen
    assert "state: side='sell'" in run.seen

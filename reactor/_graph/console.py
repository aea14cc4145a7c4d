"""ConsoleChannel: a run in the terminal, live, with its questions answered from the keyboard.

::

    result = await graph.run(input=..., provider=p, channels=[ConsoleChannel()])

Each signal worth a line is shown as it happens (agents starting and finishing, state
changes, phases and tasks, answers, the end); a question (``session:prompt``) is asked
on the terminal and the typed answer goes back as ``handle.reply``: a number or the
start of one of its choices, text, or JSON for a typed answer. An answer that does not
fit says why and asks again. Ctrl-C aborts the run (no traceback), and end of input
while a question waits suspends a recorded run (``reactor resume RUN`` continues it)
or aborts one that is not recorded.

Lines are drawn with rich on a terminal when it is installed (the ``cli`` extra), as
plain text elsewhere. Keyboard input is read by a daemon thread, so a process never
waits on the terminal to exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal as signals
import sys
import threading
from collections.abc import Mapping
from typing import Any, TextIO

from reactor._agents.asking import PendingPrompt
from reactor._graph.handle import RunHandle
from reactor._reporting.terminal import clean, rich_console
from reactor._signals.diagnostics import short_repr
from reactor._signals.names import (
    HARNESS_END,
    SESSION_PROMPT,
    SESSION_REPLY,
    SESSION_TIMEOUT,
    TEXT_COMPLETE,
    parse_agent_event,
    parse_state_event,
    reserved_namespace,
)
from reactor._signals.signal import Signal, to_jsonable
from reactor.exceptions import PromptError

__all__ = ["ConsoleChannel"]

_STYLES = {"completed": "green", "failed": "bold red", "cancelled": "yellow", "ask": "bold"}


class ConsoleChannel:
    """Shows a run in the terminal and answers its questions from the keyboard.

    Args:
        stdin: Where answers are read (``sys.stdin``).
        stdout: Where the run is shown (``sys.stdout``).
        plain: Plain text even on a terminal.
    """

    def __init__(
        self, *, stdin: TextIO | None = None, stdout: TextIO | None = None, plain: bool = False
    ) -> None:
        self._stdin = stdin
        self._stdout = stdout
        self._plain = plain
        self._lines: _Lines | None = None

    async def attach(self, handle: RunHandle) -> None:
        """Show the run and answer its prompts until it ends."""
        out = _Out(self._stdout or sys.stdout, plain=self._plain)
        loop = asyncio.get_running_loop()
        interrupted = _on_interrupt(loop, lambda: _interrupt(handle, out))
        try:
            async for signal in handle.signals():
                out.show(signal)
                if signal.name == SESSION_PROMPT and not await self._answer(handle, signal, out):
                    return  # the run was stopped for want of an answer
        finally:
            if interrupted:
                loop.remove_signal_handler(signals.SIGINT)

    async def _answer(self, handle: RunHandle, asked: Signal, out: _Out) -> bool:
        """Ask until the prompt is answered or gone; ``False`` if the run had to stop."""
        prompt_id = asked.payload.get("prompt_id")
        while True:
            prompt = next((p for p in handle.prompts() if p.prompt_id == prompt_id), None)
            if prompt is None:
                return True  # answered elsewhere, timed out, or the run ended
            out.ask(prompt)
            line = await self._read(handle, prompt_id)
            if line is _GONE:
                out.write("\n")
                return True
            if line is None:
                out.write("\n")
                await _end_of_input(handle, prompt, out)
                return False
            if not _is_terminal(self._stdin or sys.stdin):
                out.write(f"{line}\n")  # what a terminal would have echoed
            try:
                handle.reply(prompt.prompt_id, _answer_of(prompt, str(line)), source="user")
            except PromptError as exc:
                out.line(str(exc), style="failed")
            else:
                return True

    async def _read(self, handle: RunHandle, prompt_id: Any) -> object:
        """The next typed line; ``None`` at end of input; ``_GONE`` if the prompt went."""
        if self._lines is None:
            self._lines = _Lines(self._stdin or sys.stdin, asyncio.get_running_loop())
        lines = self._lines
        reading = asyncio.ensure_future(lines.get())
        while not reading.done():
            await asyncio.wait([reading], timeout=0.1)
            if not reading.done() and all(p.prompt_id != prompt_id for p in handle.prompts()):
                reading.cancel()  # a line typed later answers the next question
                return _GONE
        return reading.result()


_GONE = object()


class _Lines:
    """Lines typed on a stream, read by a daemon thread (started on the first question)."""

    def __init__(self, stream: TextIO, loop: asyncio.AbstractEventLoop) -> None:
        self._queue: asyncio.Queue[str | None] = asyncio.Queue()
        thread = threading.Thread(
            target=self._pump, args=(stream, loop), name="reactor console input", daemon=True
        )
        thread.start()

    def _pump(self, stream: TextIO, loop: asyncio.AbstractEventLoop) -> None:
        while True:
            try:
                line = stream.readline()
            except (OSError, ValueError):  # closed under us
                line = ""
            with contextlib.suppress(RuntimeError):  # the loop is gone: nobody reads
                typed = line.rstrip("\r\n") if line else None
                loop.call_soon_threadsafe(self._queue.put_nowait, typed)
            if not line:
                return

    async def get(self) -> str | None:
        return await self._queue.get()


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (OSError, ValueError):
        return False


def _answer_of(prompt: PendingPrompt, line: str) -> Any:
    """What a typed line means for ``prompt``: a choice, JSON for a typed answer, or text."""
    text = line.strip()
    if prompt.choices is not None:
        if text.isdigit() and 1 <= int(text) <= len(prompt.choices):
            return prompt.choices[int(text) - 1]
        exact = [c for c in prompt.choices if c.lower() == text.lower()]
        starting = [c for c in prompt.choices if text and c.lower().startswith(text.lower())]
        found = exact or starting
        return found[0] if len(found) == 1 else text
    if prompt.schema is not None:
        try:
            return json.loads(text)
        except ValueError:
            return text
    return line


async def _end_of_input(handle: RunHandle, prompt: PendingPrompt, out: _Out) -> None:
    if handle.recorded:
        out.line(
            f"end of input: nobody is left to answer {prompt.prompt_id}; the run is suspended "
            f"while it waits. Continue it with: reactor resume {handle.run_id}",
            style="cancelled",
        )
        await handle.suspend()
    else:
        out.line(
            f"end of input: nobody is left to answer {prompt.prompt_id}; aborting the run.",
            style="cancelled",
        )
        handle.abort("end of input: nobody is left to answer")


def _interrupt(handle: RunHandle, out: _Out) -> None:
    if not handle.done:
        out.line("interrupted: aborting the run", style="cancelled")
        handle.abort("interrupted from the terminal")


def _on_interrupt(loop: asyncio.AbstractEventLoop, handler: Any) -> bool:
    """Make Ctrl-C call ``handler`` while attached (only possible in the main thread)."""
    try:
        loop.add_signal_handler(signals.SIGINT, handler)
    except (NotImplementedError, RuntimeError, ValueError):
        return False
    return True


class _Out:
    """Lines on the terminal: rich when it can, plain text otherwise."""

    def __init__(self, stream: TextIO, *, plain: bool) -> None:
        self.stream = stream
        self.console = rich_console(stream, plain=plain)

    def line(self, text: str, *, style: str | None = None) -> None:
        if self.console is None:
            print(text, file=self.stream, flush=True)
        else:
            from rich.text import Text

            self.console.print(Text(text, style=_STYLES.get(style or "", "")), soft_wrap=True)

    def ask(self, prompt: PendingPrompt) -> None:
        self.line(f"? {clean(prompt.question, newlines=True)}", style="ask")
        if prompt.choices is not None:
            options = "  ".join(f"{n}) {clean(c)}" for n, c in enumerate(prompt.choices, 1))
            self.line(f"  {options}")
        elif prompt.schema is not None:
            self.line(f"  (JSON matching: {short_repr(prompt.schema, 200)})")
        self.write("> ")

    def write(self, text: str) -> None:
        self.stream.write(text)
        self.stream.flush()

    def show(self, signal: Signal) -> None:
        """One line for a signal worth one; nothing for the rest."""
        text, style = _describe(signal)
        if text:
            self.line(text, style=style)


def _describe(signal: Signal) -> tuple[str, str | None]:
    name, payload = signal.name, signal.payload
    data: Mapping[str, Any] = payload if isinstance(payload, Mapping) else {}
    agent = parse_agent_event(name)
    if agent is not None:
        return _agent_line(*agent, data)
    state = parse_state_event(name)
    if state is not None and state[1] == "changed":
        new = short_repr(to_jsonable(data.get("new")), 80)
        return f"  {clean(state[0])} <- {clean(new)}  ({clean(data.get('actor'))})", None
    if name.startswith(("phase:", "task:")):
        return _span_line(name, data)
    if name == TEXT_COMPLETE:
        return f"  {clean(signal.source)}: {clean(short_repr(data.get('content'), 100))}", None
    if name == SESSION_REPLY:
        answer = short_repr(to_jsonable(data.get("answer")), 80)
        return f"  answered {clean(answer)} (by {clean(signal.source)})", "completed"
    if name == SESSION_TIMEOUT:
        return f"  nobody answered {clean(data.get('prompt_id'))} in time", "cancelled"
    if name == HARNESS_END:
        status = data.get("status")
        style = "completed" if status in ("completed", "ended") else "failed"
        return f"run {status}: {clean(data.get('reason'))}", style
    if reserved_namespace(name) is None:
        return f"· {clean(name)} {clean(short_repr(to_jsonable(payload), 80))}", None
    return "", None


def _agent_line(who: str, event: str, data: Mapping[str, Any]) -> tuple[str, str | None]:
    """An agent starting or finishing (its decisions are not shown)."""
    if event == "activated":
        return f"▶ {clean(who)}", None
    if event == "completed":
        return f"✓ {clean(who)} ({data.get('duration_ms')} ms)", "completed"
    if event == "failed":
        error = data.get("error") or {}
        return f"✗ {clean(who)}: {error.get('type')}: {clean(error.get('message'))}", "failed"
    if event == "cancelled":
        return f"⊘ {clean(who)} cancelled: {clean(data.get('reason'))}", "cancelled"
    return "", None


def _span_line(name: str, data: Mapping[str, Any]) -> tuple[str, str | None]:
    """A phase or a task starting, or ending after its duration."""
    kind, _, event = name.partition(":")
    label = f"{kind} {clean(data.get('name'))}"
    if event == "start":
        return f"  {label} ...", None
    duration = f"{data.get('duration_ms')} ms"
    if event == "failed":
        error = data.get("error") or {}
        return f"  {label} failed after {duration}: {clean(error.get('message'))}", "failed"
    return f"  {label} done ({duration})", "completed"

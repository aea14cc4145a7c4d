"""Questions to people: ``ctx.ask``, ``agent(ask=...)``, and the replies that answer them.

Asking emits ``session:prompt {prompt_id, agent, question, choices, schema}`` and waits;
the run stays in flight (a pending prompt is work in progress, so the run does not end
at quiescence) and its store shows it ``waiting``. A reply (``handle.reply``, a
``session:reply`` posted to the run's store, or a replayed one) is validated against
the question (one of its ``choices``, or its ``output`` type; plain text otherwise): a
valid one is emitted as ``session:reply {prompt_id, answer}`` and resumes the asking
code, an invalid one raises :class:`~reactor.ReplyValidationError` and leaves the
prompt pending.

Prompt ids are ``prompt_<seq>``, the ``seq`` of the prompt's own signal, so a replay
asks the same ids. A resumed run asks nothing twice: its in-flight activations run
again, and their questions take the recorded prompt (and its recorded reply, if any).
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import functools
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pydantic

from reactor._signals.diagnostics import log
from reactor._signals.names import SESSION_PROMPT, SESSION_REPLY, SESSION_TIMEOUT
from reactor.exceptions import PromptNotFoundError, PromptTimeoutError, ReplyValidationError

if TYPE_CHECKING:
    from reactor._signals.bus import SignalBus
    from reactor._signals.signal import Signal

__all__ = ["Asking", "PendingPrompt", "RecordedPrompt", "recorded_prompt"]


@dataclasses.dataclass(frozen=True)
class PendingPrompt:
    """A question a run is waiting on a person to answer (``handle.prompts()``).

    Attributes:
        prompt_id: What to reply to: ``handle.reply(prompt_id, answer)``.
        agent: The agent that asked.
        question: The rendered question.
        choices: The allowed answers, or ``None``.
        schema: The JSON schema of a typed answer (``output=``), or ``None``.
        asked_at: When it was asked (UTC).
    """

    prompt_id: str
    agent: str
    question: str
    choices: tuple[str, ...] | None
    schema: dict[str, Any] | None
    asked_at: dt.datetime

    @classmethod
    def of(cls, signal: Signal) -> PendingPrompt:
        """The prompt a ``session:prompt`` signal asked."""
        payload = signal.payload
        choices = payload.get("choices")
        return cls(
            prompt_id=str(payload["prompt_id"]),
            agent=str(payload["agent"]),
            question=str(payload["question"]),
            choices=tuple(choices) if choices is not None else None,
            schema=payload.get("schema"),
            asked_at=dt.datetime.fromtimestamp(signal.timestamp, dt.UTC),
        )


@dataclasses.dataclass(frozen=True)
class RecordedPrompt:
    """A resumed activation's question, as its log recorded it (asked before the stop)."""

    prompt: PendingPrompt
    answered: bool = False
    answer: Any = None
    timed_out: bool = False


class _Question:
    """A pending prompt: what it accepts, and who waits for its answer."""

    __slots__ = ("adapter", "future", "held", "prompt")

    def __init__(self, prompt: PendingPrompt, adapter: pydantic.TypeAdapter[Any] | None) -> None:
        self.prompt = prompt
        self.adapter = adapter
        self.future: asyncio.Future[Any] | None = None  # None until code waits on it
        self.held: tuple[Any, str, str | None] | None = None  # early reply, see Asking.reply


class Asking:
    """The prompts of one run: asked, pending, answered.

    Args:
        bus: The run's bus.
        run_id: The run's id (for messages).
        note_delivery: Called with an inbox message's id just before the reply it
            carries is emitted, so that the store records the delivery with it.
        unanswered: During a replay, given a question asked (its id, its agent), the
            error to raise at once when the recording has no answer to it: a replay
            never waits for input that was not recorded.
    """

    def __init__(
        self,
        bus: SignalBus,
        run_id: str,
        note_delivery: Callable[[str], None],
        unanswered: Callable[[str, str], Exception | None] | None = None,
    ) -> None:
        self._bus = bus
        self._run_id = run_id
        self._note_delivery = note_delivery
        self._unanswered = unanswered
        self._questions: dict[str, _Question] = {}

    def pending(self) -> list[PendingPrompt]:
        """The prompts waiting for an answer, oldest first."""
        return [question.prompt for question in self._questions.values()]

    def preload(self, prompts: Sequence[PendingPrompt]) -> None:
        """Prompts a resumed run was waiting on: pending again, before anything runs."""
        for prompt in prompts:
            self._questions[prompt.prompt_id] = _Question(prompt, None)

    async def ask(
        self,
        agent: str,
        question: str,
        *,
        choices: Sequence[str] | None = None,
        output: Any = None,
        timeout: float | None = None,  # noqa: ASYNC109 - it also emits session:timeout
        recorded: RecordedPrompt | None = None,
    ) -> Any:
        """Ask ``question`` and return the validated answer.

        Raises:
            PromptTimeoutError: Nobody answered within ``timeout`` seconds.
            ReplyValidationError: A recorded answer no longer fits (resume only).
        """
        options = _choices(choices)
        adapter = _adapter(output) if output is not None else None
        if recorded is not None:
            if recorded.answered:
                return self._validate(recorded.prompt, options, adapter, recorded.answer)[0]
            if recorded.timed_out:
                raise _timeout_error(recorded.prompt.prompt_id, timeout)
            prompt = recorded.prompt
            asked = prompt.asked_at.timestamp()
        else:
            prompt = PendingPrompt(
                prompt_id=f"prompt_{self._bus.last_seq + 1}",
                agent=agent,
                question=question,
                choices=options,
                schema=adapter.json_schema() if adapter is not None else None,
                asked_at=dt.datetime.now(dt.UTC),
            )
            asked = time.time()
        entry = _Question(prompt, adapter)
        entry.future = asyncio.get_running_loop().create_future()
        preloaded = self._questions.get(prompt.prompt_id)
        self._questions[prompt.prompt_id] = entry
        if recorded is None:
            asked_signal = self._bus.emit(
                SESSION_PROMPT,
                {
                    "prompt_id": prompt.prompt_id,
                    "agent": agent,
                    "question": question,
                    "choices": list(options) if options is not None else None,
                    "schema": prompt.schema,
                },
                source=agent,
            )
            # The time the log says it was asked: what a resumed run shows again.
            stamp = dt.datetime.fromtimestamp(asked_signal.timestamp, dt.UTC)
            entry.prompt = prompt = dataclasses.replace(prompt, asked_at=stamp)
            error = None if self._unanswered is None else self._unanswered(prompt.prompt_id, agent)
            if error is not None:  # a replay that would wait for what was never recorded
                del self._questions[prompt.prompt_id]
                raise error
        elif preloaded is not None and preloaded.held is not None:
            answer, source, message_id = preloaded.held
            try:
                self.reply(prompt.prompt_id, answer, source=source, message_id=message_id)
            except ReplyValidationError as exc:
                log(
                    "reactor.run",
                    "warning",
                    "reply rejected",
                    prompt=prompt.prompt_id,
                    error=str(exc),
                )
        return await self._wait(entry, agent, timeout, asked)

    def reply(
        self, prompt_id: str, answer: Any, *, source: str = "user", message_id: str | None = None
    ) -> None:
        """Answer a pending prompt.

        Raises:
            PromptNotFoundError: No pending prompt has that id.
            ReplyValidationError: The answer does not fit; the prompt stays pending.
        """
        entry = self._questions.get(prompt_id)
        if entry is None:
            pending = ", ".join(self._questions) or "none"
            raise PromptNotFoundError(
                f"Run {self._run_id} has no pending prompt {prompt_id!r} (pending: "
                f"{pending}); it was never asked, or was answered or timed out already. "
                "handle.prompts() lists the pending ones.",
                prompt_id=prompt_id,
            )
        prompt = entry.prompt
        if entry.future is None:
            # Asked before the run stopped; its question has not been asked again yet,
            # so what it accepts is not known: hold the reply until it is.
            if prompt.choices is not None:
                self._validate(prompt, prompt.choices, None, answer)
            entry.held = (answer, source, message_id)
            return
        value, data = self._validate(prompt, prompt.choices, entry.adapter, answer)
        del self._questions[prompt_id]
        if message_id is not None:
            self._note_delivery(message_id)
        self._bus.publish(SESSION_REPLY, {"prompt_id": prompt_id, "answer": data}, source, None, 0)
        if not entry.future.done():
            entry.future.set_result(value)

    def close(self) -> None:
        """The run ended: nothing is pending any more."""
        self._questions.clear()

    async def _wait(
        self,
        entry: _Question,
        agent: str,
        timeout: float | None,  # noqa: ASYNC109 - see ask()
        asked: float,
    ) -> Any:
        future = entry.future
        assert future is not None
        prompt_id = entry.prompt.prompt_id
        try:
            if timeout is None:
                return await future
            remaining = max(0.0, asked + timeout - time.time())
            async with asyncio.timeout(remaining):
                return await future
        except TimeoutError:
            if self._questions.get(prompt_id) is not entry:
                raise
            del self._questions[prompt_id]
            self._bus.emit(SESSION_TIMEOUT, {"prompt_id": prompt_id}, source=agent)
            raise _timeout_error(prompt_id, timeout) from None
        finally:
            if self._questions.get(prompt_id) is entry:  # cancelled while waiting
                del self._questions[prompt_id]

    def _validate(
        self,
        prompt: PendingPrompt,
        choices: tuple[str, ...] | None,
        adapter: pydantic.TypeAdapter[Any] | None,
        answer: Any,
    ) -> tuple[Any, Any]:
        """``(value for the asking code, JSON data for the log)``, or raise."""
        if choices is not None:
            if answer not in choices:
                listed = ", ".join(repr(choice) for choice in choices)
                raise ReplyValidationError(
                    f"Prompt {prompt.prompt_id} takes one of {listed}; got {answer!r}. "
                    "Reply again with one of them.",
                    prompt_id=prompt.prompt_id,
                )
            return answer, answer
        if adapter is not None:
            try:
                value = adapter.validate_python(answer)
            except pydantic.ValidationError as exc:
                problems = "; ".join(
                    f"{'.'.join(str(p) for p in e['loc']) or '(root)'}: {e['msg']}"
                    for e in exc.errors(include_url=False)[:3]
                )
                raise ReplyValidationError(
                    f"Prompt {prompt.prompt_id} takes an answer matching its schema; "
                    f"{problems}. Reply again with a fitting answer.",
                    prompt_id=prompt.prompt_id,
                ) from exc
            return value, adapter.dump_python(value, mode="json")
        if not isinstance(answer, str):
            raise ReplyValidationError(
                f"Prompt {prompt.prompt_id} takes text; got {type(answer).__name__} "
                f"{answer!r}. Reply with a string.",
                prompt_id=prompt.prompt_id,
            )
        return answer, answer


def _choices(choices: Sequence[str] | None) -> tuple[str, ...] | None:
    if choices is None:
        return None
    if isinstance(choices, str) or not all(isinstance(c, str) for c in choices) or not choices:
        raise ValueError(f"choices must be a non-empty list of strings, got {choices!r}.")
    return tuple(choices)


@functools.lru_cache(maxsize=256)
def _adapter(output: Any) -> pydantic.TypeAdapter[Any]:
    """A validator of ``output`` answers (made once per type: it is costly to build)."""
    return pydantic.TypeAdapter(output)


def _timeout_error(prompt_id: str, timeout: float | None) -> PromptTimeoutError:
    return PromptTimeoutError(
        f"Nobody answered prompt {prompt_id} within {timeout} seconds; catch "
        "PromptTimeoutError to go on without an answer, or ask with a longer timeout.",
        prompt_id=prompt_id,
    )


def recorded_prompt(
    prompt: Signal, outcome: Mapping[str, Any] | None, *, timed_out: bool
) -> RecordedPrompt:
    """A :class:`RecordedPrompt` from a log: the prompt, its reply's payload or timeout."""
    return RecordedPrompt(
        PendingPrompt.of(prompt),
        answered=outcome is not None,
        answer=outcome.get("answer") if outcome is not None else None,
        timed_out=timed_out,
    )

"""One model call from inside a node: build the request, stream it, keep the answer.

Both executors call models through here, so a node's provider requests are the same
in both (the node id is the request's ``agent``, which is how a
``ScriptedProvider({"node_id": [...]})`` scripts it).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import Any

import pydantic

from reactor import End, Message, ProviderError, ProviderRequest, TextComplete, TextDelta, Tool
from reactor.typing import Provider

__all__ = ["Reply", "ask"]


@dataclasses.dataclass(frozen=True)
class Reply:
    """What a model answered: the output (text, or JSON data), its text, token usage."""

    output: Any
    text: str
    usage: dict[str, int]


async def ask(
    provider: Provider,
    *,
    agent: str,
    prompt: str,
    system: str | None = None,
    output_schema: dict[str, Any] | None = None,
    output: type[pydantic.BaseModel] | None = None,
    output_retries: int = 0,
    options: Mapping[str, Any] | None = None,
    tools: Sequence[Tool] = (),
    before_tool: Any = None,
    after_tool: Any = None,
) -> Reply:
    """Ask ``provider`` once (plus output retries); return its :class:`Reply`.

    With ``output`` (a pydantic model), an answer that does not validate is sent back
    with the error, up to ``output_retries`` times, and the reply's output is the
    validated model.

    Raises:
        ProviderError: The stream did not end with an ``End`` event.
        pydantic.ValidationError: The answer never matched ``output``.
    """
    messages = [Message("user", prompt)]
    schema = output.model_json_schema() if output is not None else output_schema
    for attempt in range(output_retries + 1):
        request = ProviderRequest.build(
            agent=agent,
            system=system,
            prompt=prompt,
            messages=messages,
            output_schema=schema,
            tools=tools,
            options=options,
            before_tool=before_tool,
            after_tool=after_tool,
        )
        reply = await _stream(provider, request)
        if output is None:
            return reply
        try:
            return dataclasses.replace(reply, output=_validate(output, reply.output))
        except pydantic.ValidationError as exc:
            if attempt == output_retries:
                raise
            messages = [
                *messages,
                Message("assistant", reply.text),
                Message("user", f"Your answer did not match the schema: {exc}. Reply again."),
            ]
    raise AssertionError("unreachable")  # pragma: no cover


def _validate(model: type[pydantic.BaseModel], raw: Any) -> pydantic.BaseModel:
    if isinstance(raw, model):
        return raw
    if isinstance(raw, str):
        return model.model_validate_json(raw)
    return model.model_validate(raw)


async def _stream(provider: Provider, request: ProviderRequest) -> Reply:
    deltas: list[str] = []
    complete: list[str] = []
    end: End | None = None
    events = provider.stream(request)
    try:
        async for event in events:
            if isinstance(event, TextDelta):
                deltas.append(event.content)
            elif isinstance(event, TextComplete):
                complete.append(event.content)
            elif isinstance(event, End):
                end = event
    finally:
        close = getattr(events, "aclose", None)
        if close is not None:
            await close()
    if end is None:
        raise ProviderError(
            f"Provider {type(provider).__name__} finished without an End event for "
            f"{request.agent!r}; a stream must end with End(output=...).",
            agent=request.agent,
        )
    if isinstance(end.output, str):
        text = end.output
    else:
        text = "".join(complete) or "".join(deltas) or json.dumps(end.output, default=str)
    return Reply(end.output, text, end.usage.to_dict())

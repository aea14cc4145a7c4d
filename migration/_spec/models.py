"""The pieces of a FlowSpec, as frozen pydantic models: policies, nodes and edges.

:class:`~migration.FlowSpec` (in ``spec``) holds them; ``load`` builds them from a
file's mappings. Field names are Python's, aliases the file's (``maxAttempts``,
``forEach``, ...); both are accepted, and dumps use the file's.
"""

from __future__ import annotations

from typing import Any, Literal

import pydantic
from pydantic import Field

from reactor import Agent

__all__ = [
    "AGENT_TYPE",
    "FOREACH_TYPE",
    "LLM_TYPES",
    "EachSpec",
    "EdgeSpec",
    "FlowPolicy",
    "Model",
    "NodePolicy",
    "NodeSpec",
    "RetryPolicy",
    "StateSpec",
]

AGENT_TYPE = "reactor.agent"
"""The node type of an agent from an edge-based Python definition."""

LLM_TYPES = ("claude.agent", "anthropic.text")
"""The node types that ask a model (``anthropic.text`` is the older name)."""

FOREACH_TYPE = "control.foreach"
"""The node type that runs its ``body`` nodes once per item of a list."""


class Model(pydantic.BaseModel):
    """Frozen, aliases and names both accepted, unknown keys left to the loader."""

    model_config = pydantic.ConfigDict(
        frozen=True,
        extra="ignore",
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
        arbitrary_types_allowed=True,
    )


class RetryPolicy(Model):
    """``policy.retry``: how many attempts a node gets, and the pause between them."""

    max_attempts: int = Field(default=1, ge=1, alias="maxAttempts")
    backoff_ms: int = Field(default=0, ge=0, alias="backoffMs")


class NodePolicy(Model):
    """A node's ``policy``: retries, a timeout per attempt, and ``continueOnError``."""

    retry: RetryPolicy = RetryPolicy()
    timeout_ms: int | None = Field(default=None, gt=0, alias="timeoutMs")
    continue_on_error: bool = Field(default=False, alias="continueOnError")


class NodeSpec(Model):
    """One node: ``id``, ``type``, ``input`` (bindings allowed), ``config``, ``when``, ``policy``.

    ``when`` is a ``WhenExpr`` mapping or an expression string. ``agent`` holds the
    agent of a node that comes from an edge-based Python definition (its ``type``
    is then ``"reactor.agent"``). ``schema_files`` names the schema files the loader
    read into the node (``outputSchemaFile``): the dotted key of the schema it holds
    (``input.options.outputSchema``) and the file's path, so that the generated
    Python reads the file rather than a copy.
    """

    id: str
    type: str
    input: dict[str, Any] = {}
    config: dict[str, Any] = {}
    when: dict[str, Any] | str | None = None
    policy: NodePolicy = NodePolicy()
    # Typed Any: pydantic would otherwise try to build a schema for the Agent dataclass.
    agent: Any = Field(default=None, exclude=True, repr=False)
    schema_files: dict[str, str] = Field(default_factory=dict, exclude=True, repr=False)

    @pydantic.field_validator("agent")
    @classmethod
    def _is_agent(cls, value: Any) -> Agent | None:
        if value is not None and not isinstance(value, Agent):
            raise ValueError(f"agent must be a reactor agent, got {value!r}")
        return value


class EachSpec(Model):
    """An edge's ``forEach``: its target runs once per item of ``in``, bound to ``as``.

    ``in`` is a list or a binding that gives one (``"{{ plan.tasks }}"``);
    ``concurrency`` runs up to that many items at once (default: one after another).
    """

    items: Any = Field(alias="in")
    name: str = Field(default="item", alias="as")
    concurrency: int | None = Field(default=None, ge=1)


class EdgeSpec(Model):
    """An edge ``from`` -> ``to``: ``forward`` (default) or ``loop`` (needs ``maxIterations``).

    A forward edge may carry ``forEach``: its target then runs once per item.
    """

    source: str = Field(alias="from")
    target: str = Field(alias="to")
    when: dict[str, Any] | str | None = None
    type: Literal["forward", "loop"] = "forward"
    max_iterations: int | None = Field(default=None, ge=1, alias="maxIterations")
    for_each: EachSpec | None = Field(default=None, alias="forEach")

    @property
    def key(self) -> str:
        """``"from->to"``: how messages and the run's bookkeeping name the edge."""
        return f"{self.source}->{self.target}"


class FlowPolicy(Model):
    """The flow's ``policy``: ``failFast`` (default true) stops the flow at the first failure."""

    fail_fast: bool = Field(default=True, alias="failFast")


class StateSpec(Model):
    """The flow's ``state``: ``initial`` is the state a run starts from.

    Nodes read it as ``state.<key>`` in bindings and conditions, and write it through
    their node context (``ctx.set_state``, or a ``state.set`` node).
    """

    initial: dict[str, Any] = {}

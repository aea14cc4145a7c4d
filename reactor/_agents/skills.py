"""Skills: instructions kept in a ``SKILL.md`` file and added to an agent's system prompt.

A skill is a folder with a ``SKILL.md``: YAML front matter with its ``name`` and
``description``, then the instructions in Markdown::

    ---
    name: risk
    description: How to rate the risk of a trade.
    ---
    Rate risk as low, medium or high. ...

``Skill("skills/risk")`` reads it at once, so a missing file or malformed front matter
is an error where the agent is defined, not when it first runs.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from pathlib import Path

from reactor.exceptions import AgentConfigError

__all__ = ["Skill", "system_with_skills"]

_FENCE = "---"


@dataclasses.dataclass(frozen=True, init=False)
class Skill:
    """A skill loaded from ``path/SKILL.md`` (or from the ``SKILL.md`` file itself).

    Attributes:
        path: The skill's folder.
        name: From the front matter.
        description: From the front matter: when the skill applies.
        instructions: The Markdown after the front matter.

    Raises:
        AgentConfigError: There is no ``SKILL.md`` there, or its front matter is missing,
            is not YAML, or lacks ``name`` or ``description``.
    """

    path: Path
    name: str
    description: str
    instructions: str

    def __init__(self, path: str | os.PathLike[str]) -> None:
        given = Path(path)
        file = given if given.name == "SKILL.md" else given / "SKILL.md"
        try:
            text = file.read_text(encoding="utf-8")
        except OSError as exc:
            raise AgentConfigError(
                f"Skill {str(given)!r} has no readable SKILL.md ({exc.strerror or exc}): a "
                "skill is a folder holding a SKILL.md with front matter (name, description) "
                "and instructions."
            ) from None
        name, description, instructions = _parse(text, file)
        object.__setattr__(self, "path", file.parent)
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "description", description)
        object.__setattr__(self, "instructions", instructions)

    def text(self) -> str:
        """The skill as it appears in the system prompt."""
        head = f"## Skill: {self.name}\n\n{self.description}"
        return f"{head}\n\n{self.instructions}" if self.instructions else head


def _parse(text: str, file: Path) -> tuple[str, str, str]:
    lines = text.lstrip("\ufeff").splitlines()
    fix = (
        "Start it with front matter between '---' lines, e.g.\n---\nname: risk\n"
        "description: How to rate the risk of a trade.\n---"
    )
    if not lines or lines[0].strip() != _FENCE:
        raise AgentConfigError(f"Skill file {str(file)!r} has no front matter. {fix}")
    try:
        end = next(i for i in range(1, len(lines)) if lines[i].strip() == _FENCE)
    except StopIteration:
        raise AgentConfigError(
            f"Skill file {str(file)!r} does not close its front matter with '---'. {fix}"
        ) from None
    import yaml  # only when a skill file is read: most programs have none

    try:
        meta = yaml.safe_load("\n".join(lines[1:end])) or {}
    except yaml.YAMLError as exc:
        problem = str(exc).splitlines()[0]
        raise AgentConfigError(
            f"Skill file {str(file)!r} has front matter that is not valid YAML ({problem}). {fix}"
        ) from None
    if not isinstance(meta, dict):
        raise AgentConfigError(
            f"Skill file {str(file)!r} has front matter that is not a mapping. {fix}"
        )
    missing = [
        key
        for key in ("name", "description")
        if not isinstance(meta.get(key), str) or not meta[key].strip()
    ]
    if missing:
        raise AgentConfigError(
            f"Skill file {str(file)!r} lacks {' and '.join(missing)} in its front matter. {fix}"
        )
    return meta["name"].strip(), meta["description"].strip(), "\n".join(lines[end + 1 :]).strip()


def system_with_skills(system: str | None, skills: Sequence[Skill]) -> str | None:
    """The system prompt with the skills' text after it."""
    if not skills:
        return system
    parts = [system] if system else []
    parts.extend(skill.text() for skill in skills)
    return "\n\n".join(parts)

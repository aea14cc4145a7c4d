"""A flow's string read into a template: text, ``{{ bindings }}`` and ``{% blocks %}``.

Bindings are the first dialect's paths (``{{path}}``, ``{{?path}}``, ``{{path |
default:<json>}}``) or expressions of the later one (``{{ review.score >= 0.5 }}``);
:mod:`migration._expressions.bindings` says what they mean and renders them.

Prompts of the kernel's flows were also written with Jinja's blocks around their
bindings::

    {% if state.reviewFeedback %}
    Feedback: {{ state.reviewFeedback.feedback }}
    {% for issue in state.reviewFeedback.issues %}
    - {{ issue }}
    {% endfor %}
    {% else %}
    This is the first iteration.
    {% endif %}

The statements read are ``if`` / ``elif`` / ``else`` / ``endif``, ``for NAME in LIST``
/ ``else`` / ``endfor``, and comments ``{# ... #}``; a ``-`` inside a tag's braces
(``{%-``, ``-%}``) strips the whitespace before or after it, as in Jinja, and
otherwise the text around tags stays as it is (Jinja's defaults). Conditions and lists
are expressions of the flow's dialect (:mod:`migration._expressions.expr`), as ``when``
conditions are. Any other statement, an unclosed block or a stray end is an error
naming the line, found when the flow is loaded. Each string is read once (cached).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
from typing import Any

from migration._expressions.expr import Expr, ExpressionError, parse
from migration._expressions.values import clip

__all__ = [
    "MAX_BLOCKS",
    "Binding",
    "Choice",
    "Each",
    "Part",
    "Template",
    "has_blocks",
    "parse_template",
]

_BINDING = re.compile(r"\{\{(.*?)\}\}(?!\})", re.DOTALL)
_PATH = re.compile(r"^[A-Za-z_][\w-]*(?:\.[\w-]+)*$")
_LITERALS = ("true", "false", "null")
_DEFAULT = re.compile(r"^default\s*:\s*(.*)$", re.DOTALL)


@dataclasses.dataclass(frozen=True, slots=True)
class Binding:
    """One ``{{ ... }}``: a path (strict, optional or with a default) or an expression."""

    path: str
    optional: bool = False
    has_default: bool = False
    default: Any = None
    expr: Expr | None = None  # an expression binding (then ``path`` is its text)

    @property
    def source(self) -> str:
        if self.expr is not None:
            return f"{{{{ {self.path} }}}}"
        if self.has_default:
            return f"{{{{{self.path} | default:{json.dumps(self.default)}}}}}"
        return f"{{{{{'?' if self.optional else ''}{self.path}}}}}"


@dataclasses.dataclass(frozen=True, slots=True)
class Template:
    """A string read: its parts, and whether it is one binding alone (its value's type)."""

    parts: tuple[Part, ...]
    single: bool  # the whole (stripped) string is one binding


@functools.lru_cache(maxsize=4096)
def parse_template(text: str) -> Template:
    """Read a string into text, bindings and blocks.

    Raises:
        ValueError: A malformed binding or block (a block's message names its line).
    """
    if has_blocks(text):
        return Template(_parse_blocks(text), single=False)
    parts: list[Part] = []
    last = 0
    for match in _BINDING.finditer(text):
        if match.start() > last:
            parts.append(text[last : match.start()])
        parts.append(parse_binding(match.group(1)))
        last = match.end()
    if last < len(text):
        parts.append(text[last:])
    bindings = [p for p in parts if isinstance(p, Binding)]
    single = len(bindings) == 1 and all(
        isinstance(p, str) and not p.strip() for p in parts if not isinstance(p, Binding)
    )
    return Template(tuple(parts), single)


def parse_binding(raw: str) -> Binding:
    """What ``{{ raw }}`` holds; ``ValueError`` when it is neither a path nor an expression."""
    path, bar, rest = raw.partition("|")
    path = path.strip()
    optional = path.startswith("?")
    if optional:
        path = path[1:].strip()
    if not bar and not optional and (not _PATH.match(path) or path in _LITERALS):
        return _expression(raw)
    if not _PATH.match(path):
        raise ValueError(
            f"{{{{{clip(raw)}}}}} is not a binding: write {{{{path}}}}, {{{{?path}}}} or "
            "{{path | default:<json>}}, with a dotted path such as flow.input.name or "
            "node.key"
        )
    if not bar:
        return Binding(path, optional)
    found = _DEFAULT.match(rest.strip())
    if found is None:
        raise ValueError(
            f"{{{{{clip(raw)}}}}} uses an unknown filter {rest.strip()!r}: the only filter is "
            'default:<json>, e.g. {{path | default:"none"}}'
        )
    literal = found.group(1).strip()
    try:
        default = json.loads(literal)
    except json.JSONDecodeError:
        raise ValueError(
            f"{{{{{clip(raw)}}}}} has a default that is not JSON: {literal!r}; quote strings "
            'as in default:"text", or use a number, true, false, null, [...] or {...}'
        ) from None
    return Binding(path, optional, True, default)


def _expression(raw: str) -> Binding:
    text = raw.strip()
    try:
        expr = parse(text)
    except ExpressionError as exc:
        raise ValueError(
            f"{{{{{clip(raw)}}}}} is neither a path nor an expression: {exc}. Write {{{{path}}}}, "
            "{{?path}}, {{path | default:<json>}}, or an expression such as "
            "{{ node.score >= 0.5 }}"
        ) from None
    return Binding(text, expr=expr)


MAX_BLOCKS = 64
"""How deep blocks may nest in one string."""

_TAG = re.compile(
    r"(?P<binding>\{\{.*?\}\}(?!\}))"
    r"|(?P<block>\{%(?P<lstrip>-?)(?P<statement>.*?)(?P<rstrip>-?)%\})"
    r"|(?P<comment>\{#(?P<clstrip>-?).*?(?P<crstrip>-?)#\})",
    re.DOTALL,
)
_FOR = re.compile(r"^for\s+(?P<name>[A-Za-z_][A-Za-z0-9_]*)\s+in\s+(?P<items>.+)$", re.DOTALL)
_SUPPORTED = (
    "{% if %}, {% elif %}, {% else %}, {% endif %}, {% for x in list %}, {% endfor %} "
    "and {# comments #}"
)


@dataclasses.dataclass(frozen=True, slots=True)
class Choice:
    """``{% if %}``: the first branch whose condition holds (``None``: ``else``)."""

    branches: tuple[tuple[Expr | None, tuple[str | Binding | Choice | Each, ...]], ...]


@dataclasses.dataclass(frozen=True, slots=True)
class Each:
    """``{% for name in items %}``: ``body`` once per item, ``empty`` when there is none."""

    name: str
    items: Expr
    body: tuple[str | Binding | Choice | Each, ...]
    empty: tuple[str | Binding | Choice | Each, ...] = ()


Part = str | Binding | Choice | Each
"""A piece of a template."""


def has_blocks(text: str) -> bool:
    """Whether ``text`` may hold a block or a comment (``{%`` or ``{#``)."""
    return "{%" in text or "{#" in text


@dataclasses.dataclass
class _Open:
    """A block being read: its kind, the line it opened on, and what is read so far."""

    kind: str  # "if" or "for"
    line: int
    source: str
    branches: list[tuple[Expr | None, list[Part]]]
    name: str = ""
    items: Expr | None = None
    otherwise: bool = False  # an {% else %} was read

    @property
    def current(self) -> list[Part]:
        return self.branches[-1][1]


def _parse_blocks(text: str) -> tuple[Part, ...]:
    """Read ``text`` into text, bindings and blocks.

    Raises:
        ValueError: A statement that is not supported, a condition or a list that is not
            an expression, an unclosed block or a stray one; the message names the line.
    """
    root: list[Part] = []
    stack: list[_Open] = []
    strip_next = False
    last = 0
    for match in _TAG.finditer(text):
        chunk = text[last : match.start()]
        if strip_next:
            chunk = chunk.lstrip()
        if match["lstrip"] or match["clstrip"]:
            chunk = chunk.rstrip()
        target = stack[-1].current if stack else root
        if chunk:
            target.append(chunk)
        last = match.end()
        strip_next = bool(match["rstrip"] or match["crstrip"])
        if match["binding"] is not None:
            target.append(parse_binding(match["binding"][2:-2]))
        elif match["block"] is not None:
            line = text.count("\n", 0, match.start()) + 1
            _statement(match["statement"].strip(), match["block"], line, root, stack)
    tail = text[last:].lstrip() if strip_next else text[last:]
    if tail:
        (stack[-1].current if stack else root).append(tail)
    if stack:
        block = stack[-1]
        raise ValueError(
            f"line {block.line}: {clip(block.source)} is never closed; add "
            f"{{% end{block.kind} %}} where the block ends"
        )
    return tuple(root)


def _statement(
    statement: str, source: str, line: int, root: list[Part], stack: list[_Open]
) -> None:
    """Apply one ``{% statement %}`` to the blocks being read."""
    keyword = statement.split(None, 1)[0] if statement else ""
    where = f"line {line}: {clip(source)}"
    if keyword in ("if", "for"):
        if len(stack) >= MAX_BLOCKS:
            raise ValueError(f"{where} nests blocks more than {MAX_BLOCKS} deep")
        stack.append(_opened(keyword, statement, where, line, source))
    elif keyword in ("elif", "else"):
        _branch(keyword, statement, where, stack)
    elif keyword in ("endif", "endfor"):
        if statement != keyword:
            raise ValueError(f"{where} takes nothing after {keyword}")
        if not stack or stack[-1].kind != keyword[3:]:
            expected = f"; {{% end{stack[-1].kind} %}} closes the open one" if stack else ""
            raise ValueError(f"{where} closes no {{% {keyword[3:]} %}}{expected}")
        closed = stack.pop()
        (stack[-1].current if stack else root).append(_closed(closed))
    else:
        raise ValueError(
            f"{where} is a statement flows do not run; their strings take {_SUPPORTED}"
        )


def _opened(keyword: str, statement: str, where: str, line: int, source: str) -> _Open:
    if keyword == "if":
        condition = _block_expression(statement[2:], where, "condition")
        return _Open("if", line, source, [(condition, [])])
    found = _FOR.match(statement)
    if found is None:
        raise ValueError(f"{where} is not a loop: write {{% for name in list %}}")
    items = _block_expression(found["items"], where, "list")
    return _Open("for", line, source, [(None, [])], name=found["name"], items=items)


def _branch(keyword: str, statement: str, where: str, stack: list[_Open]) -> None:
    block = stack[-1] if stack else None
    if block is None or block.otherwise or (keyword == "elif" and block.kind != "if"):
        inside = "{% if %}" if keyword == "elif" else "{% if %} or {% for %}"
        raise ValueError(f"{where} belongs inside {inside}, before its else")
    if keyword == "else" and statement != "else":
        raise ValueError(f"{where} takes nothing after else (use elif for a condition)")
    condition = _block_expression(statement[4:], where, "condition") if keyword == "elif" else None
    block.otherwise = keyword == "else"
    block.branches.append((condition, []))


def _closed(block: _Open) -> Choice | Each:
    if block.kind == "if":
        return Choice(tuple((condition, tuple(parts)) for condition, parts in block.branches))
    assert block.items is not None
    body = tuple(block.branches[0][1])
    empty = tuple(block.branches[1][1]) if len(block.branches) > 1 else ()
    return Each(block.name, block.items, body, empty)


def _block_expression(text: str, where: str, what: str) -> Expr:
    try:
        return parse(text.strip())
    except ExpressionError as exc:
        raise ValueError(
            f"{where}: its {what} {clip(text.strip())!r} is not an expression of the flow's "
            f"dialect ({exc}); write it as a when condition is written: a path, =, !=, <, "
            "and, or, $not(...), $exists(...)"
        ) from None

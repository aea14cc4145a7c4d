"""The error of a part whose extra is not installed, and the checks that raise it.

``pip install reactor-agents`` installs the engine alone; the heavier parts are extras
(pyproject.toml's ``optional-dependencies``): :data:`EXTRAS` names the modules each one
installs that reactor imports. A part that needs one calls :func:`require_extras`, or
imports its modules inside :func:`importing`, so that a missing extra is one line that
says what to run, not a traceback from deep inside an import::

    PostgresSignalStore needs the postgres extra (psycopg is not installed):
    pip install 'reactor-agents[postgres]'
"""

from __future__ import annotations

import contextlib
import importlib.util
import sys
from collections.abc import Iterator

from reactor.exceptions._engine import ReactorError

__all__ = [
    "DISTRIBUTION",
    "EXTRAS",
    "MissingExtraError",
    "has_extras",
    "importing",
    "require_extras",
]

DISTRIBUTION = "reactor-agents"
"""The name reactor is installed by (``pip install reactor-agents``)."""

EXTRAS: dict[str, tuple[str, ...]] = {
    "cli": ("rich",),
    "service": (
        "fastapi",
        "uvicorn",
        "sqlalchemy",
        "alembic",
        "aiosqlite",
        "apscheduler",
        "python_multipart",  # FastAPI's form parsing (the web UI's forms)
        "websockets",
        "swagger_ui_bundle",
        "grandalf",
        "jwt",
        "cryptography",
        "prometheus_client",
    ),
    "postgres": ("psycopg", "psycopg_pool"),
    "scaleout": ("taskiq", "taskiq_redis", "redis"),
    "otel": ("opentelemetry.trace", "opentelemetry.sdk", "opentelemetry.exporter.otlp.proto.http"),
    "mcp": ("mcp",),
}
"""The modules each extra installs that reactor imports (tests/test_packaging.py checks
them against pyproject.toml)."""

_found: set[str] = set()  # modules seen installed (one that is stays so)


class MissingExtraError(ReactorError, ModuleNotFoundError):
    """A part of reactor needs an extra that is not installed; the message says what to run.

    Attributes:
        what: The part that needs it (``"PostgresSignalStore"``, ``"reactor.service"``).
        extras: The extras that are missing, as ``pip install`` takes them.
        name: The first module found missing (as :class:`ModuleNotFoundError` has it).
    """

    def __init__(self, what: str, extras: tuple[str, ...], missing: tuple[str, ...]) -> None:
        self.what = what
        self.extras = extras
        words = " and ".join(extras)
        modules = ", ".join(missing)
        super().__init__(
            f"{what} needs the {words} extra{'s' if len(extras) > 1 else ''} ({modules} "
            f"{'is' if len(missing) == 1 else 'are'} not installed): "
            f"pip install '{DISTRIBUTION}[{','.join(extras)}]'",
            name=missing[0],
        )


def _installed(module: str) -> bool:
    if module in _found:
        return True
    try:
        found = sys.modules.get(module) is not None or importlib.util.find_spec(module) is not None
    except ImportError:  # a parent package is missing
        found = False
    if found:
        _found.add(module)
    return found


def require_extras(*extras: str, what: str) -> None:
    """Raise :class:`MissingExtraError` unless every module of ``extras`` is installed.

    Nothing is imported but the parents of dotted names; a module found installed is
    not looked for again.

    Raises:
        MissingExtraError: Naming ``what``, the extras with a module missing and the
            first module missing of each.
        KeyError: An extra :data:`EXTRAS` does not have.
    """
    missing = {extra: _missing(extra) for extra in dict.fromkeys(extras)}
    if any(missing.values()):
        found = {extra: module for extra, module in missing.items() if module is not None}
        raise MissingExtraError(what, tuple(found), tuple(found.values()))


def has_extras(*extras: str) -> bool:
    """Whether every module of ``extras`` is installed (see :func:`require_extras`)."""
    return all(_missing(extra) is None for extra in extras)


def _missing(extra: str) -> str | None:
    """The first module of ``extra`` that is not installed (None: it is installed)."""
    return next((module for module in EXTRAS[extra] if not _installed(module)), None)


@contextlib.contextmanager
def importing(*extras: str, what: str) -> Iterator[None]:
    """Check ``extras`` (:func:`require_extras`), then import what needs them in the block.

    A module of an extra found missing in the block (one of ``extras``, or of any extra
    when none is named) raises :class:`MissingExtraError` too; any other import error
    goes through as it is.
    """
    require_extras(*extras, what=what)
    try:
        yield
    except ModuleNotFoundError as exc:
        if isinstance(exc, MissingExtraError) or exc.name is None:
            raise
        root = exc.name.partition(".")[0]
        owner = next(
            (e for e in extras or EXTRAS if any(m.split(".")[0] == root for m in EXTRAS[e])), None
        )
        if owner is None:
            raise
        raise MissingExtraError(what, (owner,), (exc.name,)) from exc

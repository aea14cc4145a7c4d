"""Finding graphs and providers: ``MODULE:ATTR`` and ``path/to/file.py:ATTR`` targets.

A target the user types is imported as asked. A target a *recording* names is not
trusted: a run database may come from anyone, and importing a module runs its code.
It is imported only when it resolves, without importing anything, to a file inside
the current directory whose content still has the hash recorded with the run.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import reactor
from reactor._cli._base import CommandError
from reactor._graph.origin import file_hash
from reactor._graph.reactive import Reactive
from reactor._providers.base import Provider
from reactor._recording.info import RunInfo

__all__ = [
    "attribute",
    "load_graph",
    "load_module",
    "provider",
    "recorded_graph",
    "script_target",
]


def load_graph(ref: str) -> tuple[ModuleType, Reactive]:
    """Import ``MODULE:ATTR`` (or ``path/to/file.py:ATTR``) and return the graph.

    A function attribute is called to build the graph. A script is imported under its
    own name, not ``__main__``, so its ``if __name__ == "__main__":`` block does not run.
    """
    where, attr = _split(ref)
    module = _import(where)
    found: Any = module
    for part in attr.split("."):
        if not hasattr(found, part):
            raise CommandError(f"{where} has no attribute {attr!r}")
        found = getattr(found, part)
    if not isinstance(found, Reactive) and callable(found):
        found = found()
    if not isinstance(found, Reactive):
        raise CommandError(f"{ref} is {type(found).__name__}, not a graph built with reactive()")
    return module, found


def load_module(ref: str) -> ModuleType:
    """The module of ``MODULE:ATTR`` (or ``path/to/file.py:ATTR``), imported as asked."""
    where, _ = _split(ref)
    return _import(where)


def script_target(ref: str) -> str:
    """``ref`` with a script's path made absolute, as it is recorded with the run."""
    where, attr = _split(ref)
    if _is_path(where):
        return f"{Path(where).resolve()}:{attr}"
    return ref


def recorded_graph(
    info: RunInfo, command: str = "replay", *, changed: bool = False
) -> tuple[ModuleType, Reactive]:
    """Import the graph a recorded run names, if it is the user's own, unchanged code.

    ``changed``: the file may have changed since the run (a resume or a fork goes on
    with the code as it is now; the resume checks the graph against the run's log).

    Raises:
        CommandError: The recording names no graph, or one outside the current
            directory, or a file that changed since the run; the message shows what
            the recording names and how to pass ``--graph``.
    """
    run_id, target = info.run_id, info.target
    hint = f"pass the graph yourself: reactor {command} {run_id} --graph MODULE:GRAPH"
    if not target:
        raise CommandError(f"the recording of {run_id} does not say which graph ran it; {hint}")
    project = Path.cwd().resolve()
    try:
        where, _ = _split(target)
        file = _target_file(where)
    except CommandError:
        file = None
    if file is None or not file.resolve().is_relative_to(project):
        raise CommandError(
            f"the recording of {run_id} names the graph {target!r}, which is not a file in "
            f"this directory ({project}); reactor imports a recorded graph only from your "
            f"own project, so that a database from elsewhere cannot run code. If you trust "
            f"it, {hint}"
        )
    if not changed and (info.target_hash is None or file_hash(file) != info.target_hash):
        what = "no hash of it was recorded" if info.target_hash is None else "it has changed"
        raise CommandError(
            f"the recording of {run_id} names the graph {target!r}, but {what} since the "
            f"run ({file}); {hint} to replay on the code as it is now"
        )
    module, graph = load_graph(target if not _is_path(where) else f"{file}:{_split(target)[1]}")
    loaded = getattr(module, "__file__", None)
    if loaded is None or Path(loaded).resolve() != file.resolve():
        raise CommandError(f"{target!r} was imported from {loaded}, not from {file}; {hint}")
    return module, graph


def _split(ref: str) -> tuple[str, str]:
    where, _, attr = ref.rpartition(":")
    if not where or not attr:
        raise CommandError(
            f"expected MODULE:GRAPH, e.g. examples.trading_bot.app:graph, got {ref!r}"
        )
    return where, attr


def _is_path(where: str) -> bool:
    return where.endswith(".py") or os.sep in where or "/" in where


def _target_file(where: str) -> Path | None:
    """The file ``where`` (a script path or a module name) would load, importing nothing."""
    if _is_path(where):
        path = Path(where)
        return path if path.is_file() else None
    loaded = sys.modules.get(where)
    if loaded is not None:
        file = getattr(loaded, "__file__", None)
        return Path(file) if file else None
    parts = where.split(".")
    if not all(part.isidentifier() for part in parts):
        return None
    if parts[0] in sys.builtin_module_names or importlib.machinery.FrozenImporter.find_spec(
        parts[0]
    ):
        return None
    search: list[str] | None = [os.getcwd(), *sys.path]
    spec = None
    for index in range(len(parts)):
        # The path finder alone: no package's __init__ runs while looking.
        spec = importlib.machinery.PathFinder.find_spec(".".join(parts[: index + 1]), search)
        if spec is None:
            return None
        locations = spec.submodule_search_locations
        search = list(locations) if locations is not None else None
        if search is None and index < len(parts) - 1:
            return None
    origin = spec.origin if spec is not None else None
    return Path(origin) if origin and spec is not None and spec.has_location else None


def _import(name: str) -> ModuleType:
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        if _is_path(name):
            return _import_file(Path(name))
        return importlib.import_module(name)
    except (ImportError, FileNotFoundError) as exc:
        raise CommandError(f"cannot import {name!r}: {exc}") from exc


def _import_file(path: Path) -> ModuleType:
    if not path.is_file():
        raise CommandError(f"cannot import {str(path)!r}: no such file")
    # As if the script ran: its folder is on the path, for the modules beside it.
    folder = str(path.resolve().parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    name = path.stem if path.stem.isidentifier() else "script"
    if name in sys.modules:
        name = f"reactor_script_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise CommandError(f"cannot import {str(path)!r}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def provider(choice: str | None, module: ModuleType) -> tuple[Any, str]:
    """The provider a run uses, and words for it (the CLI says which one it uses)."""
    scripted = getattr(module, "scripted_provider", None)
    if choice is None:
        choice = "scripted" if scripted is not None else "anthropic"
    if choice == "scripted":
        if scripted is None:
            raise CommandError(
                f"{module.__name__} defines no `scripted_provider`; add one, or use "
                "--provider anthropic / --provider MODULE:ATTR"
            )
        return _made(scripted), (
            f"scripted answers from {module.__name__}.scripted_provider "
            "(offline; --provider anthropic asks Claude)"
        )
    if choice == "anthropic":
        provider_class = getattr(reactor, "AnthropicProvider", None)
        if provider_class is None:
            raise CommandError("the Anthropic provider is not available in this installation")
        return provider_class(), "Claude (AnthropicProvider)"
    if ":" not in choice:
        raise CommandError(f"unknown provider {choice!r}: use scripted, anthropic or MODULE:ATTR")
    return _made(attribute(choice, "--provider")), choice


def _made(given: Any) -> Any:
    """``given`` if it is a provider, else what calling it (a class, a factory) makes.

    A provider is a :class:`reactor.Provider`, or any other object with a ``stream``
    method (the one member a provider must have).
    """
    is_provider = isinstance(given, Provider) or (
        not isinstance(given, type) and callable(getattr(given, "stream", None))
    )
    return given() if callable(given) and not is_provider else given


def attribute(ref: str, option: str) -> Any:
    """The object ``MODULE:ATTR`` names."""
    module_name, _, attr = ref.partition(":")
    if not module_name or not attr:
        raise CommandError(f"{option} takes MODULE:ATTR, got {ref!r}")
    found = getattr(_import(module_name), attr, None)
    if found is None:
        raise CommandError(f"{module_name} has no attribute {attr!r}")
    return found

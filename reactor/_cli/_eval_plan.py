"""What ``reactor eval`` evaluates, and where: checked before any run starts.

The graph is ``--graph MODULE:GRAPH``, or a reaction agent of a service, ``--app
MODULE:SERVICE --agent NAME`` (its one-agent graph; each case's scope made again from
the recorded object event). Recordings are read from ``--db`` (for an app, by default
the service's own store), read only; the new runs are recorded to ``--into`` or, by
default, to a scratch store beside it (``runs-eval.db`` beside ``runs.db``), into
which the recordings evaluated are copied: an evaluation never writes into the
store it reads unless ``--into`` names that store. Every problem here is a usage
error (exit status 2).
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import inspect
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from reactor import eval as scorers
from reactor._backends.sqlite import SQLiteSignalStore
from reactor._cli._base import CommandError, checked_settings, db_path, service_url
from reactor._cli._load import attribute, load_graph, load_module, provider
from reactor._graph.evaluate import Scope, Scorer
from reactor._graph.reactive import Reactive
from reactor._providers.base import Provider
from reactor._recording.store import SignalStore
from reactor._signals.settings import database_location
from reactor.exceptions._extras import importing

if TYPE_CHECKING:
    from reactor.service import ReactionService

__all__ = ["BUILTINS", "Plan", "Stores", "UsageError", "plan", "scratch_of", "stores"]

Location = Path | str | SignalStore
"""A run database: a SQLite file, a PostgreSQL URL, or a store a service was given."""

BUILTINS: dict[str, Callable[..., Scorer]] = {
    "state_equal": scorers.state_equal,
    "decision_kept": scorers.decision_kept,
    "cost_within": scorers.cost_within,
}
"""The scorers of :mod:`reactor.eval` that ``--scorer 'NAME(ARGS)'`` builds."""


class UsageError(CommandError):
    """The command cannot start as asked: exit status 2."""


@dataclasses.dataclass(frozen=True)
class Plan:
    """What an evaluation needs, each part checked before any run starts.

    Attributes:
        graph: The graph as the code is now.
        name: The graph name its runs were recorded under.
        tags: The tags runs must have (a reaction's ``reaction=NAME`` first).
        provider: Who answers a changed model request (``None``: nobody).
        words: Says who, for the first line of the report.
        scorers: What every case must pass.
        source: Where the recordings are.
        service: The app's service (``--app``), whose objects the scope reads.
        scope: Makes a case's scope from its recording (``--app``), given the objects.
    """

    graph: Reactive
    name: str
    tags: list[str]
    provider: Provider | None
    words: str
    scorers: list[Scorer]
    source: Location
    service: ReactionService | None = None
    scope: Scope | None = None


def plan(args: argparse.Namespace) -> Plan:
    """The plan of ``reactor eval``'s options.

    Raises:
        UsageError: An option is wrong, or what it names cannot be loaded.
    """
    for option in ("junit", "json"):
        where = getattr(args, option)
        if where and not Path(where).resolve().parent.is_dir():
            raise UsageError(f"--{option} {where}: the folder {Path(where).parent} does not exist")
    for tag in args.tag:
        if not tag.partition("=")[0]:
            raise UsageError(f"--tag {tag!r} has no key: use --tag KEY or --tag KEY=VALUE")
    if (args.graph is None) == (args.app is None):
        raise UsageError("give the graph to evaluate: --graph MODULE:GRAPH, or --app with --agent")
    if (args.app is None) != (args.agent is None):
        raise UsageError("--app MODULE:SERVICE and --agent NAME go together")
    try:
        return _app_plan(args) if args.app is not None else _graph_plan(args)
    except UsageError:
        raise
    except CommandError as exc:
        raise UsageError(str(exc)) from None


def _graph_plan(args: argparse.Namespace) -> Plan:
    try:
        module, graph = load_graph(args.graph)
    except CommandError as exc:
        if not str(exc).endswith("is Agent, not a graph built with reactive()"):
            raise
        raise UsageError(
            f"{exc}; a service's reaction agent is evaluated with its service: --app "
            "MODULE:SERVICE --agent NAME"
        ) from None
    name = args.graph_name or graph.name
    if not name:
        raise UsageError(
            f"{args.graph} has no name, so its runs cannot be found by it; pass "
            "--graph-name NAME (the GRAPH column of `reactor runs`)"
        )
    chosen, words = _provider(args, lambda: module)
    checks = [scorer(text) for text in args.scorer]
    return Plan(graph, name, list(args.tag), chosen, words, checks, db_path(args))


def _app_plan(args: argparse.Namespace) -> Plan:
    from reactor._cli._service import app_service  # the service extra, only here
    from reactor.service._reactions.evaluated import reaction_scope

    service = app_service(args.app, service_url(checked_settings().service_db), given_db=False)
    target = service.reactions.get(args.agent)
    if target is None:
        known = ", ".join(sorted(service.reactions)) or "none"
        raise UsageError(
            f"--agent {args.agent!r} is not a reaction agent of {args.app} (its reaction "
            f"agents: {known}); evaluate another graph's runs with --graph"
        )
    chosen, words = _provider(args, lambda: load_module(args.app))
    checks = [scorer(text) for text in args.scorer]
    source = db_path(args) if args.db else _service_store(service, args.app)
    return Plan(
        graph=target.graph,
        name=target.name,
        tags=[f"reaction={target.name}", *args.tag],
        provider=chosen,
        words=words,
        scorers=checks,
        source=source,
        service=service,
        scope=reaction_scope(service.objects, target),
    )


def _service_store(service: ReactionService, app: str) -> Location:
    """Where the service records its runs (as it finds it when it starts)."""
    if service.record is not None:
        return service.record
    db = service.db
    if db.path is not None:
        return db.path
    if db.dialect == "postgresql":
        return db.driver_url.set(drivername="postgresql").render_as_string(hide_password=False)
    raise UsageError(
        f"{app} keeps its runs in memory, so none is recorded to evaluate; give the run "
        "database with --db"
    )


def _provider(
    args: argparse.Namespace, module: Callable[[], ModuleType]
) -> tuple[Provider | None, str]:
    """The provider ``--provider`` names (``scripted``: the module's ``scripted_provider``)."""
    if args.provider == "none":
        return None, "a changed model request is not answered (--provider none: it ends diverged)"
    chosen, words = provider(args.provider, module())
    return chosen, f"changed model requests are answered by {words}"


@dataclasses.dataclass
class Stores:
    """The stores of an evaluation: recordings are read from one, new runs go to the other."""

    source: SignalStore
    into: SignalStore
    where: Path | str  # the into store's location, for the commands the report suggests
    opened: list[SignalStore]  # what this command opened (and closes)

    def close(self) -> None:
        """Close what was opened here (a store the app was given stays the app's)."""
        for store in self.opened:
            store.close()


def stores(args: argparse.Namespace, source: Location) -> Stores:
    """Open the run database to read and the one to record to (``--into``, else scratch).

    Raises:
        UsageError: There is no run database, or ``--into`` names none.
    """
    into = _location(args.into, "--into") if args.into else scratch_of(source)
    if isinstance(source, Path | str) and str(into) == str(source):
        store = _open(source, writable=True, must_exist=True)
        return Stores(store, store, into, [store])
    read = source if not isinstance(source, Path | str) else _open(source, must_exist=True)
    write = _open(into, writable=True)
    return Stores(read, write, into, [write] if read is source else [read, write])


def scratch_of(source: Location) -> Path:
    """The scratch store beside ``source``: ``runs-eval.db`` beside ``runs.db``."""
    if isinstance(source, Path):
        return source.with_name(f"{source.stem}-eval{source.suffix or '.db'}")
    return Path(".reactor") / "eval-runs.db"


def _location(text: str, option: str) -> Path | str:
    try:
        return database_location(text)
    except ValueError as exc:
        raise UsageError(f"{option} {text} {exc}") from None


def _open(where: Path | str, *, writable: bool = False, must_exist: bool = False) -> SignalStore:
    if isinstance(where, str):
        with importing("postgres", what="A postgresql:// database"):
            from reactor._backends.postgres import PostgresSignalStore
        return PostgresSignalStore(where)
    if must_exist and not where.exists():
        raise UsageError(
            f"no run database at {where}; record runs with `reactor run` (or serve them), or "
            "name the database with --db PATH or $REACTOR_DB"
        )
    return SQLiteSignalStore(where, readonly=not writable)


def scorer(text: str) -> Scorer:
    """The scorer ``--scorer`` names: ``MODULE:ATTR`` or ``NAME(ARGS)`` of reactor.eval."""
    if "(" in text and ":" not in text.partition("(")[0]:
        return _builtin(text)
    if ":" not in text:
        raise UsageError(
            f"--scorer {text!r}: write MODULE:ATTR (a function scorer(old, new) -> bool | "
            f"float) or one of {', '.join(f'{name}(...)' for name in BUILTINS)}"
        )
    found = attribute(text, "--scorer")
    if any(found is factory for factory in BUILTINS.values()):
        raise UsageError(
            f"--scorer {text!r} makes scorers, it is not one; write --scorer "
            f"'{found.__name__}(...)' instead"
        )
    if not callable(found):
        raise UsageError(
            f"--scorer {text!r} is {type(found).__name__}, not a function scorer(old, new)"
        )
    try:
        inspect.signature(found).bind(None, None)
    except TypeError:
        raise UsageError(
            f"--scorer {text!r} cannot be called as scorer(old, new) (it takes "
            f"{inspect.signature(found)}); a scorer takes the recorded run and the new result"
        ) from None
    except ValueError:  # no signature to read (a builtin): it is called as it is
        pass
    checked: Scorer = found
    return checked


def _builtin(text: str) -> Scorer:
    """``decision_kept(decision)``, ``state_equal(a, b)``, ``cost_within(1.2)``."""
    forms = ", ".join(f"{name}(...)" for name in BUILTINS)
    try:
        call = ast.parse(text.strip(), mode="eval").body
    except SyntaxError:
        call = None
    if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Name) or call.keywords:
        raise UsageError(f"--scorer {text!r} is not a call like decision_kept(decision)")
    factory = BUILTINS.get(call.func.id)
    if factory is None:
        raise UsageError(f"--scorer {text!r}: no scorer {call.func.id!r}; use {forms}")
    values: list[Any] = []
    for node in call.args:
        if isinstance(node, ast.Name | ast.Attribute):  # a bare word (or a.b) is a state key
            values.append(ast.unparse(node))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str | int | float):
            values.append(node.value)
        else:
            raise UsageError(f"--scorer {text!r}: {ast.unparse(node)} is not a key or a number")
    try:
        made: Scorer = factory(*values)
    except (TypeError, ValueError) as exc:
        raise UsageError(f"--scorer {text!r}: {str(exc).rstrip('.')}") from None
    return made

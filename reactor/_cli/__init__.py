"""The ``reactor`` command line: run graphs, list, show, replay and compare recordings.

One module per group of commands: ``_running`` (run, replay), ``_records`` (runs,
show, diff), ``_eval`` (eval, runs tag; ``_eval_plan``, what it evaluates and where),
``_graphs`` (graph), and
``migration._convert.cli`` (migrate); ``_load`` finds graphs and providers, ``_output``
and ``_render`` draw with rich on a terminal and plain text elsewhere, ``_parser`` holds
the arguments; ``_service`` and ``_workers`` are ``reactor serve``, ``reactor db`` and
``reactor worker``; ``_audit`` is ``reactor audit verify``.

May use: everything below it, :mod:`reactor.service` and :mod:`migration` included.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence

from reactor._cli._base import CommandError, SettingsError, checked_settings
from reactor._cli._parser import build_parser
from reactor.exceptions import ReactorError
from reactor.exceptions._extras import require_extras

__all__ = ["main"]

_EXTRAS = {
    "db": ("service",),
    "serve": ("service",),
    "worker": ("service", "scaleout"),
    "workers": ("service", "scaleout"),
}
"""The extras a command needs beyond the core: without them, one line says what to install."""

_SIGPIPE_STATUS = 141
"""What a shell reports for a command stopped by SIGPIPE: the reader went away."""


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``reactor`` console script; returns the exit status."""
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:  # named by the command they were given to: `reactor show: error: ...`
        getattr(args, "parser", parser).error(f"unrecognized arguments: {' '.join(extra)}")
    handler: Callable[..., int] | None = getattr(args, "handler", None)
    if handler is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        require_extras(*_EXTRAS.get(args.command, ()), what="this command")
        if hasattr(args, "db") and not hasattr(args, "log_format"):
            checked_settings()  # bad REACTOR_* values stop it first (serve, worker: once logging)
        return handler(args)
    except BrokenPipeError:
        # The reader stopped (`reactor runs | head`): leave quietly, and keep Python
        # from complaining when it flushes stdout at exit.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return _SIGPIPE_STATUS
    except (CommandError, ReactorError, OSError) as exc:
        lines = str(exc).splitlines() if isinstance(exc, SettingsError) else [str(exc)]
        for line in lines:  # bad settings: a line per variable
            print(f"reactor {args.command}: error: {line}", file=sys.stderr)
        return exc.status if isinstance(exc, CommandError) else 1
    except KeyboardInterrupt:
        print(f"reactor {args.command}: interrupted", file=sys.stderr)
        return 130

"""What shows a run to a person: a live progress line, and text fit for a terminal.

``progress`` (:class:`ProgressReporter`), ``terminal`` (control characters escaped;
rich when it can draw). The structlog and metrics reporters are the public
:mod:`reactor.logging` beside this room.

May use: ``_signals`` (and rich, when installed).
"""

"""One activation: guard, handler, model call or question, output, emits.

``activator`` (:class:`Activator`: runs one activation behind the small
``RunServices`` protocol the engine satisfies), ``agentrun`` (per-run bookkeeping of
agents and their activations), ``resume`` (what a resumed run takes from its log:
answers, tool results, decisions already made), ``fold`` (what a log says so far,
folded signal by signal) and ``snapshot`` (a fold as the payload of
``harness:snapshot``), ``keys`` (idempotency keys), ``timers`` (``ctx.sleep``: durable
timers), ``threads`` (synchronous handlers and ``on_output`` in worker threads, off
the event loop).

May use: the agents, prompts, providers and recording rooms, :mod:`stores` and
``_signals``. Never the engine or the graph: they call down into it.
"""

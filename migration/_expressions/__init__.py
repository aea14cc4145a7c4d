"""What flows compute with: JSON values, expressions, conditions, bindings; the errors.

``values`` (JSON values as flows see them: paths, equality, state writes, short
reprs), ``expr`` (the kernel's JSONata subset, parsed once, then evaluated), ``when``
(the ``when`` of nodes and edges, in both dialects), ``template`` (a string read into
text, ``{{ bindings }}`` and ``{% if %}`` / ``{% for %}`` blocks), ``bindings`` (what
they mean, rendered against a run's outputs), ``errors`` (the migration's errors under
``ReactorError``, at the bottom because every room raises them).

May use: :mod:`reactor.exceptions` only (and lark, pydantic-core).
"""

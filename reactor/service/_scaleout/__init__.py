"""Scale-out: runs as jobs on taskiq's Redis Streams broker, and the workers that run them.

``queue`` (:class:`JobQueue`: run requests and reactions as jobs), ``leases`` (claims
in the database that make several processes safe: run leases, cron ticks), ``worker``
(``reactor worker``).

May use: ``_hosting`` (its sibling), ``_reactions`` and ``_objects``.
"""

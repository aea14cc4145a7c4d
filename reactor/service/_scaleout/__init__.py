"""Scale-out: runs as jobs on taskiq's Redis Streams broker, and the workers that run them.

``queue`` (:class:`JobQueue`: run requests and reactions as jobs), ``broker`` (the
queue's settings, and the broker workers take jobs with: reclaim, backoff), ``jobs``
(the jobs kept in the database too, queued again when Redis loses them), ``leases``
(claims in the database that make several processes safe: run leases, cron ticks),
``durable`` (fencing in the log, durable handovers), ``waiting`` (jobs a worker's code
cannot run, left for one whose code can), ``worker`` (``reactor worker``).

May use: ``_hosting`` (its sibling), ``_reactions`` and ``_objects``.
"""

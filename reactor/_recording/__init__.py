"""Recording: signal logs, recordings, signal stores and their protocols.

``log`` (the :class:`SignalLog` views shared by results and recordings), ``diff``
(where two logs part), ``info`` (run metadata), ``recording`` (:class:`Recording`),
``store`` (the :class:`SignalStore` and :class:`Reporter` protocols and a base class),
``memory`` and ``sqlite`` (the stores reactor ships).
"""

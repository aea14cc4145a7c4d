"""Recording: signal logs, recordings, and the contract of signal stores and reporters.

``log`` (the :class:`SignalLog` views shared by results and recordings), ``diff``
(where two logs part), ``info`` (run metadata and its counters), ``recording``
(:class:`Recording`), ``eventtree`` (a log as nodes: activations, prompts, tools,
steps), ``store`` (the :class:`SignalStore` and :class:`Reporter` protocols: everything
reactor asks of them, checked at the door), ``storebase`` (:class:`SignalStoreBase`:
the optional members' defaults), ``inbox`` (messages posted to a run), ``writes``
(for stores with a writer thread: the backlog runs wait on, the runs whose recording
failed), ``seals`` (snapshots' hashes, and the check a reader makes), ``tail`` (a
store's tail from its latest sound snapshot), ``chain`` (hash chains: the link, the
canonical form of an entry, and the check a verifier makes). The stores reactor
ships are in ``_backends``.

May use: ``_signals`` and :mod:`reactor.exceptions`.
"""

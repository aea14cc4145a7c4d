"""The observable store: validated, transactional state that emits a signal per change."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, ClassVar, Generic, Self, TypeVar, cast, get_args

import pydantic

from reactor._signals.bus import SignalBus, Subscription
from reactor._signals.door import check_payload
from reactor._signals.frozen import FrozenDict, freeze
from reactor._signals.offloop import on_loop
from reactor._signals.patterns import Pattern
from reactor._signals.signal import to_jsonable
from reactor._signals.views import SCALARS, readonly, unwrap
from reactor.exceptions import StateKeyError, TransactionError
from stores._announce import ABSENT, Change, announce
from stores._draft import DictDraft, ModelDraft, undraft
from stores._transaction import Transaction, in_transaction, writer
from stores._validation import apply_model, model_rules, validation_error
from stores._writes import assign, check_key, copied, dict_updates

__all__ = ["Store", "StoreBinding", "StoreSubscription"]

_FLAT = frozenset({str, int, bool, type(None)})
"""The values a shared snapshot may hold: their JSON is their value and their type."""
_FLAT_SNAPSHOTS: dict[tuple[Any, ...], FrozenDict] = {}
_FLAT_KEPT = 16
_FLAT_TEXT = 256


def _flat_snapshot(state: dict[str, Any]) -> FrozenDict | None:
    """The snapshot of a flat ``state`` (only ``_FLAT`` values), shared by equal states.

    Equal means the same keys in the same order, and values equal and of the same
    type (``1`` and ``True`` are two states): the same JSON. ``None`` for other states
    (and for long text: the last few shared snapshots are kept).
    """
    values = tuple(state.values())
    kinds = tuple(map(type, values))
    if not _FLAT.issuperset(kinds):
        return None
    if str in kinds and max(len(value) for value in values if type(value) is str) > _FLAT_TEXT:
        return None  # the kept snapshots stay small
    key = (tuple(state), kinds, values)
    found = _FLAT_SNAPSHOTS.get(key)
    if found is None:
        if len(_FLAT_SNAPSHOTS) >= _FLAT_KEPT:
            _FLAT_SNAPSHOTS.clear()
        found = _FLAT_SNAPSHOTS[key] = freeze(dict(state))
    return found


StateT = TypeVar("StateT")


class Store(Generic[StateT]):
    """Observable state: every committed change becomes ``state:<key>:changed``.

    Back it with a pydantic model instance (validated) or a plain dict (unvalidated)::

        class TradeStore(Store[TradeState]):
            @action
            def record_analysis(self, draft: TradeState, analysis: Analysis) -> None:
                draft.analysis = analysis

        store = TradeStore()                 # TradeState() by default
        store.record_analysis(analysis)      # emits state:analysis:changed

    Reads (:attr:`state`, :meth:`get`, :meth:`snapshot`) are read-only. Writes
    (``@action`` methods, :meth:`set`, :meth:`update`, :meth:`transaction`) are
    transactions: validated, committed atomically, and only then signalled. A write
    that raises or does not validate leaves the state unchanged and emits nothing.

    A commit emits, for each top-level key whose value changed, one
    ``state:<key>:changed`` ``{key, old, new, actor, paths}``. When the key holds a
    list before and after, ``state:<key>:added`` ``{key, items, actor}`` follows with
    the items that came (the multiset difference new - old, compared by value), then
    ``state:<key>:removed`` with those that went (old - new), each when not empty.
    Payloads are read-only, so no subscriber changes what the next one receives.

    Args:
        initial: A model instance, a model class (default-constructed) or a dict. A
            subclass of ``Store[Model]`` defaults to ``Model()``. The store keeps its
            own deep copy.
        history_limit: How many signals the store's private bus keeps in its history.

    Raises:
        TypeError: ``initial`` is not a model, a model class or a dict.
        SignalNameError: A dict key cannot be part of a signal name.
    """

    _model_type: ClassVar[type[pydantic.BaseModel] | None] = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for base in getattr(cls, "__orig_bases__", ()):
            args = get_args(base)
            if args and isinstance(args[0], type) and issubclass(args[0], pydantic.BaseModel):
                cls._model_type = args[0]

    def __init__(self, initial: StateT | type[StateT] | None = None, *, history_limit: int = 1000):
        if initial is None:
            if self._model_type is None:
                raise TypeError(
                    f"{type(self).__name__}() needs an initial state: a pydantic model "
                    "instance or class, or a dict."
                )
            initial = cast(StateT, self._model_type())
        if isinstance(initial, type) and issubclass(initial, pydantic.BaseModel):
            initial = cast(StateT, initial())
        if type(initial) is dict and all(map(SCALARS.__contains__, map(type, initial.values()))):
            # The common dict of plain values (a run's state, made at every run): no view
            # to unwrap, nothing to copy deeply.
            for key in initial:
                check_key(key)
            self._state: Any = dict(initial)
        else:
            self._state = self._initial_state(unwrap(initial))
        self._is_model = isinstance(self._state, pydantic.BaseModel)
        self._version = 0
        # A store given to a run emits on the run's bus and never needs one of its own:
        # the private bus is made on first use.
        self._history_limit = history_limit
        self._own_bus: SignalBus | None = None
        self._bound: SignalBus | None = None
        self._subscriptions: list[StoreSubscription] | None = None  # made at the first
        self._view: Any = None
        self._view_version = -1
        self._snapshot: FrozenDict | None = None
        self._snapshot_version = -1

    @staticmethod
    def _initial_state(initial: Any) -> Any:
        if isinstance(initial, pydantic.BaseModel):
            return initial.model_copy(deep=True)
        if isinstance(initial, dict):
            for key in initial:
                check_key(key)
            return copied(initial)
        raise TypeError(
            f"A store holds a pydantic model instance or a dict, got {initial!r}. "
            "Pass a model instance, a model class or a dict."
        )

    # -- reading -------------------------------------------------------------------

    @property
    def state(self) -> StateT:
        """The committed state, read-only (mutating it raises ``ReadOnlyStateError``)."""
        if self._view_version != self._version:
            self._view = readonly(self._state)
            self._view_version = self._version
        view: StateT = self._view  # a plain assignment: cast() is a call, on a hot path
        return view

    def get(self, key: str, default: Any = ABSENT) -> Any:
        """Return the value of a top-level key, read-only.

        Raises:
            StateKeyError: No such key and no ``default`` given.
        """
        value = self._fields(self._state).get(key, ABSENT)
        if value is ABSENT:
            if default is not ABSENT:
                return default
            raise StateKeyError(
                f"The state has no key {key!r} (keys: {', '.join(self.keys()) or 'none'}).",
                key=key,
            )
        return readonly(value)

    def keys(self) -> tuple[str, ...]:
        """The top-level keys, in signal order (model fields, or dict insertion order)."""
        return tuple(self._fields(self._state))

    def snapshot(self) -> dict[str, Any]:
        """The state as plain JSON data (a read-only ``dict``; memoized per version).

        Returns the same object until the next commit, so calling it on every guard
        evaluation costs nothing. ``copy.deepcopy()`` it for a mutable copy. (Stores
        whose state is the same flat dict, as thousands of runs of one graph start
        and often end, may get the same object: it is read-only.)
        """
        if self._snapshot_version != self._version:
            state = self._state
            if self._is_model:
                self._snapshot = freeze(state.model_dump(mode="json"))
            else:
                self._snapshot = _flat_snapshot(state) or freeze(to_jsonable(state))
            self._snapshot_version = self._version
        snapshot: Any = self._snapshot
        return snapshot  # type: ignore[no-any-return]  # a FrozenDict, read as a dict

    def restore(self, data: Mapping[str, Any]) -> None:
        """Replace the whole state with ``data`` (plain JSON data), emitting nothing.

        For rebuilding a store as a log says it was (resuming a run from its recording):
        the state is validated like any write, but no signal is emitted, because the
        changes that led to it are already in the log.

        Raises:
            StateValidationError: ``data`` does not validate against the model.
        """
        if self._is_model:
            model = type(self._state)
            try:
                self._state = model.model_validate(dict(data))
            except pydantic.ValidationError as exc:
                raise validation_error("", "", exc) from exc
        else:
            for key in data:
                check_key(key)
            self._state = copied(dict(data))
        self._version += 1

    @property
    def model_type(self) -> type[pydantic.BaseModel] | None:
        """The pydantic model class of the state, or ``None`` for a dict-backed store."""
        return type(self._state) if self._is_model else None

    @property
    def version(self) -> int:
        """Number of commits that changed the state."""
        return self._version

    @property
    def bus(self) -> SignalBus:
        """The bus the store emits on: its own, or the run's it is bound to."""
        return self._bound if self._bound is not None else self._private_bus()

    def _private_bus(self) -> SignalBus:
        if self._own_bus is None:
            self._own_bus = SignalBus(history_limit=self._history_limit)
        return self._own_bus

    # -- writing -------------------------------------------------------------------

    def transaction(self, *, actor: str | None = None) -> Transaction[StateT]:
        """Open a transaction: ``with store.transaction() as draft: draft.x = 1``.

        The draft is a copy-on-write image of the state (typed like it). On a clean
        exit the changes are validated and committed, then signalled; if the block
        raises, nothing changes (so too when a value is one the log cannot hold:
        :class:`~reactor.PayloadError`). A transaction opened inside another on the same
        store (an action calling an action) joins the outer one: signals follow the
        outermost commit, and if the inner one fails the outer one cannot commit.
        """
        return Transaction(self, actor)

    def set(self, key: str, value: Any, *, actor: str | None = None) -> None:
        """Set one top-level key (validated against the model).

        Raises:
            StateValidationError: The value does not validate; nothing changed.
            PayloadError: The log cannot hold the value (a lone surrogate, ``NaN``, a
                type with no JSON form); nothing changed.
        """
        if in_transaction(self):
            with self.transaction(actor=actor) as draft:
                assign(draft, key, value)
            return
        # A key written on its own needs no draft: this is the commit of one.
        if not self._is_model and key not in self._state:
            check_key(key)
        self._write({key: undraft(value)}, writer(actor))

    def update(
        self, changes: Mapping[str, Any] | None = None, /, *, actor: str | None = None, **kw: Any
    ) -> None:
        """Set several top-level keys in one transaction: ``store.update(a=1, b=2)``."""
        off = on_loop()
        if off is not None:  # from a sync handler's thread: the whole write on the loop
            off.call(lambda: self.update(changes, actor=actor, **kw))
            return
        merged = {**(changes or {}), **kw}
        with self.transaction(actor=actor) as draft:
            for key, value in merged.items():
                assign(draft, key, value)

    def _draft(self) -> Any:
        state = self._state
        return ModelDraft(state, "") if self._is_model else DictDraft(state, "")

    def _commit(self, draft: Any, actor: str) -> None:
        written = draft._updates() if self._is_model else dict_updates(draft)
        if written:
            self._write(written, actor, draft._base)

    def _write(
        self, written: dict[str, Any], actor: str, base: Any = None, checked: bool = False
    ) -> None:
        """Validate ``written`` (top-level keys) into a new state; commit and signal it.

        From a handler's worker thread, the commit runs on the run's loop (which owns
        the state and its bus), one commit at a time; a transaction's draft was taken
        in the thread from ``base``, so a key someone else changed since is a conflict,
        never a lost update.
        """
        off = on_loop()
        if off is not None:
            off.call(self._write, written, actor, base, True)
            return
        current = self._state
        if checked and base is not None and base is not current:
            self._check_unchanged(base, current, written)
        if self._is_model:
            new = apply_model(current, written, "")
            if model_rules(type(new)).model_validators:
                written = self._fields(new)  # they may rewrite fields not written
        else:
            new = {**current, **written}
        changes = self._changes(current, new, written)
        if changes:
            for key, _, value in changes:  # before the commit: a refused write changes nothing
                check_payload(value, f"state.{key}")
            self._state = new
            self._version += 1
            bus = self._bound
            announce((bus if bus is not None else self._private_bus()).emit, changes, actor)

    def _check_unchanged(self, base: Any, current: Any, written: dict[str, Any]) -> None:
        """Refuse a thread's commit over a key another writer changed since its draft."""
        before, now = self._fields(base), self._fields(current)
        changed = [key for key in written if before.get(key, ABSENT) is not now.get(key, ABSENT)]
        if changed:
            raise TransactionError(
                f"The transaction was not committed: {', '.join(map(repr, changed))} changed "
                "while it was open in a worker thread (a sync handler), so committing it "
                "would lose that change; the state is unchanged. Write through an @action "
                "(it runs whole on the run's loop), or retry the transaction."
            )

    def _changes(self, current: Any, new: Any, written: dict[str, Any]) -> list[Change]:
        """Return the written keys whose values differ, in the order of the state's keys.

        A key written with an equal value gets the committed object back, so
        unchanged parts stay shared between versions and emit nothing.
        """
        if self._is_model:
            before, after = self._fields(current), self._fields(new)
        else:  # a dict state is its own fields
            before, after = current, new
        keys = written if len(written) == 1 else [key for key in after if key in written]
        changes = []
        for key in keys:
            old, value = before.get(key, ABSENT), after[key]
            if old is value:
                continue
            if old is not ABSENT and old == value:
                self._restore(new, key, old)
                continue
            changes.append((key, old, value))
        return changes

    def _fields(self, state: Any) -> dict[str, Any]:
        """The top-level keys and values of ``state`` (a model's fields and extras)."""
        fields: dict[str, Any] = state.__dict__ if self._is_model else state
        extra = state.__pydantic_extra__ if self._is_model else None
        return {**fields, **extra} if extra else fields

    def _restore(self, state: Any, key: str, value: Any) -> None:
        if not self._is_model:
            state[key] = value
        elif key in state.__dict__:
            state.__dict__[key] = value
        else:
            state.__pydantic_extra__[key] = value

    # -- signals -------------------------------------------------------------------

    def subscribe(
        self, patterns: Pattern | Iterable[Pattern], handler: Callable[[Any], object]
    ) -> StoreSubscription:
        """Subscribe ``handler`` to signals on the store's bus, e.g. ``"state:*:changed"``.

        Works on a standalone store; when the store is bound to a run's bus the
        subscription follows it there.
        """
        subscription = StoreSubscription(self, patterns, handler)
        if self._subscriptions is None:
            self._subscriptions = []
        self._subscriptions.append(subscription)
        return subscription

    def bind(self, bus: SignalBus) -> StoreBinding:
        """Emit on ``bus`` (a run's bus) so state signals join its log with causality.

        Returns a binding that unbinds when used as a context manager.

        Raises:
            TransactionError: The store is bound to a different bus already.
        """
        if self._bound is not None and self._bound is not bus:
            raise TransactionError(
                f"This {type(self).__name__} is already bound to the bus of run "
                f"{self._bound.run_id!r}; a store instance serves one run at a time. Give "
                "runs a store class or factory as state= so each gets its own store."
            )
        if bus is not self._bound:
            self._bound = bus
            self._move_subscriptions()
        return StoreBinding(self)

    def unbind(self) -> None:
        """Return to the store's private bus."""
        if self._bound is not None:
            self._bound = None
            self._move_subscriptions()

    def _move_subscriptions(self) -> None:
        if self._subscriptions:
            bus = self.bus
            for subscription in self._subscriptions:
                subscription._attach(bus)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._state!r})"


class StoreSubscription:
    """A store-level subscription; it follows the store from bus to bus."""

    def __init__(
        self,
        store: Store[Any],
        patterns: Pattern | Iterable[Pattern],
        handler: Callable[[Any], object],
    ) -> None:
        self._store = store
        self.patterns = patterns
        self.handler = handler
        self._live: Subscription = store.bus.subscribe(patterns, handler)

    @property
    def active(self) -> bool:
        """Whether signals are still delivered."""
        return self._live.active

    def _attach(self, bus: SignalBus) -> None:
        if self._live.active:
            self._live.cancel()
            self._live = bus.subscribe(self.patterns, self.handler)

    def cancel(self) -> None:
        """Stop delivering signals to the handler."""
        if self._live.active:
            self._live.cancel()
            subscriptions = self._store._subscriptions
            if subscriptions is not None:
                subscriptions.remove(self)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.cancel()


class StoreBinding:
    """Returned by :meth:`Store.bind`; leaving its ``with`` block unbinds the store."""

    def __init__(self, store: Store[Any]) -> None:
        self.store = store

    def __enter__(self) -> Store[Any]:
        return self.store

    def __exit__(self, *exc_info: object) -> None:
        self.store.unbind()

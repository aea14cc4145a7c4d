"""One page of a run's log in SQL: the query, and the loop that fills it when patterns filter.

The SQL stores read a page of ``signals`` through their primary key ``(run_id, seq)``:
forward after a ``seq``, or backward from before one (the tail). A filter by exact
names is a ``name IN (...)`` (through the partial index of questions and timers when
it asks only for those); a filter by patterns is a ``LIKE`` that lets through a
superset, narrowed here by the pattern itself, page after page until the page is full
or the log ends: a page never holds a signal the patterns do not match, and never
misses one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Sequence
from typing import Any

from reactor._backends.tally import ASKING
from reactor._recording.storebase import check_page, name_filter
from reactor._signals.patterns import Pattern, is_exact

__all__ = ["PageQuery", "read_page"]


@dataclasses.dataclass(frozen=True)
class PageQuery:
    """How a store reads pages of one run's log.

    Attributes:
        table: The signals table.
        columns: The columns each row carries (``seq`` first).
        mark: The driver's placeholder (``?``, ``%s``).
        asking: The predicate of the partial index of questions and timers.
    """

    table: str
    columns: str
    mark: str
    asking: str

    def sql(
        self, run_id: str, after: int, before: int | None, limit: int, names: Sequence[Pattern]
    ) -> tuple[str, list[Any]]:
        """The query of one stretch of rows."""
        mark = self.mark
        where = [f"run_id = {mark}", f"seq > {mark}"]
        params: list[Any] = [run_id, after]
        if before is not None:
            where.append(f"seq < {mark}")
            params.append(before)
        if names and all(isinstance(name, str) for name in names):  # a regex is matched here
            exact = [name for name in names if is_exact(name)]
            terms = []
            if exact:
                terms.append(f"name IN ({', '.join([mark] * len(exact))})")
                params += exact
                if len(exact) == len(names) and set(exact) <= set(ASKING):
                    where.append(self.asking)  # the partial index answers it
            for pattern in names:
                if pattern not in exact:
                    terms.append(f"name LIKE {mark} ESCAPE '\\'")
                    params.append(_like(str(pattern)))
            where.append(f"({' OR '.join(terms)})")
        order = "DESC" if before is not None else "ASC"
        params.append(limit)
        sql = (
            f"SELECT {self.columns} FROM {self.table} WHERE {' AND '.join(where)} "
            f"ORDER BY seq {order} LIMIT {mark}"
        )
        return sql, params


Rows = list[Sequence[Any]]


def read_page(
    query: PageQuery,
    fetch: Callable[[str, list[Any]], Rows],
    run_id: str,
    *,
    after: int,
    before: int | None,
    limit: int,
    names: Collection[Pattern] | None,
) -> Rows:
    """The rows of one page (see :meth:`reactor.SignalStoreBase.signals`), in ``seq`` order.

    ``fetch(sql, params)`` runs a query. With patterns among ``names``, stretches of
    rows are read until ``limit`` of them match or the log ends.
    """
    check_page(after, before, limit)
    chosen: Sequence[Pattern] = () if names is None else _listed(names)
    if names is not None and not chosen:
        return []
    exact_only = all(isinstance(name, str) and is_exact(name) for name in chosen)
    wanted = None if exact_only else name_filter(chosen)
    found: Rows = []
    while True:
        rows = fetch(*query.sql(run_id, after, before, limit, chosen))
        if wanted is None:
            found = list(rows)
            break
        found += [row for row in rows if wanted(row[_NAME])]
        if len(rows) < limit or len(found) >= limit:
            break
        if before is None:
            after = int(rows[-1][0])
        else:
            before = int(rows[-1][0])
    found = found[:limit]
    return found[::-1] if before is not None else found


_NAME = 2
"""Where a row of a page has the signal's name (``seq, id, name, ...``)."""


def _listed(names: Collection[Pattern]) -> Sequence[Pattern]:
    return (names,) if isinstance(names, str) else tuple(names)


def _like(pattern: str) -> str:
    """A ``LIKE`` pattern letting through every name the glob matches (and maybe others)."""
    escaped = pattern.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    for wildcard in (":**", "**:", "**", "*"):
        escaped = escaped.replace(wildcard, "%")
    return escaped

"""KQL's ``summarize``: rows grouped by the ``by`` columns, each group's aggregations.

learn.microsoft.com, Kusto "summarize operator": the output has a row per distinct
combination of the ``by`` values (one row in all when there is no ``by``, even over no rows),
the ``by`` columns first, then the aggregations, named ``count_``, ``countif_``,
``dcount_x``, ``min_x``, ``max_x``, ``sum_x``, ``avg_x``, ``set_x``, ``list_x`` unless a name
is given; ``arg_max(x, cols)`` / ``arg_min`` are the named columns of the row where ``x`` is
greatest / least (``*``: all of them). The aggregation functions' pages: ``count()`` counts
rows, ``countif(p)`` those where ``p`` is true, ``dcount(x)`` the distinct values of ``x``
(exactly here: Kusto estimates), ``min``/``max``/``sum``/``avg`` skip nulls.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from forewarn.resourcegraph.kql import Aggregate, Column, Expr, Star, Summarize
from forewarn.resourcegraph.values import is_number, key_of, rank

Row = dict[str, Any]
Evaluate = Callable[[Expr, Row], Any]
Names = Callable[[Iterable[Column]], list[tuple[str, Expr]]]

_PREFIX = {
    "count": "count_", "countif": "countif_", "dcount": "dcount_", "min": "min_",
    "max": "max_", "sum": "sum_", "avg": "avg_", "make_set": "set_", "make_list": "list_",
}  # fmt: skip


def _name(column: Column, aggregate: Aggregate, names: Names) -> str:
    """``count_``, ``min_n``, ``dcount_name`` for ``dcount(tolower(name))``: the prefix and
    the name KQL gives the argument, when it has one of its own."""
    if column.name:
        return column.name
    prefix = _PREFIX[aggregate.function]
    if not aggregate.arguments:
        return prefix
    ((named, _),) = names((Column("", aggregate.arguments[0]),))
    return prefix if named.startswith("Column") else prefix + named


def _aggregate(aggregate: Aggregate, rows: list[Row], evaluate: Evaluate) -> Any:
    function = aggregate.function
    if function == "count":
        return len(rows)
    (first, *_) = aggregate.arguments
    values = [evaluate(first, row) for row in rows]
    if function == "countif":
        return sum(1 for value in values if value is True)
    present = [value for value in values if value is not None]
    if function == "dcount":
        return len({key_of(value) for value in present})
    if function == "min":
        return min(present, key=rank, default=None)
    if function == "max":
        return max(present, key=rank, default=None)
    numbers = [value for value in present if is_number(value)]
    if function == "sum":
        return sum(numbers) if numbers else None
    if function == "avg":
        return sum(numbers) / len(numbers) if numbers else None
    if function == "make_list":
        return present
    unique: dict[str, Any] = {}
    for value in present:  # make_set
        unique.setdefault(key_of(value), value)
    return list(unique.values())


def _arg(
    column: Column, aggregate: Aggregate, rows: list[Row], evaluate: Evaluate, names: Names
) -> Row:
    """``arg_max``/``arg_min``: the chosen row's columns (nulls when every value is null: no
    row is chosen, and each column of an empty row is null)."""
    first, *returned = aggregate.arguments
    scored = [(evaluate(first, row), row) for row in rows]
    scored = [(value, row) for value, row in scored if value is not None]
    pick = max if aggregate.function == "arg_max" else min
    chosen: Row = pick(scored, key=lambda pair: rank(pair[0]), default=(None, {}))[1]
    label = column.name or names((Column("", first),))[0][0]
    out: Row = {label: evaluate(first, chosen)}
    if any(isinstance(expr, Star) for expr in returned):
        out.update({k: v for k, v in chosen.items() if k not in out})
        return out
    for name, expr in names(Column("", expr) for expr in returned):
        out[name] = evaluate(expr, chosen)
    return out


def summarized(
    rows: list[Row], summarize: Summarize, evaluate: Evaluate, names: Names
) -> list[Row]:
    """``summarize``'s output rows, groups in the order their first row came."""
    by = names(summarize.by)
    groups: dict[str, tuple[Row, list[Row]]] = {}
    for row in rows:
        values = {name: evaluate(expr, row) for name, expr in by}
        key = key_of(list(values.values()))
        groups.setdefault(key, (values, []))[1].append(row)
    if not summarize.by and not groups:
        groups[""] = ({}, [])  # no by: one row, even over no rows
    out: list[Row] = []
    for values, members in groups.values():
        result: Row = dict(values)
        for column in summarize.aggregates:
            aggregate = column.expr
            assert isinstance(aggregate, Aggregate)  # the parser allows nothing else here
            if aggregate.function in ("arg_max", "arg_min"):
                for name, value in _arg(column, aggregate, members, evaluate, names).items():
                    result.setdefault(name, value)
            else:
                result[_name(column, aggregate, names)] = _aggregate(aggregate, members, evaluate)
        out.append(result)
    return out


__all__ = ["summarized"]

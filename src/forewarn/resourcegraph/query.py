"""Running a parsed query (:mod:`forewarn.resourcegraph.kql`) over the table's rows.

KQL's meanings, as far as the subset goes (learn.microsoft.com, Kusto "String operators",
"sort operator", "project operator"): ``==`` and ``in`` are case-sensitive, ``=~``, ``!~``,
``contains`` and ``startswith`` are not; a comparison with a missing value is false; ``sort by``
is descending unless told, with nulls last when descending and first when ascending; a projected
property path is named with underscores (``properties.EventStatus`` becomes
``properties_EventStatus``), another unnamed expression ``Column1``, ``Column2``...; ``count``
is one row with a ``Count`` column.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from forewarn.resourcegraph.kql import (
    Call,
    Compare,
    Count,
    Expr,
    InList,
    Literal,
    Logical,
    Not,
    Path,
    Project,
    Query,
    QueryError,
    Sort,
    SortKey,
    Take,
    Where,
)

#: The table this server answers.
TABLE = "maintenanceresources"

Row = dict[str, Any]


def run(query: Query, rows: Iterable[Mapping[str, Any]]) -> list[Row]:
    """The rows ``query`` selects from ``rows`` (Resource Graph's table), in its order."""
    if query.table.lower() != TABLE:
        raise QueryError(
            f"the table {query.table!r} is not known here; this server answers {TABLE}",
            code="UnknownTable",
            token=query.table,
        )
    result: list[Row] = [dict(row) for row in rows]
    for operator in query.operators:
        if isinstance(operator, Where):
            result = [row for row in result if evaluate(operator.condition, row) is True]
        elif isinstance(operator, Sort):
            result = _sorted(result, operator.keys)
        elif isinstance(operator, Project):
            result = _projected(result, operator)
        elif isinstance(operator, Take):
            result = result[: operator.count]
        elif isinstance(operator, Count):
            result = [{"Count": len(result)}]
    return result


def evaluate(expr: Expr, row: Mapping[str, Any]) -> Any:
    """The value of ``expr`` for ``row``: data only, no code is ever run from the query."""
    if isinstance(expr, Path):
        return _lookup(row, expr.parts)
    if isinstance(expr, Literal):
        return expr.value
    if isinstance(expr, Call):
        return _call(expr.function, evaluate(expr.argument, row))
    if isinstance(expr, Compare):
        return _compare(evaluate(expr.left, row), expr.operator, evaluate(expr.right, row))
    if isinstance(expr, InList):
        value = evaluate(expr.left, row)
        found = value is not None and any(_equal(value, item) for item in expr.values)
        return found != expr.negated
    if isinstance(expr, Logical):
        values = (evaluate(operand, row) is True for operand in expr.operands)
        return all(values) if expr.operator == "and" else any(values)
    if isinstance(expr, Not):
        return evaluate(expr.operand, row) is not True
    raise AssertionError(f"not an expression: {expr!r}")


def _lookup(row: Mapping[str, Any], parts: tuple[str | int, ...]) -> Any:
    value: Any = row
    for part in parts:
        if isinstance(part, int):
            value = (
                value[part]
                if isinstance(value, list) and -len(value) <= part < len(value)
                else None
            )
        elif isinstance(value, Mapping):
            value = value.get(part)
        else:
            return None
        if value is None:
            return None
    return value


def to_string(value: Any) -> str:
    """KQL's ``tostring``: a missing value is ``""``, a property bag or array its JSON."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(value, separators=(",", ":"))


def _call(function: str, value: Any) -> Any:
    if function == "tostring":
        return to_string(value)
    if function == "tolower":
        return to_string(value).lower() if value is not None else None
    if function == "toupper":
        return to_string(value).upper() if value is not None else None
    if function == "isempty":
        return value is None or value == ""
    if function == "isnotempty":
        return not (value is None or value == "")
    if function == "isnull":
        return value is None
    if function == "isnotnull":
        return value is not None
    raise AssertionError(f"unknown function {function}")


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _equal(left: Any, right: Any) -> bool:
    if _is_number(left) and _is_number(right):
        return bool(left == right)
    return type(left) is type(right) and bool(left == right)


def _compare(left: Any, operator: str, right: Any) -> bool:
    if operator == "==":
        return left is not None and right is not None and _equal(left, right)
    if operator == "!=":
        return left is not None and right is not None and not _equal(left, right)
    if left is None or right is None:
        return False
    if operator in ("=~", "!~"):
        same = isinstance(left, str) and isinstance(right, str) and left.lower() == right.lower()
        return same if operator == "=~" else not same
    if operator == "contains":
        return to_string(right).lower() in to_string(left).lower()
    if operator == "startswith":
        return to_string(left).lower().startswith(to_string(right).lower())
    comparable = (_is_number(left) and _is_number(right)) or (
        isinstance(left, str) and isinstance(right, str)
    )
    if not comparable:
        return False
    if operator == "<":
        return bool(left < right)
    if operator == "<=":
        return bool(left <= right)
    if operator == ">":
        return bool(left > right)
    return bool(left >= right)


def _rank(value: Any) -> tuple[int, Any]:
    """An order over mixed values: booleans, numbers, strings, then anything else by JSON."""
    if isinstance(value, bool):
        return (0, value)
    if _is_number(value):
        return (1, value)
    if isinstance(value, str):
        return (2, value)
    return (3, to_string(value))


def _sorted(rows: list[Row], keys: tuple[SortKey, ...]) -> list[Row]:
    ordered = list(rows)
    for key in reversed(keys):  # stable sorts, least significant key first
        values = [(evaluate(key.expr, row), row) for row in ordered]
        present = [pair for pair in values if pair[0] is not None]
        missing = [row for value, row in values if value is None]
        present.sort(key=lambda pair: _rank(pair[0]), reverse=key.descending)
        rows_present = [row for _, row in present]
        ordered = missing + rows_present if key.nulls_first else rows_present + missing
    return ordered


def _projected(rows: list[Row], project: Project) -> list[Row]:
    names: list[str] = []
    unnamed = 0
    for column in project.columns:
        if column.name:
            names.append(column.name)
        elif isinstance(column.expr, Path):
            names.append("_".join(str(part) for part in column.expr.parts))
        else:
            unnamed += 1
            names.append(f"Column{unnamed}")
    return [
        {
            name: evaluate(column.expr, row)
            for name, column in zip(names, project.columns, strict=True)
        }
        for row in rows
    ]


def column_type(values: Iterable[Any]) -> str:
    """Resource Graph's column type of ``values`` (``resultFormat: table``)."""
    for value in values:
        if value is None:
            continue
        if isinstance(value, bool):
            return "boolean"
        if isinstance(value, int):
            return "integer"
        if isinstance(value, float):
            return "real"
        if isinstance(value, str):
            return "string"
        return "object"
    return "object"


__all__ = ["TABLE", "Row", "column_type", "evaluate", "run", "to_string"]

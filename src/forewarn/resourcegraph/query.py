"""Running a parsed query (:mod:`forewarn.resourcegraph.kql`) over the table's rows.

KQL's meanings, as far as the subset goes (learn.microsoft.com, Kusto "String operators",
"sort operator", "project operator", "summarize operator", "join operator", "mv-expand
operator"): ``==`` and ``in`` are case-sensitive, ``=~``, ``!~``, ``in~``, ``has``,
``contains``, ``startswith`` and ``endswith`` are not (their ``_cs`` forms are); ``has`` looks
for a whole term; a comparison with a missing value is false; ``sort by`` is descending unless
told, with nulls last when descending and first when ascending; a projected property path is
named with underscores (``properties.EventStatus`` becomes ``properties_EventStatus``), another
unnamed expression ``Column1``, ``Column2``...; ``count`` is one row with a ``Count`` column;
``summarize`` names its aggregations ``count_``, ``countif_``, ``dcount_name``, ``min_name``...;
``join`` (``innerunique`` unless told) renames a right column whose name the left has with a
``1``; ``mv-expand`` makes a row per element, none for an empty array.

The work a query may do is bounded (:data:`MAX_COST`, :data:`MAX_ROWS`) before it is done, so
a query is refused with a :class:`QueryError` naming the bound rather than run for long.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from forewarn.resourcegraph.aggregate import summarized
from forewarn.resourcegraph.kql import (
    Aggregate,
    Call,
    Column,
    Compare,
    Count,
    Distinct,
    Expr,
    Extend,
    InList,
    Join,
    Literal,
    Logical,
    MvExpand,
    Not,
    Path,
    Project,
    ProjectAway,
    Query,
    QueryError,
    Sort,
    SortKey,
    Summarize,
    Take,
    Top,
    Where,
)
from forewarn.resourcegraph.values import is_number, key_of, rank, to_string

#: The table of scheduled events, and the table of the fleet's VMs and scale sets.
TABLE = "maintenanceresources"
RESOURCES = "resources"
#: The most expression evaluations (rows times terms, a sort's comparisons) one query may
#: ask for [ours]: a filter over the whole 100,000-event table is well inside it.
MAX_COST = 4_000_000
#: The most rows an operator (``mv-expand``, ``join``) may make [ours].
MAX_ROWS = 200_000

Row = dict[str, Any]
Tables = Mapping[str, Callable[[], Iterable[Mapping[str, Any]]]]


class _Budget:
    """What is left of :data:`MAX_COST`, spent before each operator does its work."""

    def __init__(self, limit: int) -> None:
        self.left = limit
        self.limit = limit

    def spend(self, amount: int, what: str) -> None:
        self.left -= amount
        if self.left < 0:
            raise QueryError(
                f"the query is too costly to run: its {what} would take it past the limit of "
                f"{self.limit:,} evaluations (rows times terms); filter with where first or "
                "ask for less",
                code="QueryTooExpensive",
                token=what,
            )


def _rows_bound(rows: list[Row], what: str) -> list[Row]:
    if len(rows) > MAX_ROWS:
        raise QueryError(
            f"{what} makes more than {MAX_ROWS:,} rows, the limit of one operator",
            code="QueryTooLarge",
            token=what,
        )
    return rows


def run(query: Query, tables: Tables, *, limit: int | None = None) -> list[Row]:
    """The rows ``query`` selects from its table (one of ``tables``, by name without regard
    to case), in its order; :class:`QueryError` when it would cost more than ``limit``
    (:data:`MAX_COST` unless given)."""
    return _run(query, tables, _Budget(MAX_COST if limit is None else limit))


def _table(name: str, tables: Tables) -> list[Row]:
    for known, rows in tables.items():
        if known.lower() == name.lower():
            return [dict(row) for row in rows()]
    raise QueryError(
        f"the table {name!r} is not known here; this server answers " + ", ".join(sorted(tables)),
        code="UnknownTable",
        token=name,
    )


def _run(query: Query, tables: Tables, budget: _Budget) -> list[Row]:
    result = _table(query.table, tables)
    for operator in query.operators:
        budget.spend(len(result) * _weight(operator, len(result)), _NAMES[type(operator)])
        if isinstance(operator, Where):
            result = [row for row in result if evaluate(operator.condition, row) is True]
        elif isinstance(operator, Sort):
            result = _sorted(result, operator.keys)
        elif isinstance(operator, Top):
            result = _sorted(result, operator.keys)[: operator.count]
        elif isinstance(operator, Project):
            result = _projected(result, operator.columns)
        elif isinstance(operator, Extend):
            result = _extended(result, operator.columns)
        elif isinstance(operator, ProjectAway):
            away = set(operator.names)
            result = [{k: v for k, v in row.items() if k not in away} for row in result]
        elif isinstance(operator, Distinct):
            shown = _projected(result, operator.columns) if operator.columns else result
            result = _unique(shown)
        elif isinstance(operator, Summarize):
            result = summarized(result, operator, evaluate, named_columns)
        elif isinstance(operator, MvExpand):
            result = _rows_bound(_expanded(result, operator.column), "mv-expand")
        elif isinstance(operator, Join):
            right = _run(operator.right, tables, budget)
            budget.spend(len(result) + len(right), "join")
            result = _rows_bound(_joined(result, right, operator), "join")
        elif isinstance(operator, Take):
            result = result[: operator.count]
        elif isinstance(operator, Count):
            result = [{"Count": len(result)}]
    return result


_NAMES: dict[type, str] = {
    Where: "where", Sort: "sort", Top: "top", Project: "project", Extend: "extend",
    ProjectAway: "project-away", Distinct: "distinct", Summarize: "summarize",
    MvExpand: "mv-expand", Join: "join", Take: "take", Count: "count",
}  # fmt: skip


def _terms(expr: Expr) -> int:
    """How many nodes ``expr`` has: what evaluating it once costs."""
    if isinstance(expr, Call | Aggregate):
        return 1 + sum(_terms(argument) for argument in expr.arguments)
    if isinstance(expr, Compare):
        return 1 + _terms(expr.left) + _terms(expr.right)
    if isinstance(expr, InList):
        return 1 + _terms(expr.left) + len(expr.values)
    if isinstance(expr, Logical):
        return 1 + sum(_terms(operand) for operand in expr.operands)
    if isinstance(expr, Not):
        return 1 + _terms(expr.operand)
    return 1


def _weight(operator: object, rows: int) -> int:
    """The evaluations ``operator`` costs for each of ``rows`` input rows."""
    if isinstance(operator, Where):
        return _terms(operator.condition)
    if isinstance(operator, Sort | Top):
        comparisons = math.ceil(math.log2(rows + 1))  # 0 rows: 0; 1 row: 1
        return sum(_terms(key.expr) for key in operator.keys) * comparisons
    if isinstance(operator, Project | Extend | Distinct):
        return 1 + sum(_terms(column.expr) for column in operator.columns)
    if isinstance(operator, Summarize):
        return 1 + sum(_terms(c.expr) for c in (*operator.aggregates, *operator.by))
    if isinstance(operator, MvExpand):
        return 1 + _terms(operator.column.expr)
    return 1


def evaluate(expr: Expr, row: Mapping[str, Any]) -> Any:
    """The value of ``expr`` for ``row``: data only, no code is ever run from the query."""
    if isinstance(expr, Path):
        return _lookup(row, expr.parts)
    if isinstance(expr, Literal):
        return expr.value
    if isinstance(expr, Call):
        value = _call(expr.function, [evaluate(argument, row) for argument in expr.arguments])
        return _lookup(value, expr.index)  # no index: the value itself
    if isinstance(expr, Compare):
        return _compare(evaluate(expr.left, row), expr.operator, evaluate(expr.right, row))
    if isinstance(expr, InList):
        value = evaluate(expr.left, row)
        if expr.caseless:
            folded = value.lower() if isinstance(value, str) else value
            items = [item.lower() if isinstance(item, str) else item for item in expr.values]
            found = value is not None and any(_equal(folded, item) for item in items)
        else:
            found = value is not None and any(_equal(value, item) for item in expr.values)
        return found != expr.negated
    if isinstance(expr, Logical):
        values = (evaluate(operand, row) is True for operand in expr.operands)
        return _COMBINED[expr.operator](values)
    assert isinstance(expr, Not), expr  # the parser lets no Aggregate nor Star get here
    return evaluate(expr.operand, row) is not True


_COMBINED: dict[str, Callable[[Iterable[bool]], bool]] = {"and": all, "or": any}


def _lookup(row: Any, parts: tuple[str | int, ...]) -> Any:
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


def _call(function: str, values: list[Any]) -> Any:
    value = values[0]
    if function == "split":
        return to_string(value).split(to_string(values[1])) if to_string(values[1]) else None
    if function == "strcat":
        return "".join(to_string(each) for each in values)
    if function == "coalesce":
        return next((each for each in values if each is not None and each != ""), None)
    if function == "strlen":
        return len(to_string(value))
    if function == "array_length":
        return len(value) if isinstance(value, list) else None
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
    return value is not None  # isnotnull: the parser lets no other function through


def _equal(left: Any, right: Any) -> bool:
    if is_number(left) and is_number(right):
        return bool(left == right)
    return type(left) is type(right) and bool(left == right)


def _compare(left: Any, operator: str, right: Any) -> bool:
    if operator == "==":
        return left is not None and right is not None and _equal(left, right)
    if operator == "!=":
        return left is not None and right is not None and not _equal(left, right)
    if operator.removeprefix("!").split("_")[0] in _STRING_OPERATORS:
        return _string_operator(left, operator, right)
    if left is None or right is None:
        return False
    if operator in ("=~", "!~"):
        same = isinstance(left, str) and isinstance(right, str) and left.lower() == right.lower()
        return same if operator == "=~" else not same
    comparable = (is_number(left) and is_number(right)) or (
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


_STRING_OPERATORS = frozenset({"contains", "has", "startswith", "endswith"})
_TERM = re.compile(r"[0-9a-z]", re.IGNORECASE)


def _has(text: str, term: str) -> bool:
    """``has``: ``term`` occurs in ``text`` with no letter or digit joined to either end
    (Kusto "String operators", "What is a term?": "a sequence of alphanumeric characters")."""
    if not term:
        return True
    start = text.find(term)
    while start >= 0:
        end = start + len(term)
        before = start == 0 or not _TERM.match(text[start - 1]) or not _TERM.match(term[0])
        after = end == len(text) or not _TERM.match(text[end]) or not _TERM.match(term[-1])
        if before and after:
            return True
        start = text.find(term, start + 1)
    return False


def _string_operator(left: Any, operator: str, right: Any) -> bool:
    """``contains``, ``has``, ``startswith``, ``endswith``, each negated with ``!`` and
    case-sensitive with ``_cs``; both sides read as strings (a missing value as ``""``)."""
    negated = operator.startswith("!")
    name, _, cased = operator.removeprefix("!").partition("_")
    text, term = to_string(left), to_string(right)
    if not cased:
        text, term = text.lower(), term.lower()
    if name == "contains":
        found = term in text
    elif name == "has":
        found = _has(text, term)
    elif name == "startswith":
        found = text.startswith(term)
    else:
        found = text.endswith(term)
    return found != negated


def _sorted(rows: list[Row], keys: tuple[SortKey, ...]) -> list[Row]:
    ordered = list(rows)
    for key in reversed(keys):  # stable sorts, least significant key first
        values = [(evaluate(key.expr, row), row) for row in ordered]
        present = [pair for pair in values if pair[0] is not None]
        missing = [row for value, row in values if value is None]
        present.sort(key=lambda pair: rank(pair[0]), reverse=key.descending)
        rows_present = [row for _, row in present]
        ordered = missing + rows_present if key.nulls_first else rows_present + missing
    return ordered


def named_columns(columns: Iterable[Column]) -> list[tuple[str, Expr]]:
    """Each of ``columns``' expressions with the name KQL gives it: its own, a path's with
    underscores (``properties_EventStatus``, also for a function of it,
    ``tostring(properties.EventStatus)``), else ``Column1``, ``Column2``..."""
    named: list[tuple[str, Expr]] = []
    unnamed = 0
    for column in columns:
        inner = column.expr
        while isinstance(inner, Call) and inner.arguments and not inner.index:
            inner = inner.arguments[0]  # tostring(properties.EventStatus): properties_...
        if column.name:
            name = column.name
        elif isinstance(inner, Path):
            name = "_".join(str(part) for part in inner.parts)
        else:
            unnamed += 1
            name = f"Column{unnamed}"
        named.append((name, column.expr))
    return named


def _projected(rows: list[Row], columns: tuple[Column, ...]) -> list[Row]:
    named = named_columns(columns)
    return [{name: evaluate(expr, row) for name, expr in named} for row in rows]


def _extended(rows: list[Row], columns: tuple[Column, ...]) -> list[Row]:
    named = named_columns(columns)
    extended: list[Row] = []
    for row in rows:
        new = dict(row)
        for name, expr in named:
            new[name] = evaluate(expr, new)  # a later column sees an earlier one
        extended.append(new)
    return extended


def _unique(rows: list[Row]) -> list[Row]:
    seen: set[str] = set()
    unique: list[Row] = []
    for row in rows:
        key = key_of(row)
        if key not in seen:
            seen.add(key)
            unique.append(row)
    return unique


def _expanded(rows: list[Row], column: Column) -> list[Row]:
    """``mv-expand``: "If the dynamic value is null, a single record is produced for that
    value (null). If the dynamic value is an empty array or property bag, no record is
    produced." (Kusto "mv-expand operator", Returns)."""
    ((name, _),) = named_columns((column,))
    expanded: list[Row] = []
    for row in rows:
        value = evaluate(column.expr, row)
        if isinstance(value, list):
            items: list[Any] = value
        elif isinstance(value, Mapping):
            items = [{key: item} for key, item in value.items()]
        else:
            items = [value]
        for item in items:
            expanded.append({**row, name: item})
            if len(expanded) > MAX_ROWS:
                return expanded
    return expanded


def _joined(left: list[Row], right: list[Row], join: Join) -> list[Row]:
    """``join``: rows of both sides whose keys are equal (a missing key matches nothing);
    ``innerunique`` keeps the first left row of each key, ``leftouter`` a left row without
    a match, its right columns null; a right column whose name the left has is renamed
    ``name1`` (``name2``... if that is taken too)."""
    left_keys = [k for k, _ in join.keys]
    right_keys = [k for _, k in join.keys]

    def key(row: Row, names: list[str]) -> str | None:
        values = [row.get(name) for name in names]
        return None if any(value is None for value in values) else key_of(values)

    by_key: dict[str | None, list[Row]] = {}
    right_columns: dict[str, None] = {}
    for row in right:
        right_columns.update(dict.fromkeys(row))
        found = key(row, right_keys)
        if found is not None:
            by_key.setdefault(found, []).append(row)
    left_columns: dict[str, None] = {}
    for row in left:
        left_columns.update(dict.fromkeys(row))
    renamed: dict[str, str] = {}
    taken = set(left_columns)
    for name in right_columns:
        new, suffix = name, 0
        while new in taken:
            suffix += 1
            new = f"{name}{suffix}"
        renamed[name] = new
        taken.add(new)
    joined: list[Row] = []
    seen: set[str | None] = set()
    for row in left:
        found = key(row, left_keys)  # None matches nothing: by_key holds no None
        if join.kind == "innerunique":
            if found in seen:
                continue
            seen.add(found)
        matches = by_key.get(found, [])
        for match in matches:
            joined.append({**row, **{renamed[k]: v for k, v in match.items()}})
            if len(joined) > MAX_ROWS:
                return joined
        if not matches and join.kind == "leftouter":
            joined.append({**row, **dict.fromkeys(renamed.values())})
    return joined


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
            return "number"  # ColumnDataType: string, integer, number, boolean, object
        if isinstance(value, str):
            return "string"
        return "object"
    return "object"


__all__ = [
    "MAX_COST",
    "MAX_ROWS",
    "RESOURCES",
    "TABLE",
    "Row",
    "Tables",
    "column_type",
    "evaluate",
    "named_columns",
    "run",
    "to_string",
]

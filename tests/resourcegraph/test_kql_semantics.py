"""Each KQL operator's meaning, on small tables, one rule a test (no server: the parser and
the evaluator of :mod:`forewarn.resourcegraph`).

Sources, learn.microsoft.com Kusto Query Language reference (kusto/query/...), quoted beside
each test; the bounds are ours (docs/azure-side.md, "Resource Graph").
"""

from __future__ import annotations

from typing import Any

import pytest
from azure.mgmt.resourcegraph.models import ColumnDataType

from forewarn.resourcegraph.kql import (
    MAX_DEPTH,
    MAX_ITEMS,
    MAX_QUERY_CHARS,
    QueryError,
    parse_query,
)
from forewarn.resourcegraph.query import MAX_COST, MAX_ROWS, column_type, run

ROWS: list[dict[str, Any]] = [
    {"name": "a", "text": "Virtual machine is going to be restarted", "n": 3, "tags": ["x", "y"]},
    {"name": "B", "text": "abc-def ghi", "n": None, "tags": []},
    {"name": "c", "text": "FabriKam", "n": 1, "tags": None},
]
VMS: list[dict[str, Any]] = [
    {"name": "a", "size": "small"},
    {"name": "a", "size": "large"},
    {"name": "c", "size": "medium"},
]


def q(text: str, rows: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    tables = {"t": lambda: ROWS if rows is None else rows, "vms": lambda: VMS}
    return run(parse_query(text), tables)


def names(text: str) -> list[str]:
    return [row["name"] for row in q(text)]


def test_has_looks_for_a_whole_term_without_regard_to_case() -> None:
    """ "has: Right-hand-side (RHS) is a whole term in left-hand-side (LHS)", case-insensitive;
    ``has_cs`` case-sensitive; ``!has`` its negation ("String operators", "Operators on
    strings"); "a term is a sequence of alphanumeric characters" ("What is a term?")."""
    assert names("t | where text has 'RESTARTED'") == ["a"]
    assert names("t | where text has 'restart'") == []  # not a whole term
    assert names("t | where text has 'def'") == ["B"]  # '-' separates terms
    assert names("t | where text has_cs 'Restarted'") == []
    assert names("t | where text !has 'restart'") == ["a", "B", "c"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("t | where text contains 'BRik'", ["c"]),  # the page's own example
        ("t | where text contains_cs 'BRik'", []),
        ("t | where text !contains 'brik'", ["a", "B"]),
        ("t | where text startswith 'fabri'", ["c"]),
        ("t | where text !startswith 'fabri'", ["a", "B"]),
        ("t | where text startswith_cs 'fabri'", []),
        ("t | where text endswith 'KAM'", ["c"]),
        ("t | where text !endswith 'KAM'", ["a", "B"]),
        ("t | where text endswith_cs 'KAM'", []),
        ("t | where name in~ ('A', 'b')", ["a", "B"]),
        ("t | where name !in~ ('A', 'b')", ["c"]),
        ("t | where name in ('A', 'b')", []),
        ("t | where name !in ('a')", ["B", "c"]),
        ("t | where name =~ 'b'", ["B"]),
        ("t | where name == 'b'", []),
    ],
)
def test_string_operators_case(text: str, expected: list[str]) -> None:
    """ "String operators": ``contains``, ``startswith``, ``endswith``, ``in~``, ``=~`` are
    case-insensitive, their ``_cs`` forms, ``in`` and ``==`` case-sensitive
    (``"FabriKam" contains "BRik"`` is true, ``contains_cs`` false)."""
    assert names(text) == expected


def test_sort_places_nulls_by_direction_unless_told() -> None:
    """ "Default for asc is nulls first. Default for desc is nulls last." and desc is the
    default ("sort operator", Parameters); ``top`` sorts alike ("top operator")."""
    assert names("t | sort by n") == ["a", "c", "B"]
    assert names("t | sort by n asc") == ["B", "c", "a"]
    assert names("t | sort by n asc nulls last") == ["c", "a", "B"]
    assert names("t | sort by n desc nulls first") == ["B", "a", "c"]
    assert names("t | sort by n DESC  NULLS  FIRST") == ["B", "a", "c"]
    assert names("t | top 2 by n") == ["a", "c"]
    assert names("t | top 1 by n asc") == ["B"]


def test_summarize_without_by_is_one_row_even_over_nothing() -> None:
    """ "summarize operator": "If the input table is empty, the output depends on whether
    GroupExpression is used: if it isn't, the output is a single (empty) row" -- count() 0."""
    assert q("t | where name == 'none' | summarize count()") == [{"count_": 0}]
    assert q("t | where name == 'none' | summarize count() by name") == []


def test_summarize_aggregations_skip_nulls_and_name_their_columns() -> None:
    """``count()``, ``countif()``, ``dcount()``, ``min()``/``max()``/``sum()``/``avg()``
    ("null values are ignored"), ``make_set``/``make_list``; names ``count_``, ``min_n``..."""
    (row,) = q(
        "t | summarize count(), countif(n > 1), dcount(tolower(name)), min(n), max(n), sum(n),"
        " avg(n), make_list(name), make_set(n)"
    )
    assert row == {
        "count_": 3,
        "countif_": 1,
        "dcount_name": 3,
        "min_n": 1,
        "max_n": 3,
        "sum_n": 4,
        "avg_n": 2.0,
        "list_name": ["a", "B", "c"],
        "set_n": [3, 1],
    }


def test_arg_max_returns_the_row_of_the_greatest_value() -> None:
    """ "arg_max(ExprToMaximize, * | ExprToReturn [, ...])": "Finds a row in the group that
    maximizes ExprToMaximize, and returns the value of ExprToReturn" ("arg_max()")."""
    assert q("t | summarize arg_max(n, name)") == [{"n": 3, "name": "a"}]
    assert q("t | summarize arg_min(n, *)") == [
        {"n": 1, "name": "c", "text": "FabriKam", "tags": None}
    ]
    assert q("t | summarize arg_max(n, *)") == [
        {"n": 3, "name": "a", "text": ROWS[0]["text"], "tags": ["x", "y"]}
    ]


def test_extend_adds_a_column_and_an_earlier_one_is_seen() -> None:
    """ "extend operator": "Create calculated columns and append them to the result set"."""
    assert q("t | take 1 | extend low = tolower(name), long = strlen(low) | project low, long") == [
        {"low": "a", "long": 1}
    ]


def test_distinct_and_project_away() -> None:
    """ "distinct operator": "Produces a table with the distinct combination of the provided
    columns"; "project-away operator": "Select what columns from the input to exclude"."""
    assert q("vms | distinct name") == [{"name": "a"}, {"name": "c"}]
    assert q("vms | project-away size") == [{"name": "a"}, {"name": "a"}, {"name": "c"}]


def test_mv_expand_a_row_per_element_none_for_an_empty_array_one_for_null() -> None:
    """ "If the dynamic value is null, a single record is produced for that value (null). If
    the dynamic value is an empty array or property bag, no record is produced." ("mv-expand
    operator", Returns)."""
    assert q("t | mv-expand tag = tags | project name, tag") == [
        {"name": "a", "tag": "x"},
        {"name": "a", "tag": "y"},
        {"name": "c", "tag": None},
    ]


def test_join_kinds() -> None:
    """ "join operator": ``innerunique`` (the default) "Left side deduplication" -- one left
    row per key; ``inner`` every match; ``leftouter`` a left row without a match with nulls;
    a right column whose name the left has is renamed (``name1``); $left/$right keys."""
    inner = q("vms | join kind=inner (t | project name, n) on name")
    assert [(row["size"], row["n"]) for row in inner] == [("small", 3), ("large", 3), ("medium", 1)]
    assert list(inner[0]) == ["name", "size", "name1", "n"]
    unique = q("vms | join (t | project name, n) on name")
    assert [row["size"] for row in unique] == ["small", "medium"]
    outer = q("t | join kind=leftouter (vms | where size != 'small') on $left.name == $right.name")
    assert [(row["name"], row["size"]) for row in outer] == [
        ("a", "large"),
        ("B", None),
        ("c", "medium"),
    ]


def test_a_query_past_the_cost_bound_is_refused_naming_it() -> None:
    """Ours (docs/azure-side.md, "Resource Graph"): a query's evaluations (rows times terms)
    are bounded before it runs, and one past the bound is refused naming the bound and the
    operator, not run."""
    rows = [{"n": 0}] * 10_000  # the first term is true: cheap to run, costed whole
    per_row = MAX_COST // len(rows)  # each `n == k` is 3 terms, `or` one more
    past = " or ".join(f"n == {k}" for k in range(per_row // 3 + 1))
    with pytest.raises(QueryError) as refused:
        q(f"t | where {past}", rows)
    assert refused.value.code == "QueryTooExpensive"
    assert f"{MAX_COST:,}" in str(refused.value)
    assert refused.value.token == "where"
    within = " or ".join(f"n == {k}" for k in range(per_row // 3))
    assert len(q(f"t | where {within}", rows)) == len(rows)  # just inside: run


def test_an_operator_making_too_many_rows_is_refused() -> None:
    """Ours: ``mv-expand`` and ``join`` make at most MAX_ROWS rows."""
    rows = [{"k": 1, "i": i} for i in range(MAX_ROWS // 1000 + 1)]
    many = {"t": lambda: rows, "vms": lambda: [{"k": 1, "j": j} for j in range(1000)]}
    with pytest.raises(QueryError) as refused:
        run(parse_query("t | join kind=inner (vms) on k"), many)
    assert refused.value.code == "QueryTooLarge"
    assert f"{MAX_ROWS:,}" in str(refused.value)


@pytest.mark.parametrize(
    ("text", "term", "found"),
    [
        ("restart", "restart", True),  # the whole text
        ("restart now", "restart", True),  # at the start
        ("now restart", "restart", True),  # at the end
        ("restarted, then restart", "restart", True),  # not the first occurrence
        ("restarted", "restart", False),
        ("unrestart", "restart", False),
        ("abc-def", "-def", True),  # a term beginning with a separator
        ("abc-def", "abc-", True),  # a term ending with one
        ("xabc-def", "abc-", False),
        ("restarts restart", "restart", True),  # the first occurrence joined after
        ("restart restarts", "restart", True),  # the last one joined after
        ("restarts restart restarts", "restart", True),  # the middle one alone whole
        ("abc-def", "c-d", False),  # inside two terms
        ("abc", "", True),
    ],
)
def test_has_term_boundaries(text: str, term: str, found: bool) -> None:
    """ "has": the RHS "is a whole term in" the LHS; terms are runs of alphanumeric characters
    ("String operators", "What is a term?")."""
    rows = [{"name": "x", "text": text}]
    assert (q(f"t | where text has '{term}'", rows) != []) is found


def test_bool_literals_and_distinct_star() -> None:
    """``true``/``false`` literals ("The bool data type"); ``distinct *``: "Produces a table
    with the distinct combination of" every column ("distinct operator")."""
    assert names("t | where isnull(n) == true") == ["B"]
    assert names("t | where isnull(n) == false") == ["a", "c"]
    twice = [{"a": 1, "b": 2}, {"a": 1, "b": 2}, {"a": 1, "b": 3}]
    assert q("t | distinct *", twice) == [{"a": 1, "b": 2}, {"a": 1, "b": 3}]


def test_join_keys_either_way_round_and_refused_on_one_side() -> None:
    """``on $left.a == $right.b`` names the left side's column and the right side's, in
    either order ("join operator", Parameters: "Attributes"); both on one side is refused."""
    one_way = q("t | join kind=inner (vms) on $left.name == $right.name")
    other_way = q("t | join kind=inner (vms) on $right.name == $left.name")
    assert one_way == other_way
    assert [row["size"] for row in one_way] == ["small", "large", "medium"]
    with pytest.raises(QueryError):
        parse_query("t | join (vms) on $left.name == $left.name")


def test_mv_expand_names_and_property_bags() -> None:
    """ "mv-expand operator": a column expanded keeps its name; an expression gets the name
    given; "kind=bag ... property bags are expanded into single-entry property bags"."""
    rows = [{"name": "a", "tags": ["x", "y"], "bag": {"k": 1, "l": 2}}]
    assert [row["tags"] for row in q("t | mv-expand tags", rows)] == ["x", "y"]
    assert [row["bag"] for row in q("t | mv-expand bag", rows)] == [{"k": 1}, {"l": 2}]
    assert [row["name"] for row in q("t | mv-expand tags", rows)] == ["a", "a"]


def test_aggregations_over_mixed_and_missing_values() -> None:
    """``sum``/``avg`` of numbers only, nulls skipped; ``min``/``max`` of strings; a group
    whose values are all null gives null ("summarize operator", "Default values of
    aggregations"); ``make_set`` keeps each value once; ``arg_max`` skips nulls and names an
    expression's column after the path it reads; an aggregation can be named."""
    rows: list[dict[str, Any]] = [
        {"g": 1, "v": 2, "s": "b"},
        {"g": 1, "v": None, "s": "a"},
        {"g": 1, "v": 4, "s": "b"},
        {"g": 2, "v": None, "s": None},
    ]
    assert q(
        "t | summarize sum(v), avg(v), min(s), max(s), make_set(s), total = count() by g", rows
    ) == [
        {"g": 1, "sum_v": 6, "avg_v": 3.0, "min_s": "a", "max_s": "b", "set_s": ["b", "a"],
         "total": 3},
        {"g": 2, "sum_v": None, "avg_v": None, "min_s": None, "max_s": None, "set_s": [],
         "total": 1},
    ]  # fmt: skip
    assert q("t | summarize arg_max(v, s) by g", rows) == [
        {"g": 1, "v": 4, "s": "b"},
        {"g": 2, "v": None, "s": None},
    ]
    assert q("t | summarize arg_min(tolower(s), v)", rows) == [{"s": "a", "v": None}]
    assert q("t | summarize m = arg_max(v, s)", rows) == [{"m": 4, "s": "b"}]


def test_column_types_of_the_table_format() -> None:
    """Resource Graph's table format names each column's type (REST API "Resources",
    ``ColumnDataType``: string, integer, number, boolean, object): the first value that is
    not null decides; each is one ``azure-mgmt-resourcegraph``'s ``ColumnDataType`` knows."""
    assert {column_type([v]) for v in (True, 3, 1.5, "x", [1])} <= {t.value for t in ColumnDataType}
    assert column_type([None, True]) == "boolean"
    assert column_type([None, 3]) == "integer"
    assert column_type([1.5]) == "number"
    assert column_type(["x", 1]) == "string"
    assert column_type([[1]]) == "object"
    assert column_type([None]) == "object"
    assert column_type([]) == "object"


def test_tostring_of_each_kind_of_value() -> None:
    """ "tostring()": "If the value is null, the result is an empty string"; a bool is
    ``true``/``false``, a number its digits, an array or bag its JSON ("tostring()",
    Returns)."""
    rows: list[dict[str, Any]] = [
        {"v": None},
        {"v": True},
        {"v": False},
        {"v": 12},
        {"v": 1.5},
        {"v": "x"},
        {"v": {"b": [1, "y"]}},
    ]
    shown = [row["s"] for row in q("t | project s = tostring(v)", rows)]
    assert shown == ["", "true", "false", "12", "1.5", "x", '{"b":[1,"y"]}']
    assert [row["s"] for row in q("t | project s = toupper(v)", rows[:3])] == [
        None,
        "TRUE",
        "FALSE",
    ]


def test_dcount_min_max_and_arg_max_over_mixed_values() -> None:
    """``dcount`` counts equal values once, however a bag's keys are ordered; ``min``/``max``
    order values of different types (bool, then numbers, then strings) rather than fail;
    ``arg_max`` over a tie returns the first row."""
    rows: list[dict[str, Any]] = [
        {"v": {"a": 1, "b": 2}, "w": "b", "n": 1},
        {"v": {"b": 2, "a": 1}, "w": 3, "n": 2},
        {"v": {"a": 2}, "w": True, "n": 2},
    ]
    assert q("t | summarize dcount(v), min(w), max(w)", rows) == [
        {"dcount_v": 2, "min_w": True, "max_w": "b"}
    ]
    assert q("t | summarize arg_max(n, w)", rows) == [{"n": 2, "w": 3}]
    assert q("t | summarize make_list(n), make_set(n)", rows) == [
        {"list_n": [1, 2, 2], "set_n": [1, 2]}  # make_list keeps each value, make_set once
    ]
    assert q("t | summarize arg_min(n, w)", rows) == [{"n": 1, "w": "b"}]


def test_sort_over_values_of_different_types_keeps_one_order() -> None:
    """A dynamic column may hold values of any type; KQL's "sort operator" page orders each
    type but gives no order across types, so ours is fixed [ours] (``values.rank``):
    booleans, then numbers (an integer and a real compared as numbers), then strings, then
    arrays and property bags by their JSON text, the reverse when descending."""
    rows: list[dict[str, Any]] = [
        {"name": "bag", "v": {"k": 1}},
        {"name": "text", "v": "10"},
        {"name": "real", "v": 2.5},
        {"name": "array", "v": [1]},
        {"name": "true", "v": True},
        {"name": "int", "v": 3},
        {"name": "false", "v": False},
        {"name": "small", "v": -1},
        {"name": "word", "v": "a"},
    ]
    ascending = ["false", "true", "small", "real", "int", "text", "word", "array", "bag"]
    assert [row["name"] for row in q("t | sort by v asc", rows)] == ascending
    assert [row["name"] for row in q("t | sort by v desc", rows)] == ascending[::-1]


def test_join_keys_named_differently_pair_the_left_column_with_the_right() -> None:
    """``$left.a == $right.b``: "a" is the left table's column, "b" the right's, whichever
    is written first ("join operator", Parameters: "Attributes")."""
    left: list[dict[str, Any]] = [{"name": "a", "n": 1}, {"name": "b", "n": 2}]
    right: list[dict[str, Any]] = [{"label": "b", "size": "large"}, {"label": "x", "size": "s"}]
    tables = {"t": lambda: left, "vms": lambda: right}
    for on in ("$left.name == $right.label", "$right.label == $left.name"):
        joined = run(parse_query(f"t | join kind=inner (vms) on {on}"), tables)
        assert joined == [{"name": "b", "n": 2, "label": "b", "size": "large"}]


@pytest.mark.parametrize(
    ("text", "message", "code", "token"),
    [
        (
            "t | join kind = FullOuter (vms) on name",
            "join kind=fullouter is not supported; supported: inner, innerunique, leftouter",
            "UnsupportedOperator",
            "kind = FullOuter",
        ),
        (
            "t | join (vms) on $left.name == $left.size",
            "join on $left.x == $right.y names each side once",
            "ParserFailure",
            "$left",
        ),
        ("t | take -1", "take needs a count of 0 or more", "ParserFailure", "-1"),
        (
            "t | mv-expand count()",
            "the aggregation count() belongs in summarize, not mv-expand",
            "UnsupportedFunction",
            "count",
        ),
        (
            "t | where n in (" + ", ".join(["1"] * (MAX_ITEMS + 1)) + ")",
            f"in (...) holds more than {MAX_ITEMS} values",
            "QueryTooLarge",
            None,
        ),
    ],
)
def test_each_refusal_of_the_parser_says_what_it_refuses(
    text: str, message: str, code: str, token: str | None
) -> None:
    """Resource Graph refuses a query it cannot run with an error whose details name the
    code and the part refused (docs/azure-side.md, "Resource Graph"; the kinds of join KQL
    has beyond ours, "join operator", are refused by name, as are the bounds [ours])."""
    with pytest.raises(QueryError) as refused:
        parse_query(text)
    assert (str(refused.value), refused.value.code, refused.value.token) == (message, code, token)


def test_the_bounds_of_the_parser_at_the_bound() -> None:
    """[ours] ``in`` takes up to MAX_ITEMS values; ``take 0`` is a count of 0, no row
    ("take operator": "The number of rows to return")."""
    assert names("t | where n in (" + ", ".join(["3"] * MAX_ITEMS) + ")") == ["a"]
    assert names("t | take 0") == []


_AGGREGATIONS_ONLY = (
    "summarize takes aggregations (count(), countif(), dcount(), min(), max(), sum(), avg(), "
    "make_set(), make_list(), arg_max(), arg_min()) before by"
)
_NOT_SUPPORTED = (
    "is not supported; supported: where, sort by, order by, top, project, project-away, "
    "extend, distinct, summarize, mv-expand, join, take, limit, count"
)


@pytest.mark.parametrize(
    ("text", "message", "code", "token"),
    [
        ("t | summarize", "summarize needs an aggregation or a by clause", "ParserFailure",
         "summarize"),
        ("t | summarize name", _AGGREGATIONS_ONLY, "UnsupportedOperator", "summarize"),
        ("t | summarize count(), low = tolower(name)", _AGGREGATIONS_ONLY,
         "UnsupportedOperator", "low"),
        ("t | summarize count() by count()",
         "the aggregation count() belongs in summarize, not summarize by", "UnsupportedFunction",
         "count"),
        ("t | distinct name, max(n)", "the aggregation max() belongs in summarize, not distinct",
         "UnsupportedFunction", "max"),
        ("t | extend x = 1, y = count()", "the aggregation count() belongs in summarize, not extend",
         "UnsupportedFunction", "count"),
        ("t | project tolower(*)", "* is not a value in tolower()", "ParserFailure", "*"),
        ("t | project n, c = count()", "the aggregation count() belongs in summarize, not "
         "project", "UnsupportedFunction", "count"),
        ("t | where max(n) > 1", "the aggregation max() belongs in summarize, not where",
         "UnsupportedFunction", "max"),
        ("t | sort by n, min(n)", "the aggregation min() belongs in summarize, not sort by",
         "UnsupportedFunction", "min"),
        ("t | where not(count())", "the aggregation count() belongs in summarize, not not()",
         "UnsupportedFunction", "count"),
        ("t | summarize max(count())", "the aggregation count() belongs in summarize, not max()",
         "UnsupportedFunction", "count"),
    ],
)  # fmt: skip
def test_each_operator_refuses_an_aggregation_outside_summarize(
    text: str, message: str, code: str, token: str | None
) -> None:
    """ "summarize operator": ``summarize [Column =] Aggregation [, ...] [by [Column =]
    GroupExpression [, ...]]``, "Aggregation: A call to an aggregation function", and at
    least one of the two; ``extend``/``distinct``/``by`` take scalar expressions ("extend
    operator", "distinct operator"); a refusal names its code and part (docs/azure-side.md,
    "Resource Graph")."""
    with pytest.raises(QueryError) as refused:
        parse_query(text)
    assert (str(refused.value), refused.value.code, refused.value.token) == (message, code, token)


@pytest.mark.parametrize(
    ("operator", "where"),
    [
        ("t | project {}", "project"),
        ("t | extend {}", "extend"),
        ("t | distinct {}", "distinct"),
        ("t | summarize count() by {}", "summarize by"),
        ("t | summarize {}", "summarize"),
    ],
)
def test_the_columns_an_operator_names_are_bounded_at_the_bound(operator: str, where: str) -> None:
    """[ours] (docs/azure-side.md, "Resource Graph"): an operator names at most MAX_ITEMS
    columns; one more is refused naming the operator and the bound."""
    column = "count()" if where == "summarize" else "n"
    parse_query(operator.format(", ".join([column] * MAX_ITEMS)))
    with pytest.raises(QueryError) as refused:
        parse_query(operator.format(", ".join([column] * (MAX_ITEMS + 1))))
    assert (str(refused.value), refused.value.code, refused.value.token) == (
        f"{where} names more than {MAX_ITEMS} columns",
        "QueryTooLarge",
        None,
    )


@pytest.mark.parametrize(
    ("text", "word", "where"),
    [
        ("make-series count() on x", "make-series", (1, 5)),  # the first word of the text
        ("t | project-rename", "project-rename", (1, 12)),  # the last word of the text
        ("t | top 2 by n | project-reorder n", "project-reorder", (1, 25)),
        ("t | where n == 1 | sort-by n", "sort-by", (1, 24)),
    ],
)
def test_a_known_hyphenated_operator_is_named_whole(
    text: str, word: str, where: tuple[int, int]
) -> None:
    """KQL's ``make-series``, ``project-rename``, ``project-reorder`` ("Tabular operators")
    are refused as operators not supported, named whole, though the lexer stops at the
    ``-`` (docs/azure-side.md, "Resource Graph": "Anything else (union, parse,
    make-series...) is a 400 ... naming the part")."""
    with pytest.raises(QueryError) as refused:
        parse_query(text)
    error = refused.value
    assert (str(error), error.code, error.token, error.where) == (
        f"unexpected {word!r} at line 1: the operator {word!r} {_NOT_SUPPORTED}",
        "UnsupportedOperator",
        word,
        where,
    )


@pytest.mark.parametrize(
    ("text", "message", "code", "token", "where"),
    [
        ("t | where n == 1 union", f"unexpected 'union' at line 1, column 18: the operator "
         f"'union' {_NOT_SUPPORTED}", "UnsupportedOperator", "union", (1, 18)),
        ("t | where n == 1 make-series", "unexpected 'make-series' at line 1, column 18: the "
         f"operator 'make-series' {_NOT_SUPPORTED}", "UnsupportedOperator", "make-series",
         (1, 18)),
        ("t | where n == 1 mystery", "unexpected 'mystery' at line 1, column 18: not part of "
         "the supported query language", "ParserFailure", "mystery", (1, 18)),
        ("t | project-rename_x", "unexpected '-rename_x' at line 1, column 12: not part of "
         "the supported query language", "ParserFailure", "-rename_x", (1, 12)),  # no operator
        ("t | make-series2", "unexpected 'make' at line 1, column 5: not part of the "
         "supported query language", "ParserFailure", "make", (1, 5)),
        ("t |", "unexpected the end of the query at line 1, column 3: not part of the "
         "supported query language", "ParserFailure", "", (1, 3)),
        ("@ | take 1", "unexpected '@' at line 1, column 1: not part of the supported query "
         "language", "ParserFailure", "@", (1, 1)),
        ("t | where n\n  @@ 1", "unexpected '@@' at line 2, column 3: not part of the "
         "supported query language", "ParserFailure", "@@", (2, 3)),
        ("t | where n " + "@" * 20, "unexpected '" + "@" * 16 + "' at line 1, column 13: not "
         "part of the supported query language", "ParserFailure", "@" * 16, (1, 13)),
        ("t | where n == 1" + "\x0b" * 17, "unexpected '\\x0b' at line 1, column 17: not part "
         "of the supported query language", "ParserFailure", "\x0b", (1, 17)),  # blank to Python
    ],
)  # fmt: skip
def test_a_refusal_of_the_grammar_names_the_part_and_where(
    text: str, message: str, code: str, token: str, where: tuple[int, int]
) -> None:
    """What the grammar does not name is refused naming the part (at most 16 characters of
    it, the first word), its line and column; a KQL operator not supported here says so
    (docs/azure-side.md, "Resource Graph")."""
    with pytest.raises(QueryError) as refused:
        parse_query(text)
    error = refused.value
    assert (str(error), error.code, error.token, error.where) == (message, code, token, where)


@pytest.mark.parametrize("extra", [0, 1])
def test_mv_expand_makes_at_most_max_rows(extra: int) -> None:
    """[ours] (docs/azure-side.md, "Resource Graph": "200,000 rows made by one mv-expand or
    join; past either it is a 400 naming the limit"): exactly MAX_ROWS rows are made, one
    more is refused naming the operator."""
    rows = [{"name": "a", "tags": list(range(MAX_ROWS + extra))}]
    if not extra:
        assert q("t | mv-expand tags | count", rows) == [{"Count": MAX_ROWS}]
        return
    with pytest.raises(QueryError) as refused:
        q("t | mv-expand tags", rows)
    assert (str(refused.value), refused.value.code, refused.value.token) == (
        f"mv-expand makes more than {MAX_ROWS:,} rows, the limit of one operator",
        "QueryTooLarge",
        "mv-expand",
    )


@pytest.mark.parametrize("extra", [0, 1])
def test_join_makes_at_most_max_rows(extra: int) -> None:
    """[ours] (docs/azure-side.md, "Resource Graph"): a join making exactly MAX_ROWS rows
    runs, one making a row more is refused naming the operator."""
    left = [{"k": 1, "i": i} for i in range(MAX_ROWS // 1000)] + [{"k": 2, "i": -1}] * extra
    right = [{"k": 1, "j": j} for j in range(1000)] + [{"k": 2, "j": -1}]
    tables = {"t": lambda: left, "vms": lambda: right}
    query = parse_query("t | join kind=inner (vms) on k | count")
    if not extra:
        assert run(query, tables) == [{"Count": MAX_ROWS}]
        return
    with pytest.raises(QueryError) as refused:
        run(query, tables)
    assert (str(refused.value), refused.value.code, refused.value.token) == (
        f"join makes more than {MAX_ROWS:,} rows, the limit of one operator",
        "QueryTooLarge",
        "join",
    )


def test_join_a_null_key_matches_nothing() -> None:
    """A key is matched with ``==`` ("join operator": "the values of the key columns ...
    are equal"), and "Applying the equality operator to two null values yields
    bool(null)" ("Null values", "Equality and inequality of null values"): a row whose key
    is null or missing matches no row, not even another null one; ``leftouter`` keeps it
    with the right's columns null."""
    left: list[dict[str, Any]] = [{"k": None, "a": 1}, {"k": 1, "a": 2}, {"a": 3}]
    right: list[dict[str, Any]] = [{"k": None, "b": 1}, {"k": 1, "b": 2}, {"b": 3}]
    tables = {"t": lambda: left, "vms": lambda: right}
    matched = [{"k": 1, "a": 2, "k1": 1, "b": 2}]
    for kind in ("inner", "innerunique"):
        assert run(parse_query(f"t | join kind={kind} (vms) on k"), tables) == matched
    assert run(parse_query("t | join kind=leftouter (vms) on k"), tables) == [
        {"k": None, "a": 1, "k1": None, "b": None},
        *matched,
        {"a": 3, "k1": None, "b": None},
    ]
    two = {"t": lambda: [{"k": 1, "l": None, "a": 1}], "vms": lambda: [{"k": 1, "l": None}]}
    assert run(parse_query("t | join kind=inner (vms) on k, l"), two) == []  # one null of two


def test_join_renames_a_right_column_the_left_has_with_the_next_free_number() -> None:
    """docs/azure-side.md, "Resource Graph": "a right column the left already has is renamed
    name1"; when the left has ``name1`` as well the next number is taken (``name2``), and a
    name made so is not made twice (the right's own ``k1`` after its ``k`` became ``k1``)."""
    left: list[dict[str, Any]] = [{"k": 1, "x": 1, "x1": 2}]
    right: list[dict[str, Any]] = [{"k": 1, "x": 3, "x1": 4, "k1": 5, "y": 6}]
    tables = {"t": lambda: left, "vms": lambda: right}
    assert run(parse_query("t | join kind=inner (vms) on k"), tables) == [
        {"k": 1, "x": 1, "x1": 2, "k1": 1, "x2": 3, "x11": 4, "k11": 5, "y": 6}
    ]


def test_extend_names_its_columns_and_keeps_the_row() -> None:
    """ "extend operator": "Create calculated columns and append them to the result set";
    ``ColumnName``: "Name of the column to add or update", an unnamed expression named
    ``Column1``... ("project operator"); the row's own columns kept, in their order."""
    rows: list[dict[str, Any]] = [{"name": "a", "n": 2}, {"name": "b", "n": 3}]
    assert q("t | extend m = n, 1 == 1, n = strlen(name), Column2 = m", rows) == [
        {"name": "a", "n": 1, "m": 2, "Column1": True, "Column2": 2},
        {"name": "b", "n": 1, "m": 3, "Column1": True, "Column2": 3},
    ]


def test_string_literals_read_their_escapes() -> None:
    """ "The string data type", string literals: "Use the backslash character to escape the
    enclosing quote characters, tab characters (\\t), newline characters (\\n), and the
    backslash itself (\\\\)"; either quote may enclose a string, the other kept as it is;
    ``\\r`` [ours] a carriage return, another escaped character itself."""
    rows: list[dict[str, Any]] = [{"name": "x"}]
    shown = q(
        r"""t | project a = 'it\'s', b = "say \"hi\"", c = 'a\tb\nc\rd', d = '\\n', """
        r"""e = '"', f = "'", g = 'w\q', h = "\\", i = '', k = 'x\\\'y'""",
        rows,
    )
    assert shown == [
        {"a": "it's", "b": 'say "hi"', "c": "a\tb\nc\rd", "d": "\\n", "e": '"', "f": "'",
         "g": "wq", "h": "\\", "i": "", "k": "x\\'y"}
    ]  # fmt: skip
    assert q(r"t | where name == 'x' | project v = properties['a\'b']", [
        {"name": "x", "properties": {"a'b": 1}}
    ]) == [{"v": 1}]  # fmt: skip


def test_summarize_by_alone_gives_each_group_once() -> None:
    """ "summarize operator": ``T | summarize [[Column =] Aggregation [, ...]] [by [Column =]
    GroupExpression [, ...]]``; GroupExpression: "The output will have as many records as
    there are distinct values of all the group expressions" -- with no aggregation, only the
    ``by`` columns (learn.microsoft.com training, "Use the summarize operator": ``summarize by
    Activity`` "returns one column that is a unique list of Activity column values")."""
    assert q("vms | summarize by name") == [{"name": "a"}, {"name": "c"}]


@pytest.mark.parametrize(
    ("text", "refused", "cost"),
    [
        ("t | where n == 1", "where", 3 * 3),  # a comparison and its two sides
        ("t | where n in (1, 2)", "where", 3 * 4),  # the value and each of the list's
        ("t | where not(isnull(n)) and name == 'a' or true", "where", 3 * 9),
        ("t | where n !in~ ('a')", "where", 3 * 3),
        ("t | sort by n, name", "sort", 3 * 2 * 2),  # each key, ceil(log2(3 + 1)) comparisons a row
        ("t | top 2 by strlen(name)", "top", 3 * 2 * 2),
        ("t | take 1 | sort by n", "sort", 3 + 1),  # one row: one comparison
        ("t | take 0 | sort by n", "take", 3),
        ("t | project name, l = tolower(name)", "project", 3 * 4),  # one, and each column's terms
        ("t | extend l = tolower(name)", "extend", 3 * 3),
        ("t | extend l = tolower(tostring(name))", "extend", 3 * 4),  # a call's call counted
        ("t | where strlen(name) == 1", "where", 3 * 4),
        ("t | where 1 == strlen(name)", "where", 3 * 4),
        ("t | where tolower(name) in ('a')", "where", 3 * 4),
        ("t | mv-expand p = split(name, 'x')", "mv-expand", 3 * 4),
        ("t | distinct name", "distinct", 3 * 2),
        ("t | summarize count(), max(n) by name", "summarize", 3 * 5),
        ("t | mv-expand tags", "mv-expand", 3 * 2),
        ("t | take 2 | count", "count", 3 + 2),
        ("t | project-away n", "project-away", 3),
        ("t | join kind=inner (vms | where size != 'x') on name", "join", 3 + 3 * 3 + 3 + 3),
    ],
)
def test_a_query_costs_its_rows_times_its_terms(text: str, refused: str, cost: int) -> None:
    """[ours] docs/azure-side.md, "Resource Graph": a query's work is "evaluations (rows
    times the terms of each operator, a sort's comparisons counted)", counted before each
    operator runs: a query costing exactly the limit runs, one costing one more is refused
    naming the operator. ``join`` costs a row of each side, after the right side's own
    operators."""
    tables = {"t": lambda: ROWS, "vms": lambda: VMS}
    run(parse_query(text), tables, limit=cost)
    with pytest.raises(QueryError) as error:
        run(parse_query(text), tables, limit=cost - 1)
    assert (error.value.code, error.value.token) == ("QueryTooExpensive", refused)
    assert str(error.value) == (
        f"the query is too costly to run: its {refused} would take it past the "
        f"limit of {cost - 1:,} evaluations (rows times terms); filter with where first or ask "
        "for less"
    )


_FUNCTIONS_SUPPORTED = (
    "supported: not, array_length, coalesce, isempty, isnotempty, isnotnull, isnull, split, "
    "strcat, strlen, tolower, tostring, toupper; in summarize: arg_max, arg_min, avg, count, "
    "countif, dcount, make_list, make_set, max, min, sum"
)


@pytest.mark.parametrize(
    ("text", "message", "code", "token", "where"),
    [
        ("t | where strlen(name, 1) > 1", "strlen() takes 1 argument(s), not 2",
         "InvalidArguments", "strlen", (1, 11)),
        ("t | where StrCat() == 'x'", "StrCat() takes 1 to 16 argument(s), not 0",
         "InvalidArguments", "StrCat", (1, 11)),
        ("t | where coalesce(" + ", ".join(["n"] * 17) + ") == 1",
         "coalesce() takes 1 to 16 argument(s), not 17", "InvalidArguments", "coalesce", (1, 11)),
        ("t |\n summarize arg_max(n)", "arg_max() takes 2 to 256 argument(s), not 1",
         "InvalidArguments", "arg_max", (2, 12)),
        ("t | summarize count()[0]", "count() cannot be indexed", "ParserFailure", "count",
         (1, 15)),
        ("t | summarize c = max(n).x", "max() cannot be indexed", "ParserFailure", "max",
         (1, 19)),
        ("t | where not(n > 1, n < 3)", "not() takes 1 argument(s), not 2", "InvalidArguments",
         "not", (1, 11)),
        ("t | where Not()", "Not() takes 1 argument(s), not 0", "InvalidArguments", "Not",
         (1, 11)),
        ("t | where not(n > 1).x", "not() cannot be indexed", "ParserFailure", "not", (1, 11)),
        ("t | where eval(1)", f"the function eval() is not supported; {_FUNCTIONS_SUPPORTED}",
         "UnsupportedFunction", "eval", (1, 11)),
    ],
)  # fmt: skip
def test_a_function_is_refused_naming_it_and_what_it_takes(
    text: str, message: str, code: str, token: str, where: tuple[int, int]
) -> None:
    """Each function takes the arguments its page names (``strlen(source)``, ``not(expr)``,
    ``strcat(argument1, argument2 [, argument3 ...])`` "Between 1 and 64 arguments" -- 16
    here [ours] --, ``arg_max(ExprToMaximize, * | ExprToReturn [, ...])``); an aggregation's
    value is not indexed; a function KQL has and this subset does not is refused naming it
    and the ones it has (docs/azure-side.md, "Resource Graph": "a 400 ... naming the part")."""
    with pytest.raises(QueryError) as refused:
        parse_query(text)
    error = refused.value
    assert (str(error), error.code, error.token, error.where) == (message, code, token, where)


def test_the_text_and_its_nesting_are_bounded_at_the_bound() -> None:
    """[ours] docs/azure-side.md, "Resource Graph": a query longer than 8,192 characters or
    nesting parentheses deeper than 16 is refused; at the bound it runs. Parentheses inside
    a string, its quotes escaped or not, are not nesting."""
    longest = "t | where n == 3" + " " * (MAX_QUERY_CHARS - 16)
    assert len(longest) == MAX_QUERY_CHARS
    assert names(longest) == ["a"]
    with pytest.raises(QueryError) as refused:
        parse_query(longest + " ")
    assert (str(refused.value), refused.value.code) == (
        f"the query is longer than {MAX_QUERY_CHARS} characters",
        "QueryTooLarge",
    )
    deepest = "t | where " + "(" * MAX_DEPTH + "n == 3" + ")" * MAX_DEPTH
    assert names(deepest) == ["a"]
    with pytest.raises(QueryError) as refused:
        parse_query("t | where " + "(" * (MAX_DEPTH + 1) + "n == 3" + ")" * (MAX_DEPTH + 1))
    assert (str(refused.value), refused.value.code) == (
        f"the query nests parentheses deeper than {MAX_DEPTH}",
        "QueryTooLarge",
    )
    quoted = "((((((((((((((((((((("
    for text in (f"t | where name == '{quoted}'", f't | where name == "\\"{quoted}"',
                 f"t | where name == 'it\\'s{quoted}'", f"t | where name == '\\\\' or name == '{quoted}'",
                 f"t | where (name == ')') and name == '{quoted}'"):  # fmt: skip
        assert names(text) == []
    assert names("t | where (((n == 3)) and (name == 'a'))") == ["a"]  # depth falls back
    assert names("t | where " + "(n == 3) and " * MAX_DEPTH * 2 + "(n == 3)") == ["a"]
    deep = "(" * MAX_DEPTH + "n == 3" + ")" * MAX_DEPTH
    assert names(f"t | where {deep} and {deep}") == ["a"]  # two at the bound, one after another
    too_deep = "(" * (MAX_DEPTH + 1) + "n == 3" + ")" * (MAX_DEPTH + 1)
    for before in ("(n == 3) and", "name == 'it\\'s' or", 'name == "a\\\\" or',
                   "name == 'a\"b' or", "name == \"X\" or X == 1 or"):  # fmt: skip
        with pytest.raises(QueryError) as refused:
            parse_query(f"t | where {before} {too_deep}")
        assert refused.value.code == "QueryTooLarge", before
    for unclosed in (f"t | where name == '{quoted}", f't | where name == "{quoted}'):
        with pytest.raises(QueryError) as refused:  # a string not closed holds the rest
            parse_query(unclosed)
        assert refused.value.code == "ParserFailure"


def test_function_values() -> None:
    """The functions' pages (Kusto "Scalar functions"): ``strcat`` "Concatenates between 1 and
    64 arguments" (a null read as empty); ``coalesce`` returns "The value of the first arg
    whose value isn't null (or not-empty for string expressions)"; ``isempty`` is true for an
    empty string or a null, ``isnotempty`` its negation; ``isnull``/``isnotnull``; ``strlen``
    the length in characters; ``array_length`` the elements of an array, null for anything
    else; ``split`` the substrings between the delimiter, indexable (an empty delimiter: null
    [ours])."""
    rows: list[dict[str, Any]] = [
        {"s": "a/b", "e": "", "z": None, "l": [1, 2, 3], "m": {"k": 1}},
    ]
    (row,) = q(
        "t | project c = strcat(s, z, '-', 1, true), f = coalesce(z, e, s), g = coalesce(z, e),"
        " i = isempty(e), j = isempty(z), k = isempty(s), ne = isnotempty(e), nz = isnotempty(s),"
        " nn = isnull(z), nm = isnull(e), xn = isnotnull(z), xm = isnotnull(e),"
        " sl = strlen(s), sz = strlen(z), al = array_length(l), am = array_length(m),"
        " sp = split(s, '/'), s1 = split(s, '/')[1], se = split(s, ''), lo = tolower(z)",
        rows,
    )
    assert row == {
        "c": "a/b-1true", "f": "a/b", "g": None, "i": True, "j": True, "k": False, "ne": False,
        "nz": True, "nn": True, "nm": False, "xn": False, "xm": True, "sl": 3, "sz": 0,
        "al": 3, "am": None, "sp": ["a", "b"], "s1": "b", "se": None, "lo": None,
    }  # fmt: skip


@pytest.mark.parametrize(
    ("condition", "expected"),
    [
        ("n < 3", ["c"]),
        ("n <= 3", ["a", "c"]),
        ("n > 1", ["a"]),
        ("n >= 1", ["a", "c"]),
        ("name < 'b'", ["B", "a"]),  # strings compared by code point: "B" < "a"
        ("name >= 'a'", ["a", "c"]),
        ("name < 3", []),  # a string and a number are not ordered
        ("n != 3", ["c"]),  # a null is neither equal nor unequal
        ("n == 3.0", ["a"]),  # an int and a real compared as numbers
        ("n =~ 3", []),  # =~ compares strings only
        ("name !~ 'A'", ["B", "c"]),
        ("n !~ 'x'", ["a", "c"]),
        ("tags == 'x'", []),
        ("name == true", []),
        ("n < null", []),
        ("n == true", []),  # 1 is not true: a number and a bool are not equal
        ("n in (true, '3')", []),
        ("n in~ (1, 'x')", ["c"]),  # in~ folds the strings of its list only
        ("name == tolower(name)", ["a", "c"]),  # a column compared with a column
        ("tolower(name) != name", ["B"]),
        ("not(name == 'a')", ["B", "c"]),
        ("name == 'a' and n == 1", []),  # and: every operand true
        ("name == 'a' or n == 1", ["a", "c"]),  # or: one of them
        ("n == 1 and name == 'c' and isnotnull(text)", ["c"]),
    ],
)
def test_comparisons_by_type_and_with_nulls(condition: str, expected: list[str]) -> None:
    """ "Numerical operators" and "String operators": ``<``, ``<=``, ``>``, ``>=`` order
    numbers with numbers and strings with strings; ``=~``/``!~`` compare strings without
    regard to case; "Null values": a comparison with a null is not true (``!=`` included);
    values of different types are neither equal nor ordered [ours: KQL would not compile]."""
    assert sorted(names(f"t | where {condition}")) == sorted(expected)


def test_paths_into_values() -> None:
    """Property paths (KQL "dynamic" data type, "Dynamic object accessors"): ``a.b`` and
    ``a['b']`` read a bag's key, ``a[i]`` an array's element, ``a[-1]`` from the end; a key or
    index that is not there, or a key of a value that is not a bag, is null."""
    rows: list[dict[str, Any]] = [{"a": {"b": [10, 20, {"c": "x"}]}, "s": "text"}]
    (row,) = q(
        "t | project p = a.b[0], q = a['b'][-1].c, r = a.b[3], u = a.b[-4], v = s.x,"
        " w = a.b[0].c, x = a.z.y, y = s[0], z = a.b[-3], e = a.b[2]",
        rows,
    )
    assert row == {"p": 10, "q": "x", "r": None, "u": None, "v": None, "w": None, "x": None,
                   "y": None, "z": 10, "e": {"c": "x"}}  # fmt: skip


def test_a_table_is_named_without_regard_to_case() -> None:
    """docs/azure-side.md, "Resource Graph": "Tables: maintenanceresources, resources (names
    read without regard to case)", as learn.microsoft.com's second query of "Scheduled
    Events in Azure Resource Graph" writes ``Maintenanceresources``."""
    assert q("T | count") == [{"Count": 3}]
    assert q("VMs | count") == [{"Count": 3}]
    assert run(parse_query("vms | count"), {"VMs": lambda: VMS}) == [{"Count": 3}]


def test_unnamed_columns_are_numbered_in_order() -> None:
    """Kusto's "project operator" generates the name of an expression not named; ours
    (docs/azure-side.md, "Resource Graph", and ``forewarn.resourcegraph.query``): a path with
    underscores, anything else ``Column1``, ``Column2``... in order."""
    assert q("t | take 1 | project 1 == 1, name, strlen('ab'), text has 'x', tags[0]") == [
        {"Column1": True, "name": "a", "Column2": 2, "Column3": False, "tags_0": "x"}
    ]

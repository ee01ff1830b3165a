"""The Kusto Query Language subset Resource Graph queries of scheduled events need, parsed.

Enough for the two queries of learn.microsoft.com's "Scheduled Events in Azure Resource Graph"
and the everyday filters: a table, then ``where`` (``==``, ``=~``, ``!=``, ``!~``, ``<``,
``<=``, ``>``, ``>=``, ``in``, ``!in``, ``contains``, ``startswith``, ``and``, ``or``, ``not()``),
``sort by``/``order by`` (``asc``/``desc``, KQL's default descending), ``project`` (with
``name = expression``), ``take``/``limit`` and ``count``; property paths
(``properties.EventStatus``, ``zones[0]``) and the functions ``tostring``, ``tolower``,
``toupper``, ``isempty``, ``isnotempty``, ``isnull`` and ``isnotnull``.

The text is untrusted input. It is parsed by lark's LALR parser from the grammar below into the
plain data classes of this module, and never evaluated as code: what the grammar does not name
is refused with :class:`QueryError` naming the part, at its line and column. Its length and its
parentheses' depth are bounded before parsing, so neither the parser's work nor the tree's
depth grows past what those bounds allow.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any

from lark import Lark, Token, Transformer, UnexpectedCharacters, UnexpectedInput, v_args
from lark.exceptions import UnexpectedToken, VisitError

from forewarn.errors import ForewarnError

#: The longest query text taken, in characters [ours].
MAX_QUERY_CHARS = 8192
#: The deepest nesting of parentheses taken [ours].
MAX_DEPTH = 16
#: The most values an ``in (...)`` list or a ``project`` takes [ours].
MAX_ITEMS = 256


class QueryError(ForewarnError):
    """The query cannot be run: ``code`` is Resource Graph's detail code (``ParserFailure``,
    ``UnsupportedOperator``...), ``where`` the (line, column) and ``token`` the part refused."""

    def __init__(
        self,
        message: str,
        *,
        code: str = "ParserFailure",
        where: tuple[int, int] | None = None,
        token: str | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.where = where
        self.token = token


# -- the query as data ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Path:
    """A column and the keys or indexes below it: ``properties.EventId`` is
    ``Path(("properties", "EventId"))``."""

    parts: tuple[str | int, ...]


@dataclass(frozen=True, slots=True)
class Literal:
    value: Any


@dataclass(frozen=True, slots=True)
class Call:
    """A scalar function: ``tolower(name)``, ``split(id, "/")[0]`` (``index`` the keys and
    indexes read from its value)."""

    function: str
    arguments: tuple[Expr, ...]
    index: tuple[str | int, ...] = ()


@dataclass(frozen=True, slots=True)
class Aggregate:
    """An aggregation of ``summarize``: ``count()``, ``dcount(name)``, ``arg_max(x, *)``."""

    function: str
    arguments: tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class Star:
    """``*``: every column (``arg_max(x, *)``, ``distinct *``)."""


@dataclass(frozen=True, slots=True)
class Compare:
    left: Expr
    operator: str
    right: Expr


@dataclass(frozen=True, slots=True)
class InList:
    left: Expr
    values: tuple[Any, ...]
    negated: bool
    caseless: bool = False  # in~ and !in~


@dataclass(frozen=True, slots=True)
class Logical:
    operator: str  # "and" | "or"
    operands: tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class Not:
    operand: Expr


Expr = Path | Literal | Call | Aggregate | Star | Compare | InList | Logical | Not


@dataclass(frozen=True, slots=True)
class Where:
    condition: Expr


@dataclass(frozen=True, slots=True)
class SortKey:
    expr: Expr
    descending: bool
    nulls_first: bool


@dataclass(frozen=True, slots=True)
class Sort:
    keys: tuple[SortKey, ...]


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    expr: Expr


@dataclass(frozen=True, slots=True)
class Project:
    columns: tuple[Column, ...]


@dataclass(frozen=True, slots=True)
class Take:
    count: int


@dataclass(frozen=True, slots=True)
class Count:
    pass


@dataclass(frozen=True, slots=True)
class Top:
    count: int
    keys: tuple[SortKey, ...]


@dataclass(frozen=True, slots=True)
class Extend:
    columns: tuple[Column, ...]


@dataclass(frozen=True, slots=True)
class ProjectAway:
    names: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Distinct:
    columns: tuple[Column, ...]  # empty: every column (``distinct *``)


@dataclass(frozen=True, slots=True)
class Summarize:
    aggregates: tuple[Column, ...]  # each expr an Aggregate
    by: tuple[Column, ...]


@dataclass(frozen=True, slots=True)
class MvExpand:
    column: Column


@dataclass(frozen=True, slots=True)
class Join:
    kind: str  # "innerunique" (KQL's default), "inner", "leftouter"
    right: Query
    keys: tuple[tuple[str, str], ...]  # (left column, right column)


Operator = (
    Where | Sort | Project | Take | Count | Top | Extend | ProjectAway | Distinct | Summarize
    | MvExpand | Join
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Query:
    table: str
    operators: tuple[Operator, ...]


# -- the grammar ----------------------------------------------------------------------------

#: Scalar functions and how many arguments each takes (least, most).
FUNCTIONS: dict[str, tuple[int, int]] = {
    "tostring": (1, 1), "tolower": (1, 1), "toupper": (1, 1), "isempty": (1, 1),
    "isnotempty": (1, 1), "isnull": (1, 1), "isnotnull": (1, 1), "strlen": (1, 1),
    "array_length": (1, 1), "split": (2, 2), "strcat": (1, 16), "coalesce": (1, 16),
}  # fmt: skip
#: ``summarize``'s aggregations and how many arguments each takes (least, most).
AGGREGATES: dict[str, tuple[int, int]] = {
    "count": (0, 0), "countif": (1, 1), "dcount": (1, 1), "min": (1, 1), "max": (1, 1),
    "sum": (1, 1), "avg": (1, 1), "make_set": (1, 1), "make_list": (1, 1),
    "arg_max": (2, MAX_ITEMS), "arg_min": (2, MAX_ITEMS),
}  # fmt: skip
#: The kinds of ``join`` run (Resource Graph's own list adds ``fullouter``, not run here).
JOIN_KINDS = frozenset({"innerunique", "inner", "leftouter"})

_GRAMMAR = r"""
    start: query
    query: NAME ("|" operator)*

    ?operator: "where"i expr                        -> where
             | ("sort"i | "order"i) "by"i sortkey ("," sortkey)*   -> sort
             | "top"i INT "by"i sortkey ("," sortkey)*  -> top
             | "project"i column ("," column)*       -> project
             | "project-away"i NAME ("," NAME)*      -> project_away
             | "extend"i column ("," column)*        -> extend
             | "distinct"i STAR                      -> distinct_all
             | "distinct"i column ("," column)*      -> distinct
             | "summarize"i aggregates? groups?      -> summarize
             | "mv-expand"i column                   -> mv_expand
             | "join"i JOINKIND? "(" query ")" "on"i joinkey ("," joinkey)*  -> join
             | ("take"i | "limit"i) INT              -> take
             | "count"i                              -> count

    aggregates: column ("," column)*
    groups: "by"i column ("," column)*
    JOINKIND: /kind\s*=\s*[a-z]+/i
    joinkey: NAME                                   -> same_key
           | SIDE "." NAME "==" SIDE "." NAME       -> paired_key
    SIDE: /\$(left|right)\b/i

    sortkey: expr DIRECTION? NULLS?
    DIRECTION: /(asc|desc)\b/i
    NULLS: /nulls\s+(first|last)\b/i

    column: NAME "=" expr   -> named
          | expr            -> unnamed

    ?expr: or_expr
    ?or_expr: and_expr ("or"i and_expr)*         -> either
    ?and_expr: comparison ("and"i comparison)*   -> both
    ?comparison: term
               | term COMPARE term               -> compare
               | term IN "(" value ("," value)* ")"  -> inlist
    COMPARE: "==" | "=~" | "!=" | "!~" | "<=" | ">=" | "<" | ">"
           | /!?(contains|has|startswith|endswith)(_cs)?\b/i
    IN: /!?in(~|\b)/i

    ?term: value                    -> literal
         | path
         | NAME "(" [arguments] ")" ("." NAME | "[" (INT | STRING) "]")*  -> call
         | "(" expr ")"

    arguments: argument ("," argument)*
    ?argument: expr
             | STAR -> star
    STAR: "*"

    path: NAME ("." NAME | "[" (INT | STRING) "]")*

    ?value: STRING -> string
          | NUMBER -> number
          | INT    -> number
          | "true"i  -> true
          | "false"i -> false
          | "null"i  -> null

    NAME: /[a-z_][a-z0-9_]*/i
    STRING: /"(?:[^"\\\n]|\\.){0,1024}"/ | /'(?:[^'\\\n]|\\.){0,1024}'/
    NUMBER: /-?\d+\.\d+/
    INT: /-?\d{1,18}/

    %import common.WS
    %ignore WS
"""


@functools.cache
def _parser() -> Lark:
    """The grammar's LALR tables, built on the first query rather than at import: building
    them takes a fifth of a second, which every ``forewarn serve`` would pay at start-up
    whether or not anyone queries Resource Graph."""
    return Lark(_GRAMMAR, parser="lalr", maybe_placeholders=False)


def _unquote(text: str) -> str:
    """A string literal's text: its quotes dropped, each backslash escape read (``t``, ``n``,
    ``r``; any other character after a backslash stands for itself). The grammar's STRING
    never ends in a lone backslash."""
    escapes = {"n": "\n", "t": "\t", "r": "\r"}
    return _ESCAPE.sub(lambda found: escapes.get(found[1], found[1]), text[1:-1])


_ESCAPE = re.compile(r"\\(.)")  # the grammar: never a newline after it


def _keys(parts: tuple[Token, ...]) -> tuple[str | int, ...]:
    keys: list[str | int] = []
    for part in parts:
        if part.type == "INT":
            keys.append(int(part))
        elif part.type == "STRING":
            keys.append(_unquote(part))
        else:
            keys.append(str(part))
    return tuple(keys)


def _scalar(expr: Expr, where: str) -> Expr:
    """``expr``, refused when it aggregates or names every column outside their places."""
    if isinstance(expr, Aggregate):
        raise QueryError(
            f"the aggregation {expr.function}() belongs in summarize, not {where}",
            code="UnsupportedFunction",
            token=expr.function,
        )
    if isinstance(expr, Star):
        raise QueryError(f"* is not a value in {where}", token="*")
    children: tuple[Expr, ...] = ()
    if isinstance(expr, Call):
        children = expr.arguments
    elif isinstance(expr, Compare):
        children = (expr.left, expr.right)
    elif isinstance(expr, InList):
        children = (expr.left,)
    elif isinstance(expr, Logical):
        children = expr.operands
    elif isinstance(expr, Not):
        children = (expr.operand,)
    for child in children:
        _scalar(child, where)
    return expr


def _place(token: Token) -> tuple[int, int]:
    """Where ``token`` is: lark's lexer gives every token its line and column (from 1)."""
    return token.line, token.column  # type: ignore[return-value]  # never None from the lexer


#: ``not(expr)``: one argument, as its page writes it.
_NOT = {"not": (1, 1)}


def _arity(name: Token, given: int, table: dict[str, tuple[int, int]]) -> None:
    least, most = table[name.lower()]
    if not least <= given <= most:
        wanted = str(least) if least == most else f"{least} to {most}"
        raise QueryError(
            f"{name!s}() takes {wanted} argument(s), not {given}",
            code="InvalidArguments",
            where=_place(name),
            token=str(name),
        )


@v_args(inline=True)
class _ToQuery(Transformer[Token, Query]):
    def start(self, query: Query) -> Query:
        return query

    def query(self, table: Token, *operators: Operator) -> Query:
        return Query(str(table), operators)

    # operators
    def where(self, condition: Expr) -> Where:
        return Where(_scalar(condition, "where"))

    def sort(self, *keys: SortKey) -> Sort:
        return Sort(keys)

    def top(self, count: Token, *keys: SortKey) -> Top:
        return Top(self.take(count).count, keys)

    def sortkey(self, expr: Expr, *options: Token) -> SortKey:
        descending = True  # KQL sorts descending unless told
        nulls_first: bool | None = None
        for option in options:
            if option.type == "DIRECTION":
                descending = option.lower() == "desc"
            else:
                nulls_first = option.lower().endswith("first")  # nulls first|last
        if nulls_first is None:
            nulls_first = not descending  # KQL: nulls first ascending, last descending
        return SortKey(_scalar(expr, "sort by"), descending, nulls_first)

    def project(self, *columns: Column) -> Project:
        return Project(self._columns(columns, "project"))

    def extend(self, *columns: Column) -> Extend:
        return Extend(self._columns(columns, "extend"))

    def project_away(self, *names: Token) -> ProjectAway:
        return ProjectAway(tuple(str(name) for name in names))

    def distinct(self, *columns: Column) -> Distinct:
        return Distinct(self._columns(columns, "distinct"))

    def distinct_all(self, _star: Token) -> Distinct:
        return Distinct(())

    def aggregates(self, *columns: Column) -> tuple[Column, ...]:
        for column in columns:
            if not isinstance(column.expr, Aggregate):
                raise QueryError(
                    "summarize takes aggregations (count(), countif(), dcount(), min(), max(), "
                    "sum(), avg(), make_set(), make_list(), arg_max(), arg_min()) before by",
                    code="UnsupportedOperator",
                    token=column.name or "summarize",
                )
        if len(columns) > MAX_ITEMS:
            raise QueryError(f"summarize names more than {MAX_ITEMS} columns", code="QueryTooLarge")
        return columns

    def groups(self, *columns: Column) -> tuple[str, tuple[Column, ...]]:
        return ("by", self._columns(columns, "summarize by"))

    def summarize(self, *parts: Any) -> Summarize:
        aggregates: tuple[Column, ...] = ()
        by: tuple[Column, ...] = ()
        for part in parts:
            if part[0] == "by":  # aggregates: Columns, never empty
                by = part[1]
            else:
                aggregates = part
        if not aggregates and not by:
            raise QueryError("summarize needs an aggregation or a by clause", token="summarize")
        return Summarize(aggregates, by)

    def mv_expand(self, column: Column) -> MvExpand:
        return MvExpand(self._columns((column,), "mv-expand")[0])

    def join(self, *parts: Any) -> Join:
        kind = "innerunique"  # KQL's default
        if isinstance(parts[0], Token):
            kind = parts[0].split("=")[-1].strip().lower()
            if kind not in JOIN_KINDS:
                raise QueryError(
                    f"join kind={kind} is not supported; supported: "
                    + ", ".join(sorted(JOIN_KINDS)),
                    code="UnsupportedOperator",
                    token=str(parts[0]),
                )
            parts = parts[1:]
        right, *keys = parts
        return Join(kind, right, tuple(keys))

    def same_key(self, name: Token) -> tuple[str, str]:
        return (str(name), str(name))

    def paired_key(self, side: Token, first: Token, other: Token, second: Token) -> tuple[str, str]:
        if side.lower() == other.lower():
            raise QueryError("join on $left.x == $right.y names each side once", token=str(other))
        return (str(first), str(second)) if side.lower() == "$left" else (str(second), str(first))

    @staticmethod
    def _columns(columns: tuple[Column, ...], where: str) -> tuple[Column, ...]:
        if len(columns) > MAX_ITEMS:
            raise QueryError(f"{where} names more than {MAX_ITEMS} columns", code="QueryTooLarge")
        for column in columns:
            _scalar(column.expr, where)
        return columns

    def named(self, name: Token, expr: Expr) -> Column:
        return Column(str(name), expr)

    def unnamed(self, expr: Expr) -> Column:
        return Column("", expr)  # named by the evaluator: properties_EventId, Column1...

    def take(self, count: Token) -> Take:
        value = int(count)
        if value < 0:
            raise QueryError("take needs a count of 0 or more", token=str(count))
        return Take(value)

    def count(self) -> Count:
        return Count()

    # expressions
    def either(self, *operands: Expr) -> Expr:
        return operands[0] if len(operands) == 1 else Logical("or", operands)

    def both(self, *operands: Expr) -> Expr:
        return operands[0] if len(operands) == 1 else Logical("and", operands)

    def compare(self, left: Expr, operator: Token, right: Expr) -> Compare:
        return Compare(left, operator.lower(), right)

    def inlist(self, left: Expr, keyword: Token, *values: Literal) -> InList:
        if len(values) > MAX_ITEMS:
            raise QueryError(f"in (...) holds more than {MAX_ITEMS} values", code="QueryTooLarge")
        return InList(
            left, tuple(v.value for v in values), keyword.startswith("!"), keyword.endswith("~")
        )

    def literal(self, value: Literal) -> Literal:
        return value

    def arguments(self, *arguments: Expr) -> tuple[Expr, ...]:
        return arguments

    def star(self, _token: Token) -> Star:
        return Star()

    def call(self, name: Token, *rest: Any) -> Expr:
        arguments: tuple[Expr, ...] = ()
        if rest and isinstance(rest[0], tuple):
            arguments, rest = rest[0], rest[1:]
        function = name.lower()
        where = _place(name)
        if function in AGGREGATES:
            _arity(name, len(arguments), AGGREGATES)
            if rest:
                raise QueryError(f"{name!s}() cannot be indexed", where=where, token=str(name))
            if function not in ("arg_max", "arg_min"):
                for argument in arguments:
                    _scalar(argument, f"{function}()")
            return Aggregate(function, arguments)
        if function == "not":
            _arity(name, len(arguments), _NOT)
            if rest:
                raise QueryError(f"{name!s}() cannot be indexed", where=where, token=str(name))
            return Not(_scalar(arguments[0], "not()"))
        if function not in FUNCTIONS:
            raise QueryError(
                f"the function {name!s}() is not supported; supported: not, "
                + ", ".join(sorted(FUNCTIONS))
                + "; in summarize: "
                + ", ".join(sorted(AGGREGATES)),
                code="UnsupportedFunction",
                where=where,
                token=str(name),
            )
        _arity(name, len(arguments), FUNCTIONS)
        for argument in arguments:
            _scalar(argument, f"{function}()")
        return Call(function, arguments, _keys(rest))

    def path(self, *parts: Token) -> Path:
        return Path(_keys(parts))

    def string(self, token: Token) -> Literal:
        return Literal(_unquote(token))

    def number(self, token: Token) -> Literal:
        return Literal(float(token) if "." in token else int(token))

    def true(self) -> Literal:
        return Literal(True)

    def false(self) -> Literal:
        return Literal(False)

    def null(self) -> Literal:
        return Literal(None)


def _check_bounds(text: str) -> None:
    if len(text) > MAX_QUERY_CHARS:
        raise QueryError(
            f"the query is longer than {MAX_QUERY_CHARS} characters", code="QueryTooLarge"
        )
    depth = deepest = 0
    for outside in _STRING_LITERAL.split(text):  # a parenthesis in a string is not nesting
        for char in outside:
            if char == "(":
                depth += 1
                deepest = max(deepest, depth)
            elif char == ")":
                depth -= 1
    if deepest > MAX_DEPTH:
        raise QueryError(
            f"the query nests parentheses deeper than {MAX_DEPTH}", code="QueryTooLarge"
        )


#: A string literal, its backslash escapes included, to the end of the text if not closed.
_STRING_LITERAL = re.compile(r""""(?:[^"\\]|\\.)*"?|'(?:[^'\\]|\\.)*'?""", re.DOTALL)


def parse_query(text: str) -> Query:
    """``text`` as a :class:`Query`; :class:`QueryError` naming what is not supported."""
    _check_bounds(text)
    try:
        tree = _parser().parse(text)
    except UnexpectedCharacters as exc:
        at = exc.pos_in_stream or 0
        found = (text[at : at + 16].split() or [text[at : at + 1]])[0]
        word = _word_at(text, at)
        if word.lower() in _KNOWN_KQL:  # make-series, project-rename: a known operator
            raise QueryError(
                f"unexpected {word!r} at line {exc.line}: " + _unsupported_hint(word),
                code="UnsupportedOperator",
                where=(exc.line, exc.column),
                token=word,
            ) from None
        raise QueryError(
            f"unexpected {found!r} at line {exc.line}, column {exc.column}: not part of the "
            "supported query language",
            where=(exc.line, exc.column),
            token=found,
        ) from None
    except UnexpectedToken as exc:
        token = str(exc.token)
        start = exc.token.start_pos  # lark's $END token borrows the last one's place
        if token and isinstance(start, int) and _word_at(text, start).lower() in _KNOWN_KQL:
            token = _word_at(text, start)
        what = f"{token!r}" if token else "the end of the query"
        raise QueryError(
            f"unexpected {what} at line {exc.line}, column {exc.column}: "
            + _unsupported_hint(token),
            code="UnsupportedOperator" if token.lower() in _KNOWN_KQL else "ParserFailure",
            where=(exc.line, exc.column),
            token=token,
        ) from None
    except UnexpectedInput as exc:  # pragma: no cover - LALR raises only the two above
        raise QueryError(f"cannot parse the query: {exc}") from None
    try:
        return _ToQuery().transform(tree)
    except VisitError as exc:
        if isinstance(exc.orig_exc, QueryError):
            raise exc.orig_exc from None
        raise


#: Operators and keywords of KQL that exist but are not supported here, named as such.
_KNOWN_KQL = frozenset(
    {
        "union", "parse", "render", "evaluate", "let", "make-series", "sample", "serialize",
        "lookup", "invoke", "as", "search", "find", "getschema", "range", "print", "datatable",
        "externaldata", "mv-apply", "project-rename", "project-reorder", "project-keep",
        "top-nested", "facet", "fork", "partition", "scan", "sort-by", "reduce",
    }
)  # fmt: skip


def _word_at(text: str, at: int) -> str:
    """The hyphenated word around ``at`` (``project-rename`` when the lexer stopped at its
    ``-``): letters, digits, ``_`` and ``-``, as ``str.isalnum`` reads letters and digits."""
    start = at
    while start > 0 and _WORD_CHAR.match(text, start - 1):
        start -= 1
    end = at
    while _WORD_CHAR.match(text, end):  # no match at the end of the text
        end += 1
    return text[start:end]


_WORD_CHAR = re.compile(r"[\w-]")


def _unsupported_hint(token: str) -> str:
    if token.lower() in _KNOWN_KQL:
        return (
            f"the operator {token!r} is not supported; supported: where, sort by, order by, "
            "top, project, project-away, extend, distinct, summarize, mv-expand, join, take, "
            "limit, count"
        )
    return "not part of the supported query language"


__all__ = [
    "AGGREGATES",
    "FUNCTIONS",
    "JOIN_KINDS",
    "MAX_DEPTH",
    "MAX_ITEMS",
    "MAX_QUERY_CHARS",
    "Aggregate",
    "Call",
    "Column",
    "Compare",
    "Count",
    "Distinct",
    "Expr",
    "Extend",
    "InList",
    "Join",
    "Literal",
    "Logical",
    "MvExpand",
    "Not",
    "Operator",
    "Path",
    "Project",
    "ProjectAway",
    "Query",
    "QueryError",
    "Sort",
    "SortKey",
    "Star",
    "Summarize",
    "Take",
    "Top",
    "Where",
    "parse_query",
]

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
from dataclasses import dataclass
from typing import Any

from lark import Lark, Token, Transformer, UnexpectedCharacters, UnexpectedInput, v_args
from lark.exceptions import UnexpectedEOF, UnexpectedToken, VisitError

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
    function: str
    argument: Expr


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


@dataclass(frozen=True, slots=True)
class Logical:
    operator: str  # "and" | "or"
    operands: tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class Not:
    operand: Expr


Expr = Path | Literal | Call | Compare | InList | Logical | Not


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


Operator = Where | Sort | Project | Take | Count


@dataclass(frozen=True, slots=True)
class Query:
    table: str
    operators: tuple[Operator, ...]


# -- the grammar ----------------------------------------------------------------------------

FUNCTIONS = frozenset(
    {"tostring", "tolower", "toupper", "isempty", "isnotempty", "isnull", "isnotnull"}
)

_GRAMMAR = r"""
    start: NAME ("|" operator)*

    ?operator: "where"i expr                        -> where
             | ("sort"i | "order"i) "by"i sortkey ("," sortkey)*   -> sort
             | "project"i column ("," column)*       -> project
             | ("take"i | "limit"i) INT              -> take
             | "count"i                              -> count

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
    COMPARE: "==" | "=~" | "!=" | "!~" | "<=" | ">=" | "<" | ">" | /contains\b/i | /startswith\b/i
    IN: /!?in\b/i

    ?term: value                    -> literal
         | path
         | NAME "(" expr ")"        -> call
         | "(" expr ")"

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
    body = text[1:-1]
    out: list[str] = []
    escaped = False
    for char in body:
        if escaped:
            out.append({"n": "\n", "t": "\t", "r": "\r"}.get(char, char))
            escaped = False
        elif char == "\\":
            escaped = True
        else:
            out.append(char)
    return "".join(out)


@v_args(inline=True)
class _ToQuery(Transformer[Token, Query]):
    def start(self, table: Token, *operators: Operator) -> Query:
        return Query(str(table), operators)

    # operators
    def where(self, condition: Expr) -> Where:
        return Where(condition)

    def sort(self, *keys: SortKey) -> Sort:
        return Sort(keys)

    def sortkey(self, expr: Expr, *options: Token) -> SortKey:
        descending = True  # KQL sorts descending unless told
        nulls_first: bool | None = None
        for option in options:
            if option.type == "DIRECTION":
                descending = option.lower() == "desc"
            else:
                nulls_first = option.lower().split()[-1] == "first"
        if nulls_first is None:
            nulls_first = not descending  # KQL: nulls first ascending, last descending
        return SortKey(expr, descending, nulls_first)

    def project(self, *columns: Column) -> Project:
        if len(columns) > MAX_ITEMS:
            raise QueryError(f"project names more than {MAX_ITEMS} columns", code="QueryTooLarge")
        return Project(columns)

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
        return InList(left, tuple(v.value for v in values), keyword.startswith("!"))

    def literal(self, value: Literal) -> Literal:
        return value

    def call(self, name: Token, argument: Expr) -> Expr:
        function = name.lower()
        if function == "not":
            return Not(argument)
        if function not in FUNCTIONS:
            raise QueryError(
                f"the function {name!s}() is not supported; supported: not, "
                + ", ".join(sorted(FUNCTIONS)),
                code="UnsupportedFunction",
                where=(name.line or 1, name.column or 1),
                token=str(name),
            )
        return Call(function, argument)

    def path(self, *parts: Token) -> Path:
        keys: list[str | int] = []
        for part in parts:
            if part.type == "INT":
                keys.append(int(part))
            elif part.type == "STRING":
                keys.append(_unquote(part))
            else:
                keys.append(str(part))
        return Path(tuple(keys))

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
    quote: str | None = None
    escaped = False
    for char in text:
        if quote is not None:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == quote:
                quote = None
        elif char in "\"'":
            quote = char
        elif char == "(":
            depth += 1
            deepest = max(deepest, depth)
        elif char == ")":
            depth -= 1
    if deepest > MAX_DEPTH:
        raise QueryError(
            f"the query nests parentheses deeper than {MAX_DEPTH}", code="QueryTooLarge"
        )


def parse_query(text: str) -> Query:
    """``text`` as a :class:`Query`; :class:`QueryError` naming what is not supported."""
    _check_bounds(text)
    try:
        tree = _parser().parse(text)
    except UnexpectedCharacters as exc:
        at = exc.pos_in_stream or 0
        found = (text[at : at + 16].split(maxsplit=1) or [text[at : at + 1]])[0]
        raise QueryError(
            f"unexpected {found!r} at line {exc.line}, column {exc.column}: not part of the "
            "supported query language",
            where=(exc.line, exc.column),
            token=found,
        ) from None
    except UnexpectedEOF:
        raise QueryError("the query ends too early") from None
    except UnexpectedToken as exc:
        token = str(exc.token)
        what = f"{token!r}" if token else "the end of the query"
        raise QueryError(
            f"unexpected {what} at line {exc.line}, column {exc.column}: "
            + _unsupported_hint(token),
            code="UnsupportedOperator" if token.lower() in _KNOWN_KQL else "ParserFailure",
            where=(exc.line, exc.column),
            token=token,
        ) from None
    except UnexpectedInput as exc:  # pragma: no cover - the three above are all lark raises
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
        "extend", "summarize", "join", "union", "mv-expand", "top", "distinct", "parse",
        "render", "evaluate", "let", "make-series", "sample", "serialize", "lookup", "invoke",
        "as", "search", "find", "getschema", "range", "print", "datatable", "externaldata",
    }
)  # fmt: skip


def _unsupported_hint(token: str) -> str:
    if token.lower() in _KNOWN_KQL:
        return (
            f"the operator {token!r} is not supported; supported: where, sort by, order by, "
            "project, take, limit, count"
        )
    return "not part of the supported query language"


__all__ = [
    "FUNCTIONS",
    "MAX_DEPTH",
    "MAX_ITEMS",
    "MAX_QUERY_CHARS",
    "Call",
    "Column",
    "Compare",
    "Count",
    "Expr",
    "InList",
    "Literal",
    "Logical",
    "Not",
    "Operator",
    "Path",
    "Project",
    "Query",
    "QueryError",
    "Sort",
    "SortKey",
    "Take",
    "Where",
    "parse_query",
]

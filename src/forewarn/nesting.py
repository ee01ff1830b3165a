"""How deep input forewarn did not write may nest, defined once, and JSON read within it.

Python's JSON decoder recurses once per array or object it opens, as PyYAML's composer does
per collection: a line of 200,000 ``[`` is a ``RecursionError`` out of ``json.loads``, which
no ``except ValueError`` catches, so a trace, a VM's document, a control API answer or a
journal record holding one became a traceback. Nothing forewarn reads needs more than a few
levels (a document's events' resources: 4; a scenario file: 7), so every reader of such
input refuses more than :data:`MAX_NESTING` before decoding: YAML files
(:mod:`forewarn.yaml_files`), journal records (:mod:`forewarn.storage.journal`) and every
JSON text through :func:`load_json`, which checks the nesting without recursion and only
then decodes.

Standard library only: the recorder and the SDK that run on a VM read JSON through it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from itertools import accumulate
from typing import Any

from forewarn.errors import ForewarnError

__all__ = ["MAX_NESTING", "NestingError", "check_json_nesting", "load_json"]

#: How many arrays and objects (mappings and sequences in YAML) may hold one another.
MAX_NESTING = 32

#: What does not count: a JSON string (its escapes skipped, terminated or not), and a run of
#: anything but brackets and quotes.
_NOT_COUNTED = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?|[^\[\]{}"]+', re.DOTALL)
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


class NestingError(ForewarnError, ValueError):
    """JSON nested deeper than :data:`MAX_NESTING`: a ``ValueError``, as every other text
    that is not usable JSON is to its readers."""


def check_json_nesting(text: str) -> None:
    """Raise :class:`NestingError` when the JSON ``text`` opens more than
    :data:`MAX_NESTING` arrays and objects one inside another (brackets inside strings do not
    count). Text that is not JSON at all passes: the decoder refuses it in its own words."""
    if text.count("[") + text.count("{") <= MAX_NESTING:
        return  # too few brackets to nest that deep: the common case, at C speed
    # The brackets outside strings, as +1 and -1, summed as they come: no loop in Python
    # (a megabyte of brackets is read in about the time the decoder takes over it).
    brackets = _NOT_COUNTED.sub("", text)
    if max(accumulate(map(_STEP.__getitem__, brackets), initial=0)) > MAX_NESTING:
        raise NestingError(f"nested deeper than {MAX_NESTING} levels")


def load_json(text: str | bytes, *, parse_constant: Callable[[str], Any] | None = None) -> Any:
    """The value of the JSON ``text`` (bytes decoded as ``json.loads`` decodes them), its
    nesting checked first; any refusal is a ``ValueError`` (:class:`NestingError`,
    ``json.JSONDecodeError``, ``UnicodeDecodeError``), never a ``RecursionError``."""
    if isinstance(text, bytes | bytearray):
        text = text.decode(json.detect_encoding(text), "surrogatepass")
    check_json_nesting(text)
    return json.loads(text, parse_constant=parse_constant)

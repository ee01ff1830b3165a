"""Values of Resource Graph's rows as KQL reads them: as strings, ordered, and as keys."""

from __future__ import annotations

import json
from typing import Any


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


def is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def rank(value: Any) -> tuple[int, Any]:
    """An order over mixed values: booleans, numbers, strings, then anything else by JSON."""
    if isinstance(value, bool):
        return (0, value)
    if is_number(value):
        return (1, value)
    if isinstance(value, str):
        return (2, value)
    return (3, to_string(value))


def key_of(value: Any) -> str:
    """``value`` as a key for grouping and matching: equal values, equal keys, types apart
    (keys are only compared with each other, so their spacing is json's own)."""
    return json.dumps(value, sort_keys=True)


__all__ = ["is_number", "key_of", "rank", "to_string"]

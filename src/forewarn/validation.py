"""A pydantic refusal of a file (a fleet, a scenario) in one line a person can act on.

pydantic words a key it does not know "Extra inputs are not permitted": true, and no help to
someone who typed ``adress``. :func:`first_problem` says ``unknown field 'adress' (did you
mean 'address'?)`` instead, at the mapping that holds it, the suggestion drawn from the
fields the model declares there (as the file spells them: their aliases); every other
refusal keeps pydantic's words, without its ``Value error,`` prefix. A required field
misspelt is refused twice by pydantic, missing under its name and unknown under the typo:
only the typo is said, since its suggestion says the other. Fleet files, scenario files and
the agent's configuration all report through it (:func:`problems` lists every refusal), so a
typo reads the same in each.
"""

from __future__ import annotations

import types
from difflib import get_close_matches
from typing import Annotated, Any, TypeGuard, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

__all__ = ["Location", "first_problem", "known_fields", "problems"]

Location = tuple[int | str, ...]


def first_problem(error: ValidationError, model: Any) -> tuple[Location, str]:
    """Where the first refusal of ``error`` is, and what to say: ``model`` is the type the
    value was validated as (a model class, or any annotation a ``TypeAdapter`` takes)."""
    return problems(error, model)[0]


def problems(error: ValidationError, model: Any) -> list[tuple[Location, str]]:
    """Every refusal of ``error``, in pydantic's order, each where it is and what to say."""
    said: list[tuple[Location, str, bool]] = []  # where, what, whether a field is missing
    suggested: set[Location] = set()  # the fields a typo was taken for, each where it goes
    for refusal in error.errors():
        location: Location = tuple(refusal["loc"])
        message = refusal["msg"].removeprefix("Value error, ")
        if refusal["type"] == "extra_forbidden" and location:
            name = str(location[-1])
            location = location[:-1]
            close = get_close_matches(name, known_fields(model, location), n=1)
            message = f"unknown field {name!r}"
            if close:
                message += f" (did you mean {close[0]!r}?)"
                suggested.add((*location, close[0]))
        said.append((location, message, refusal["type"] == "missing"))
    return [
        (location, message)
        for location, message, missing in said
        if not (missing and location in suggested)
    ]


def known_fields(model: Any, location: Location) -> list[str]:
    """The field names (aliases where the file uses them) of the model found at
    ``location`` inside ``model``; empty when no model is found there."""
    found: Any = model
    for part in location:
        found = _inside(found, part)
        if found is None:
            return []
    for candidate in _alternatives(found):
        if _is_model(candidate):
            return [field.alias or name for name, field in candidate.model_fields.items()]
    return []


def _alternatives(annotation: Any) -> list[Any]:
    """``annotation`` with ``Annotated`` and unions (``X | None``) taken apart."""
    origin = get_origin(annotation)
    if origin is Annotated:
        return _alternatives(get_args(annotation)[0])
    if origin is Union or origin is types.UnionType:
        return [inner for arg in get_args(annotation) for inner in _alternatives(arg)]
    return [annotation]


def _inside(annotation: Any, part: int | str) -> Any:
    """The type of ``annotation``'s item ``part``: a list's item, a mapping's value, a
    model's field (by alias or name); None when it has none."""
    for candidate in _alternatives(annotation):
        origin = get_origin(candidate)
        args = get_args(candidate)
        if isinstance(part, int) and origin in (list, tuple, set, frozenset) and args:
            return args[0]
        if isinstance(part, str) and origin is dict and len(args) == 2:
            return args[1]
        if isinstance(part, str) and _is_model(candidate):
            for name, field in candidate.model_fields.items():
                if part in (name, field.alias):
                    return field.annotation
    return None


def _is_model(candidate: object) -> TypeGuard[type[BaseModel]]:
    return isinstance(candidate, type) and issubclass(candidate, BaseModel)

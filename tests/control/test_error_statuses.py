"""One error tree, and statuses looked up along an error's MRO at the HTTP edge."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import forewarn
from forewarn.domain.errors import (
    DomainError,
    InvalidEventError,
    InvalidOperationError,
    UnknownEventError,
    UnknownGroupError,
    UnknownVmError,
)
from forewarn.errors import ForewarnError, InvalidInputError
from forewarn.scenario.client import ControlError
from forewarn.server.control import STATUS_BY_ERROR, status_of


def public_errors() -> list[type[BaseException]]:
    """Every public exception class forewarn defines, in every module of the package."""
    found: dict[str, type[BaseException]] = {}
    for module_info in pkgutil.walk_packages(forewarn.__path__, "forewarn."):
        if module_info.name.endswith("__main__"):
            continue
        module = importlib.import_module(module_info.name)
        for name, value in vars(module).items():
            if (
                inspect.isclass(value)
                and issubclass(value, BaseException)
                and value.__module__.startswith("forewarn")
                and not name.startswith("_")
            ):
                found[f"{value.__module__}.{value.__qualname__}"] = value
    return list(found.values())


def test_every_public_error_is_inside_the_tree() -> None:
    """STYLE.md habit 15: one neutral root, every raised error inside it."""
    errors = public_errors()
    assert len(errors) > 30  # the walk saw the client, storage, domain, agent... trees
    outside = [e.__qualname__ for e in errors if not issubclass(e, ForewarnError)]
    assert outside == []
    assert issubclass(ControlError, ForewarnError)
    assert issubclass(InvalidInputError, ForewarnError)


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (UnknownVmError("named 'x'"), 404),
        (UnknownGroupError("host", "h9"), 404),
        (UnknownEventError(("E",)), 404),
        (InvalidInputError("unknown api-version"), 422),
        (InvalidEventError("notice too short"), 422),
        (InvalidOperationError("a Started event cannot be cancelled"), 409),
        (DomainError("some other rule"), 409),
        (ForewarnError("not an input or domain error"), None),
        (ValueError("a bug"), None),
    ],
)
def test_each_error_gets_the_status_of_its_nearest_class(
    error: Exception, status: int | None
) -> None:
    """The statuses of the control API's docstring (404 unknown, 409 state, 422 input)."""
    assert status_of(error) == status


def test_a_new_subclass_inherits_its_parents_status_whatever_the_table_order() -> None:
    class UnknownCampaignError(UnknownEventError):
        pass

    class TooLateError(InvalidOperationError):
        pass

    assert status_of(UnknownCampaignError(("C",))) == 404
    assert status_of(TooLateError("too late")) == 409
    assert list(STATUS_BY_ERROR)[-1] is DomainError  # the parent listed last still loses

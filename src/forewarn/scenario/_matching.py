"""Comparing what a scenario expects with what the control API shows: pure functions.

Each mismatch is one line naming the field, the expected and the actual value, so a failed
run says exactly what differed (``events[0].NotBefore: expected '', actual 'Mon, ...'``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from forewarn.scenario.durations import parse_duration
from forewarn.scenario.schema import EventMatch, Expectation
from forewarn.wire.dates import format_not_before


def resolve(fields: Mapping[str, Any], now: datetime | None) -> dict[str, Any]:
    """``fields`` with a relative NotBefore (``"+15m"``) turned into the RFC 1123 text."""
    resolved = dict(fields)
    not_before = resolved.get("NotBefore")
    if isinstance(not_before, str) and not_before.startswith("+"):
        if now is None:
            raise ValueError("a relative NotBefore needs the platform time")
        resolved["NotBefore"] = format_not_before(now + parse_duration(not_before[1:]))
    return resolved


def needs_time(matches: Sequence[EventMatch]) -> bool:
    return any((m.not_before or "").startswith("+") for m in matches)


def event_problems(
    expected: EventMatch, actual: Mapping[str, Any], where: str, now: datetime | None
) -> list[str]:
    problems = []
    for name, value in resolve(expected.fields(), now).items():
        if name not in actual:
            problems.append(f"{where}.{name}: expected {value!r}, but this api-version omits it")
        elif actual[name] != value:
            problems.append(f"{where}.{name}: expected {value!r}, actual {actual[name]!r}")
    return problems


def matches(expected: EventMatch, actual: Mapping[str, Any], now: datetime | None) -> bool:
    return not event_problems(expected, actual, "event", now)


def document_problems(
    expectation: Expectation, document: Mapping[str, Any], now: datetime | None
) -> list[str]:
    """Incarnation exactly; events one for one, in order, each with the named fields."""
    problems = []
    incarnation = document.get("DocumentIncarnation")
    if expectation.incarnation is not None and incarnation != expectation.incarnation:
        problems.append(f"incarnation: expected {expectation.incarnation}, actual {incarnation}")
    if expectation.events is not None:
        events: list[Mapping[str, Any]] = list(document.get("Events", []))
        if len(events) != len(expectation.events):
            shown = [f"{e.get('EventType')}/{e.get('EventStatus')}" for e in events]
            problems.append(
                f"events: expected {len(expectation.events)} event(s), actual {len(events)} {shown}"
            )
        for index, (want, got) in enumerate(zip(expectation.events, events, strict=False)):
            problems.extend(event_problems(want, got, f"events[{index}]", now))
    return problems


def vm_problems(expectation: Expectation, vm: Mapping[str, Any] | None) -> list[str]:
    """Existence, reachability, Scheduled Events on, host; ``vm`` None when it is gone."""
    if vm is None:
        if expectation.exists is False:
            return []
        return [f"exists: expected the VM {expectation.vm}, but it does not exist"]
    if expectation.exists is False:
        return [f"exists: expected {expectation.vm} to be gone, but it still exists"]
    problems = []
    for name in ("reachable", "receiving", "host"):
        want = getattr(expectation, name)
        if want is not None and vm.get(name) != want:
            problems.append(f"{name}: expected {want!r}, actual {vm.get(name)!r}")
    return problems

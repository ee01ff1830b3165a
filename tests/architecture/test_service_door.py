"""The service is the only door to the platform, and every public call catches up first.

Adapters (the HTTP servers, the pytest plugin, in-process scenarios) must not reach past
:class:`~forewarn.service.ScheduledEventsService` to its platform or clock: a read that does
sees the platform as it was at the last catch-up, not as the clock says it is now (a NotBefore
that passed would not have started its event). The first tests hold the source to that; the
others show each public read bringing the platform up to the clock by itself.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from forewarn.domain.api_versions import CURRENT_VERSION
from forewarn.domain.clock import DEFAULT_START
from forewarn.domain.events import EventStatus, EventType
from forewarn.service import ScheduledEventsService
from forewarn.testing import ForewarnPlatform

if TYPE_CHECKING:
    from collections.abc import Iterator

SRC = Path(__file__).resolve().parents[2] / "src" / "forewarn"
#: The adapters held to the rule: everything that serves or drives the platform in-process.
ADAPTER_PACKAGES = ("server", "testing", "scenario")
#: The service's own attributes adapters must not touch, public or private.
HIDDEN = {"platform", "clock", "_platform", "_clock", "_faults"}


def _names_a_service(node: ast.expr) -> bool:
    """``service``, ``self.service``, ``endpoint.service``, ``svc``...: an expression whose
    last name says it holds the service."""
    if isinstance(node, ast.Name):
        name = node.id
    elif isinstance(node, ast.Attribute):
        name = node.attr
    else:
        return False
    return "service" in name.lower() or name.lower() == "svc"


def reaches_past_the_service(source: str) -> list[tuple[int, str]]:
    """Every ``<service>.platform`` / ``<service>.clock`` (and their private names) in
    ``source``, and every private ``._platform`` / ``._clock`` of anything but ``self``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Attribute) or node.attr not in HIDDEN:
            continue
        owner = node.value
        private_of_another = node.attr.startswith("_") and not (
            isinstance(owner, ast.Name) and owner.id in ("self", "cls")
        )
        if _names_a_service(owner) or private_of_another:
            found.append((node.lineno, ast.unparse(node)))
    return found


def adapter_modules() -> list[Path]:
    return sorted(path for package in ADAPTER_PACKAGES for path in (SRC / package).rglob("*.py"))


@pytest.mark.parametrize(
    "source",
    [
        "clock = endpoint.service.clock.now",
        "service.platform.vm_state(name)",
        "self.service.platform.vms()",
        "svc = self.service\nsvc._platform.vms()",
        "platform = service._platform",
        "when = handle._clock.now()",
    ],
)
def test_the_check_catches_a_reach_past_the_service(source: str) -> None:
    assert reaches_past_the_service(source)


def test_the_check_leaves_service_calls_and_own_attributes_alone() -> None:
    source = "service.now()\nself._clock = clock\nservice.clock_status().profile\n"
    assert reaches_past_the_service(source) == []


def test_no_adapter_reaches_past_the_service() -> None:
    modules = adapter_modules()
    assert len(modules) > 20, "the adapter packages were not found"
    found = [
        f"{path.relative_to(SRC)}:{line}: {text}"
        for path in modules
        for line, text in reaches_past_the_service(path.read_text())
    ]
    assert found == []


@pytest.fixture
def vm0() -> Iterator[ForewarnPlatform]:
    """One standalone VM on a manual clock."""
    with ForewarnPlatform(vms=["vm0"]) as platform:
        yield platform


def test_the_service_has_no_public_platform_or_clock(vm0: ForewarnPlatform) -> None:
    assert not hasattr(vm0.service, "platform")
    assert not hasattr(vm0.service, "clock")


def test_only_the_catch_up_reaches_the_platform_inside_the_service() -> None:
    """Every public method gets the platform from ``_caught_up`` (which catches up first,
    and refuses while the platform may hold a change its journal does not): only
    construction, the catch-up itself, adopting the platform a journal's writer or a shared
    journal's replica rebuilt, and registering a listener of published events (it only adds
    the listener to the platform's history) touch ``self._platform``."""
    tree = ast.parse((SRC / "service.py").read_text())
    (service,) = [
        node
        for node in tree.body
        if isinstance(node, ast.ClassDef) and node.name == ScheduledEventsService.__name__
    ]
    reading = {
        method.name
        for method in service.body
        if isinstance(method, ast.FunctionDef)
        for node in ast.walk(method)
        if isinstance(node, ast.Attribute)
        and node.attr == "_platform"
        and isinstance(node.value, ast.Name)
        and node.value.id == "self"
    }
    assert reading == {"__init__", "_caught_up", "_adopt", "on_published"}


# -- each public read catches up by itself ------------------------------------------------------

#: A read, and whether what it returned shows vm0's Reboot Started (its NotBefore has passed).
READS: dict[str, Callable[[ScheduledEventsService, str], bool]] = {
    "events": lambda s, _: s.events()[0].event.status is EventStatus.STARTED,
    "event": lambda s, event_id: s.event(event_id).event.status is EventStatus.STARTED,
    "document": lambda s, _: s.document("vm0").events[0].status is EventStatus.STARTED,
    "encoded_document": lambda s, _: (
        b'"Started"' in s.encoded_document("vm0", CURRENT_VERSION).body
    ),
    "vm_state": lambda s, _: not s.vm_state("vm0").reachable,
    "vm_states": lambda s, _: not s.vm_states()[0].reachable,
    "impacts": lambda s, _: "vm0" in s.impacts(),
    "vm_request": lambda s, _: s.vm_request("vm0") is not None,
    "request_from": lambda s, _: (s.request_from("127.0.0.1", "") or (None, None))[1] is not None,
    "overview": lambda s, _: s.overview(10, 0.0).events[0].event.status is EventStatus.STARTED,
    "overview's VMs": lambda s, _: not s.overview(10, 0.0).vms[0].state.reachable,
    "clock_status": lambda s, event_id: (
        s.clock_status().next_deadline != s.event(event_id).event.not_before
    ),
}


@pytest.mark.parametrize("read", READS)
def test_a_read_shows_what_fell_due_since_the_last_call(vm0: ForewarnPlatform, read: str) -> None:
    event = vm0.schedule(EventType.REBOOT, "vm0")
    assert event.not_before is not None
    # The clock moves with no service call in between: only the read itself can catch up.
    vm0.clock.set(event.not_before + timedelta(seconds=1))
    assert READS[read](vm0.service, event.event_id)


def test_the_time_read_is_the_platform_caught_up(vm0: ForewarnPlatform) -> None:
    later = DEFAULT_START + timedelta(hours=1)
    vm0.clock.set(later)
    assert vm0.service.now() == later
    assert vm0.service.clock_status().now == later

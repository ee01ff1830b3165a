"""A hardware failure: one model by default, the other a choice away, the same in every door.

The pages disagree. The Windows VM page (learn.microsoft.com/azure/virtual-machines/windows/
scheduled-events, "Event scheduling"): "During the recovery process an event will be created
for all impacted VMs with EventType = Reboot and EventStatus = Started", set apart again as its
own two lines, and the same in the page's French and Indonesian editions. The newer overview
(learn.microsoft.com/azure/virtual-machines/scheduled-events-overview, "Exceptional Cases"):
"an event is created for all impacted VMs with `EventType = Redploy` and `EventStatus =
Started`", once, misspelt, on a page about Event Grid and Resource Graph as well. The default
is the VM pages' Reboot, the better evidence for what IMDS shows; ``--as redeploy`` gives the
overview's. Either way no notice: "Azure bypasses the 'Scheduled' state and immediately move to
the EventStatus:"Started" state" (the Windows page, "Exceptional cases").
"""

from __future__ import annotations

import httpx
import pytest
from click.testing import CliRunner

from forewarn.cli import main
from forewarn.cli.common import CliContext
from forewarn.domain.descriptions import VM_FAILURE
from forewarn.domain.events import EventSource, EventStatus, EventType
from forewarn.domain.operations import DEFAULT_HARDWARE_FAILURE, HARDWARE_FAILURE_MODELS
from forewarn.scenario import parse_scenario
from forewarn.testing import ForewarnPlatform, MakePlatform

FLEET = """
vms:
  - {name: a0, host: h1, address: 127.0.70.1}
  - {name: a1, host: h1, address: 127.0.70.2}
  - {name: b0, host: h2, address: 127.0.70.3}
"""


@pytest.fixture
def platform(make_forewarn_platform: MakePlatform) -> ForewarnPlatform:
    return make_forewarn_platform(fleet=FLEET, seed=4)


def shown(platform: ForewarnPlatform, vm: str) -> list[tuple[EventType, EventStatus, str]]:
    return [(e.event_type, e.status, e.description) for e in platform.document(vm).events]


def test_the_default_is_the_vm_pages_reboot() -> None:
    assert DEFAULT_HARDWARE_FAILURE == "reboot"
    assert HARDWARE_FAILURE_MODELS == {"reboot": EventType.REBOOT, "redeploy": EventType.REDEPLOY}


def test_the_plugin_fails_a_host_as_a_started_reboot_or_redeploy(
    platform: ForewarnPlatform,
) -> None:
    events = platform.fail_host("h1")
    assert {(e.event_type, e.status, e.source) for e in events} == {
        (EventType.REBOOT, EventStatus.STARTED, EventSource.PLATFORM)
    }
    assert shown(platform, "a0") == [(EventType.REBOOT, EventStatus.STARTED, VM_FAILURE)]
    (redeploy,) = platform.fail_host("h2", as_="redeploy")
    assert (redeploy.event_type, redeploy.status) == (EventType.REDEPLOY, EventStatus.STARTED)
    with pytest.raises(Exception, match="reboot, redeploy"):
        platform.fail_host("h2", as_="freeze")


def test_the_control_route_takes_as_or_nothing(platform: ForewarnPlatform) -> None:
    with platform.control_client() as http:
        default = http.post("/api/v1/hosts/h1/fail")
        assert default.status_code == 200, default.text
        chosen = http.post("/api/v1/hosts/h2/fail", json={"as": "redeploy"})
        assert chosen.status_code == 200, chosen.text
        wrong = http.post("/api/v1/hosts/h2/fail", json={"as": "Redeploy"})
    assert {e["EventType"] for e in default.json()["events"]} == {"Reboot"}
    assert [e["EventType"] for e in chosen.json()["events"]] == ["Redeploy"]
    assert wrong.status_code == 422
    assert shown(platform, "b0") == [(EventType.REDEPLOY, EventStatus.STARTED, VM_FAILURE)]


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        ([], EventType.REBOOT),
        (["--as", "reboot"], EventType.REBOOT),
        (["--as", "redeploy"], EventType.REDEPLOY),
    ],
)
def test_the_cli_takes_as(platform: ForewarnPlatform, argv: list[str], expected: EventType) -> None:
    def connect(host: str, port: int) -> httpx.Client:
        return platform.control_client()

    result = CliRunner().invoke(
        main, ["host", "fail", "--name", "h2", *argv], obj=CliContext(connect=connect)
    )
    assert result.exit_code == 0, result.output
    assert shown(platform, "b0") == [(expected, EventStatus.STARTED, VM_FAILURE)]


def test_the_cli_refuses_another_model(platform: ForewarnPlatform) -> None:
    result = CliRunner().invoke(main, ["host", "fail", "--name", "h2", "--as", "freeze"])
    assert result.exit_code == 2
    assert "'reboot', 'redeploy'" in result.output
    assert platform.document("b0").events == ()


def test_a_scenario_step_takes_as(platform: ForewarnPlatform) -> None:
    scenario = parse_scenario(
        """
steps:
  - host: {fail: h1}
  - expect: {vm: a1, events: [{EventType: Reboot, EventStatus: Started}]}
  - host: {fail: h2, as: redeploy}
  - expect: {vm: b0, events: [{EventType: Redeploy, EventStatus: Started, NotBefore: ""}]}
""",
        "hardware-failure.yaml",
    )
    assert platform.run_scenario(scenario).passed


def test_only_a_failure_takes_as() -> None:
    with pytest.raises(Exception, match="update takes no 'as'"):
        parse_scenario("steps:\n  - host: {update: h1, as: redeploy}\n", "x.yaml")

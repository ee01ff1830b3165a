"""``scheduledEventsPolicy``: in the fleet file, and changed at run time by every adapter.

Sources: learn.microsoft.com, "Scheduled Events overview" ("Auto Approve User Initiated
Scheduled Events": "When events are automatically approved, a scheduled event with
EventStatus:Scheduled isn't created. Instead, the operation is approved and only events with
EventStatus:Started and EventStatus:Completed are created"); "Scheduled Events in Event Grid"
("If your VM is part of an availability set or a Virtual Machine Scale Set then you can't set
the schedule events profile for each VM individually. All VMs in the same Virtual Machine Scale
Set or availability set are required to have the same scheduled events policy"); the ARM
schema's ``AllInstancesDown`` (azure-rest-api-specs, carried by azure-mgmt-compute): "Specifies
if Scheduled Events should be auto-approved when all instances are down. Its default value is
true."
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from forewarn.cli import main
from forewarn.cli.common import CliContext
from forewarn.config.fleet import FleetFileError, parse_fleet
from forewarn.config.policy import PolicyIn
from forewarn.domain.events import EventStatus
from forewarn.domain.policy import ScheduledEventsPolicy
from forewarn.registry import VM, find
from forewarn.scenario.schema import ScenarioFileError, parse_scenario
from forewarn.server.runner import ServeSettings
from forewarn.server.state import open_service
from forewarn.testing import ForewarnPlatform, MakePlatform

FLEET = """
availabilitySets:
  - name: back
    scheduledEventsPolicy:
      userInitiatedReboot: {automaticallyApprove: true}
      scheduledEventsAdditionalPublishingTargets:
        eventGridAndResourceGraph: {enable: true, scheduledEventsApiVersion: "2020-07-01"}
vms:
  - {name: db0, address: 127.0.50.1, availabilitySet: back, host: h1}
  - {name: db1, address: 127.0.50.2, availabilitySet: back, host: h2}
  - {name: solo, address: 127.0.50.3, host: h3}
scaleSets:
  - name: web
    capacity: 2
    addressStart: 127.0.51.1
    scheduledEventsPolicy: {userInitiatedRedeploy: {automaticallyApprove: true}}
"""


@pytest.fixture
def platform(make_forewarn_platform: MakePlatform) -> ForewarnPlatform:
    return make_forewarn_platform(fleet=FLEET, seed=3)


def policy(platform: ForewarnPlatform, vm: str) -> ScheduledEventsPolicy:
    return platform.vm_state(vm).vm.policy


def test_a_set_gives_its_policy_to_every_member(platform: ForewarnPlatform) -> None:
    for name in ("db0", "db1"):
        assert policy(platform, name) == ScheduledEventsPolicy(
            auto_approve_reboot=True, publish=True
        )
    assert policy(platform, "web_1") == ScheduledEventsPolicy(auto_approve_redeploy=True)
    assert policy(platform, "solo") == ScheduledEventsPolicy()  # ARM's defaults
    assert policy(platform, "solo").auto_approve_all_instances_down


def test_a_member_of_a_set_carrying_its_own_policy_is_refused_naming_file_and_field() -> None:
    text = FLEET.replace(
        "availabilitySet: back, host: h2}",
        "availabilitySet: back, host: h2,"
        " scheduledEventsPolicy: {userInitiatedReboot: {automaticallyApprove: false}}}",
    )
    with pytest.raises(FleetFileError) as raised:
        parse_fleet(text, "fleet.yaml")
    message = str(raised.value)
    assert message.startswith("fleet.yaml: vms.1.scheduledEventsPolicy: ")
    assert "same scheduled events policy" in message


def test_a_misspelt_policy_member_is_refused() -> None:
    text = FLEET.replace(
        "userInitiatedRedeploy: {automaticallyApprove",
        "userInitiatedRedeploy: {automaticalyApprove",
    )
    with pytest.raises(FleetFileError, match=r"scaleSets\.0\.scheduledEventsPolicy"):
        parse_fleet(text, "fleet.yaml")


def test_auto_approved_user_reboot_is_never_seen_scheduled(platform: ForewarnPlatform) -> None:
    (event,) = platform.restart("db0")
    assert event.status is EventStatus.STARTED
    assert [e.status for e in platform.document("db1").events] == [EventStatus.STARTED]
    (event,) = platform.restart("solo")
    assert event.status is EventStatus.SCHEDULED


def test_all_instances_down_approves_at_once_by_default(platform: ForewarnPlatform) -> None:
    """Every VM the event impacts is down (its impact under way): by default the event starts
    at once; with ``allInstancesDown.automaticallyApprove: false`` it waits for NotBefore."""
    platform.schedule("Reboot", "solo", started=True)  # solo is down for the impact
    assert not platform.vm_state("solo").reachable
    (event,) = platform.redeploy("solo")
    assert event.status is EventStatus.STARTED

    platform.perform(
        "set_scale_set_policy", "web", policy={"allInstancesDown": {"automaticallyApprove": False}}
    )
    platform.schedule("Reboot", "web_0", started=True)
    (waiting,) = platform.restart("web_0")
    assert waiting.status is EventStatus.SCHEDULED
    (up,) = platform.restart("web_1")  # a VM that is up gives no such approval
    assert up.status is EventStatus.SCHEDULED


def test_run_time_change_through_the_plugin(platform: ForewarnPlatform) -> None:
    platform.set_vm_policy("solo", policy={"userInitiatedReboot": {"automaticallyApprove": True}})
    (event,) = platform.restart("solo")
    assert event.status is EventStatus.STARTED
    with pytest.raises(Exception, match="same scheduled events policy; set it on the set"):
        platform.set_vm_policy("db0", policy={})


def test_run_time_change_through_the_route(platform: ForewarnPlatform) -> None:
    with platform.control_client() as http:
        body = {"scheduledEventsPolicy": {"userInitiatedReboot": {"automaticallyApprove": False}}}
        answer = http.post("/api/v1/availability-sets/back/set-scheduled-events-policy", json=body)
        assert answer.status_code == 200, answer.text
        assert answer.json() == {"events": []}
        assert policy(platform, "db1") == ScheduledEventsPolicy()
        refused = http.post("/api/v1/vms/db0/set-scheduled-events-policy", json=body)
        assert refused.status_code == 409
        unknown = http.post("/api/v1/availability-sets/nope/set-scheduled-events-policy", json=body)
        assert unknown.status_code == 404
        bad = {"scheduledEventsPolicy": {"userInitiatedReboot": {"automaticallyApprove": "yes"}}}
        invalid = http.post("/api/v1/vms/solo/set-scheduled-events-policy", json=bad)
        assert invalid.status_code == 422
        assert policy(platform, "solo") == ScheduledEventsPolicy()
        described = http.get("/api/v1/operations").json()["operations"]
        forms = [op for op in described if op["name"] == "set-scheduled-events-policy"]
        assert {op["target"] for op in forms} == {"vm", "scale-set", "availability-set"}
        assert forms[0]["parameters"][0]["type"] == "object"


def test_run_time_change_through_the_cli(platform: ForewarnPlatform) -> None:
    def connect(host: str, port: int) -> httpx.Client:
        return platform.control_client()

    runner = CliRunner()
    policy_json = json.dumps({"userInitiatedRedeploy": {"automaticallyApprove": True}})
    result = runner.invoke(
        main,
        [
            "vm",
            "availability-set",
            "set-scheduled-events-policy",
            "--name",
            "back",
            "--policy",
            policy_json,
        ],
        obj=CliContext(connect=connect),
    )
    assert result.exit_code == 0, result.output
    assert policy(platform, "db0") == ScheduledEventsPolicy(auto_approve_redeploy=True)
    result = runner.invoke(
        main,
        ["vmss", "set-scheduled-events-policy", "--name", "web", "--policy", "{}"],
        obj=CliContext(connect=connect),
    )
    assert result.exit_code == 0, result.output
    assert policy(platform, "web_0") == ScheduledEventsPolicy()
    result = runner.invoke(
        main,
        ["vm", "set-scheduled-events-policy", "--name", "solo", "--policy", "[1]"],
        obj=CliContext(connect=connect),
    )
    assert result.exit_code == 2
    assert "a JSON object" in result.output


def test_run_time_change_as_a_scenario_step(platform: ForewarnPlatform) -> None:
    scenario = parse_scenario(
        """
steps:
  - set-scheduled-events-policy:
      vm: solo
      scheduledEventsPolicy: {userInitiatedReboot: {automaticallyApprove: true}}
  - restart: solo
  - expect: {vm: solo, events: [{EventType: Reboot, EventStatus: Started}]}
""",
        "policy.yaml",
    )
    result = platform.run_scenario(scenario)
    assert result.passed, result.failure
    platform.advance(timedelta(minutes=20))


def test_a_policy_changed_at_run_time_survives_a_restart(tmp_path: Path) -> None:
    """Journaled as any operation, replayed through the same command."""
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(FLEET)
    settings = ServeSettings(fleet=fleet, clock="manual", data_dir=tmp_path / "data", seed=3)
    first = open_service(settings)
    first.perform(
        find(VM, "set-scheduled-events-policy"),
        "solo",
        {"policy": ScheduledEventsPolicy(auto_approve_redeploy=True, publish=True)},
    )
    assert first.journal is not None
    first.journal.close()
    second = open_service(settings)
    assert second.vm("solo").policy == ScheduledEventsPolicy(
        auto_approve_redeploy=True, publish=True
    )
    assert second.journal is not None
    second.journal.close()


def test_a_policy_step_names_one_target() -> None:
    with pytest.raises(ScenarioFileError, match="exactly one of vm, scaleSet, availabilitySet"):
        parse_scenario(
            "steps:\n  - set-scheduled-events-policy: {vm: a, scaleSet: b, scheduledEventsPolicy: {}}\n"
        )


def test_a_vm_paused_by_a_freeze_is_not_down(platform: ForewarnPlatform) -> None:
    """docs/azure-side.md, "The policy and ARM identity": ``allInstancesDown`` counts a VM
    under a Reboot, Redeploy, Preempt or Terminate as down; "a Freeze only pauses" (SPEC 4.3:
    "A Freeze pauses the VM ... memory and open files intact"). A frozen VM's requests wait,
    but the VM is there to approve when it resumes, so its new event waits to be approved."""
    platform.schedule("Freeze", "solo", started=True)
    assert not platform.vm_state("solo").reachable  # held as paused: only its type differs
    (event,) = platform.redeploy("solo")
    assert event.status is EventStatus.SCHEDULED


def test_the_arm_form_of_the_defaults_is_arms_schema() -> None:
    """docs/azure-side.md, "The policy and ARM identity": every member as ARM JSON spells it,
    with ARM's defaults (false but ``allInstancesDown``'s true; "During the preview, the only
    supported value is "2020-07-01"", learn.microsoft.com/azure/virtual-machines/
    scheduled-events-event-grid)."""
    assert ScheduledEventsPolicy().to_arm() == {
        "userInitiatedReboot": {"automaticallyApprove": False},
        "userInitiatedRedeploy": {"automaticallyApprove": False},
        "allInstancesDown": {"automaticallyApprove": True},
        "scheduledEventsAdditionalPublishingTargets": {
            "eventGridAndResourceGraph": {
                "enable": False,
                "scheduledEventsApiVersion": "2020-07-01",
            }
        },
    }


@pytest.mark.parametrize(
    "field",
    ["auto_approve_reboot", "auto_approve_redeploy", "auto_approve_all_instances_down", "publish"],
)
def test_the_arm_form_reads_back_as_the_same_policy(field: str) -> None:
    """Each member in its own place: a policy differing from the defaults in one member only
    becomes ARM JSON that the fleet file's and the control API's reader
    (``forewarn.config.policy``) reads back as that very policy, and no other member moves."""
    changed = ScheduledEventsPolicy(**{field: not getattr(ScheduledEventsPolicy(), field)})
    arm = changed.to_arm()
    assert PolicyIn.model_validate(arm).policy() == changed
    differing = [
        path
        for path in _leaves(arm)
        if _leaves(arm)[path] != _leaves(ScheduledEventsPolicy().to_arm())[path]
    ]
    assert len(differing) == 1


def _leaves(value: object, path: str = "") -> dict[str, object]:
    if not isinstance(value, dict):
        return {path: value}
    leaves: dict[str, object] = {}
    for key, inner in value.items():
        leaves.update(_leaves(inner, f"{path}.{key}"))
    return leaves

"""A VM's ``scheduledEventsPolicy``: what it auto-approves and where its events are published.

Spelled as ARM spells it (learn.microsoft.com, "Scheduled Events overview", "Auto Approve User
Initiated Scheduled Events"; the Compute REST reference, ``ScheduledEventsPolicy``):

- ``userInitiatedReboot`` / ``userInitiatedRedeploy`` ``.automaticallyApprove``: "When events
  are automatically approved, a scheduled event with EventStatus:Scheduled isn't created.
  Instead, the operation is approved and only events with EventStatus:Started and
  EventStatus:Completed are created" (only the user-initiated events of that kind);
- ``allInstancesDown.automaticallyApprove``: "Specifies if Scheduled Events should be
  auto-approved when all instances are down. Its default value is true." (the ARM schema's
  ``AllInstancesDown``, azure-rest-api-specs ``ComputeRP``, as azure-mgmt-compute carries it):
  an event created while every VM of its scope is down starts at once instead of waiting for
  approvals nobody can give (what "down" is here: ``Jobs._all_instances_down``);
- ``scheduledEventsAdditionalPublishingTargets.eventGridAndResourceGraph`` ``.enable`` and
  ``.scheduledEventsApiVersion``: "By default, scheduled events aren't delivered to Event Grid";
  only the events of VMs that enable it reach Event Grid and Resource Graph, with that
  api-version in their ``ScheduledEventApiVersion`` property.

A VM in an availability set or a scale set has its set's policy: "All VMs in the same Virtual
Machine Scale Set or availability set are required to have the same scheduled events policy".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: The only ``scheduledEventsApiVersion`` the preview supports ("During the preview, the only
#: supported value is "2020-07-01"",
#: learn.microsoft.com/azure/virtual-machines/scheduled-events-event-grid, field table).
PUBLISHED_API_VERSION = "2020-07-01"


@dataclass(frozen=True, slots=True)
class ScheduledEventsPolicy:
    """One VM's (or set's) policy; the defaults are ARM's."""

    auto_approve_reboot: bool = False
    auto_approve_redeploy: bool = False
    auto_approve_all_instances_down: bool = True
    publish: bool = False
    published_api_version: str = PUBLISHED_API_VERSION

    def to_arm(self) -> dict[str, Any]:
        """The policy as ARM JSON (and as the journal keeps it)."""
        return {
            "userInitiatedReboot": {"automaticallyApprove": self.auto_approve_reboot},
            "userInitiatedRedeploy": {"automaticallyApprove": self.auto_approve_redeploy},
            "allInstancesDown": {"automaticallyApprove": self.auto_approve_all_instances_down},
            "scheduledEventsAdditionalPublishingTargets": {
                "eventGridAndResourceGraph": {
                    "enable": self.publish,
                    "scheduledEventsApiVersion": self.published_api_version,
                }
            },
        }


DEFAULT_POLICY = ScheduledEventsPolicy()


__all__ = ["DEFAULT_POLICY", "PUBLISHED_API_VERSION", "ScheduledEventsPolicy"]

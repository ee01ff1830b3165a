"""``scheduledEventsPolicy`` as ARM JSON: the one model the fleet file, the control API and
scenario steps read it with (:class:`~forewarn.domain.policy.ScheduledEventsPolicy` is what
it becomes). Unknown keys are refused, so a misspelt ``automaticalyApprove`` is an error, not
a silently default policy."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool

from forewarn.domain.policy import ScheduledEventsPolicy


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)


class AutomaticallyApprove(_Strict):
    automatically_approve: StrictBool = Field(default=False, alias="automaticallyApprove")


class AllInstancesDown(_Strict):
    #: "Its default value is true" (ARM schema, ``AllInstancesDown``).
    automatically_approve: StrictBool = Field(default=True, alias="automaticallyApprove")


class EventGridAndResourceGraph(_Strict):
    enable: StrictBool = False
    #: "During the preview, the only supported value is "2020-07-01"" (event-grid page).
    scheduled_events_api_version: Literal["2020-07-01"] = Field(
        default="2020-07-01", alias="scheduledEventsApiVersion"
    )


class PublishingTargets(_Strict):
    event_grid_and_resource_graph: EventGridAndResourceGraph = Field(
        default_factory=EventGridAndResourceGraph, alias="eventGridAndResourceGraph"
    )


class PolicyIn(_Strict):
    """``scheduledEventsPolicy``, every member optional, ARM's defaults where absent."""

    user_initiated_reboot: AutomaticallyApprove = Field(
        default_factory=AutomaticallyApprove, alias="userInitiatedReboot"
    )
    user_initiated_redeploy: AutomaticallyApprove = Field(
        default_factory=AutomaticallyApprove, alias="userInitiatedRedeploy"
    )
    all_instances_down: AllInstancesDown = Field(
        default_factory=AllInstancesDown, alias="allInstancesDown"
    )
    scheduled_events_additional_publishing_targets: PublishingTargets = Field(
        default_factory=PublishingTargets, alias="scheduledEventsAdditionalPublishingTargets"
    )

    def policy(self) -> ScheduledEventsPolicy:
        targets = self.scheduled_events_additional_publishing_targets.event_grid_and_resource_graph
        return ScheduledEventsPolicy(
            auto_approve_reboot=self.user_initiated_reboot.automatically_approve,
            auto_approve_redeploy=self.user_initiated_redeploy.automatically_approve,
            auto_approve_all_instances_down=self.all_instances_down.automatically_approve,
            publish=targets.enable,
            published_api_version=targets.scheduled_events_api_version,
        )


__all__ = ["PolicyIn"]

"""What the platform shows the control plane: frozen copies of its live records.

The records of :mod:`forewarn.domain._state` change in place as the lifecycle moves; a view is
taken at one instant, so a caller holding one never sees it change under it.
"""

from __future__ import annotations

from dataclasses import dataclass

from forewarn.domain._frozen import frozen_slot_setters
from forewarn.domain._state import Campaign, LiveEvent
from forewarn.domain.events import Event
from forewarn.domain.vms import Vm


@dataclass(frozen=True, slots=True, init=False)
class EventView:
    """A live event with who sees it and who approved it, for the control plane:
    ``approvals`` the tenants (what it waits for), ``approvers`` the VMs that approved, in
    order."""

    event: Event
    audience: frozenset[str]
    parties: frozenset[str]
    approvals: frozenset[str]
    job_id: int
    approvers: tuple[str, ...]

    def __init__(
        self,
        event: Event,
        audience: frozenset[str],
        parties: frozenset[str],
        approvals: frozenset[str],
        job_id: int,
        approvers: tuple[str, ...] = (),
    ) -> None:
        # As an Event's (forewarn.domain._frozen): a listing of the events builds one each.
        _set_event(self, event)
        _set_audience(self, audience)
        _set_parties(self, parties)
        _set_approvals(self, approvals)
        _set_job_id(self, job_id)
        _set_approvers(self, approvers)


(_set_event, _set_audience, _set_parties, _set_approvals, _set_job_id, _set_approvers) = (
    frozen_slot_setters(EventView)
)


@dataclass(frozen=True, slots=True)
class VmState:
    vm: Vm
    reachable: bool
    receiving: bool


@dataclass(frozen=True, slots=True)
class CampaignView:
    campaign_id: int
    step: int
    steps: int
    current: frozenset[str]


def event_view(live: LiveEvent) -> EventView:
    return EventView(
        live.event,
        live.audience,
        live.parties,
        live.approvals,  # frozen already, as approvers: replaced, never changed
        live.job.job_id,
        live.approvers,
    )


def campaign_view(campaign: Campaign) -> CampaignView:
    return CampaignView(
        campaign.campaign_id, campaign.step, len(campaign.steps), frozenset(campaign.current)
    )

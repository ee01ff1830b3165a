"""Campaigns: maintenance one fault domain at a time (SPEC 4).

A campaign is a list of steps (the jobs of one fault domain each); a step starts when every
event of the previous one is gone, so no two steps are in impact at once. Campaigns queue
behind each other: one started while another runs waits for it, so two campaigns over one set
cannot impact two of its fault domains at once.

This part only decides what comes next; scheduling the step's job is
:meth:`forewarn.domain._jobs.Jobs.continue_campaign`, so that the jobs depend on the
campaigns and never the other way round.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from forewarn.domain._state import Campaign, EventRequest, PlatformState


class Campaigns:
    """The running campaign and those queued behind it, in the order they were started."""

    def __init__(self, state: PlatformState) -> None:
        self._state = state

    def add(self, steps: Sequence[Sequence[EventRequest]]) -> tuple[Campaign, bool]:
        """A new campaign of the non-empty ``steps``, and True when it runs at once (no
        other campaign is running)."""
        state = self._state
        campaign = Campaign(next(state.campaign_ids), [list(step) for step in steps if step])
        running = bool(state.campaigns)
        state.campaigns[campaign.campaign_id] = campaign
        return campaign, not running

    def all(self) -> tuple[Campaign, ...]:
        return tuple(self._state.campaigns.values())

    def next_step(self, campaign: Campaign) -> tuple[Campaign, list[EventRequest]] | None:
        """The campaign and the requests of the step to schedule now that ``campaign``'s
        current step is over; None when no campaign has a step left.

        Requests keep only the VMs still there; a step left with none is skipped. A campaign
        with no step left ends, and the next queued one takes its turn.
        """
        state = self._state
        while True:
            while campaign.step < len(campaign.steps):
                step = campaign.steps[campaign.step]
                campaign.step += 1
                requests = []
                for request in step:
                    alive = tuple(name for name in request.impacted if name in state.vms)
                    if alive:
                        requests.append(replace(request, impacted=alive))
                if requests:
                    return campaign, requests
            del state.campaigns[campaign.campaign_id]
            if not state.campaigns:
                return None
            campaign = next(iter(state.campaigns.values()))

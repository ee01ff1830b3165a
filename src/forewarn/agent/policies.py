"""Policies: ordered rules that decide what the agent does with an event.

Each rule is a small callable-like value with an explicit decision: the first rule whose
conditions all hold wins, and an event no rule matches is only observed. The default rules are
those of the documentation's Python sample
(learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Python Sample"): approve
user-initiated events at once, approve Freeze events of 0 to 8 seconds at once, log the rest.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

from forewarn.agent.config import MatchSpec, RuleSpec
from forewarn.client import ScheduledEvent


class Action(enum.StrEnum):
    """What to do before the event starts."""

    APPROVE = "approve"  # approve at once, no preparation
    PREPARE_THEN_APPROVE = "prepare-then-approve"  # run prepare hooks; approve if they pass
    OBSERVE = "observe"  # log only: no hooks, no approval

    @property
    def prepares(self) -> bool:
        return self is Action.PREPARE_THEN_APPROVE

    @property
    def approves(self) -> bool:
        return self is not Action.OBSERVE

    @property
    def acts(self) -> bool:
        """Whether the started and recover hooks run for the event."""
        return self is not Action.OBSERVE


@dataclass(frozen=True, slots=True)
class Decision:
    action: Action
    rule: str  # the name of the rule that matched, or NO_RULE


NO_RULE = "(no rule matched)"


@dataclass(frozen=True, slots=True)
class Rule:
    name: str
    match: MatchSpec
    action: Action

    @classmethod
    def from_spec(cls, spec: RuleSpec) -> Rule:
        return cls(spec.name, spec.match, Action(spec.action))

    def matches(self, event: ScheduledEvent, vm_name: str) -> bool:
        match = self.match
        if match.type is not None and str(event.event_type) not in match.type:
            return False
        if match.source is not None and str(event.source) not in match.source:
            return False
        # The sample's test is "DurationInSeconds >= 0 and < 9": -1 (unknown) and an absent
        # field never satisfy a duration condition.
        duration = event.duration_seconds
        if duration is not None and duration < 0:
            duration = None
        if match.duration_below is not None and (
            duration is None or duration >= match.duration_below
        ):
            return False
        if match.duration_at_least is not None and (
            duration is None or duration < match.duration_at_least
        ):
            return False
        return match.in_resources is None or event.impacts(vm_name) == match.in_resources


class Policy:
    """The rules, in order."""

    def __init__(self, rules: Sequence[Rule]) -> None:
        self.rules = tuple(rules)

    @classmethod
    def from_specs(cls, specs: Sequence[RuleSpec]) -> Policy:
        return cls([Rule.from_spec(spec) for spec in specs])

    def decide(self, event: ScheduledEvent, vm_name: str) -> Decision:
        for rule in self.rules:
            if rule.matches(event, vm_name):
                return Decision(rule.action, rule.name)
        return Decision(Action.OBSERVE, NO_RULE)


__all__ = [
    "NO_RULE",
    "Action",
    "Decision",
    "Policy",
    "Rule",
]

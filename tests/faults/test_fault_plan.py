"""The fault plan alone (src/forewarn/faults.py): matching, counting, durations, seeded draws.

learn.microsoft.com/azure/virtual-machines/instance-metadata-service, "Errors and debugging": "410
Gone | Retry after some time for a max of 70 seconds", "429 Too Many Requests", "500 Service Error |
Retry after some time": the answers clients must retry, which a plan hands out on demand.
"""

from __future__ import annotations

import pytest

from forewarn.errors import InvalidInputError
from forewarn.faults import MAX_FAULTS, FaultKind, FaultPlan, FaultRule


def test_an_empty_plan_is_false_and_picks_nothing() -> None:
    plan = FaultPlan(seed=1)
    assert not plan
    assert plan.pick("vm1", 0.0) is None


def test_the_statuses_are_the_documented_ones() -> None:
    assert FaultRule(FaultKind.GONE).status == 410
    assert FaultRule(FaultKind.ERROR).status == 500
    assert FaultRule(FaultKind.THROTTLE).status == 429
    assert FaultRule(FaultKind.UNAVAILABLE).status == 503
    assert FaultRule(FaultKind.RESET).status is None


def test_a_count_covers_exactly_the_next_n_requests_then_the_rule_goes() -> None:
    plan = FaultPlan(seed=1)
    plan.add(FaultRule(FaultKind.GONE, count=3), 0.0)
    picks = [plan.pick("vm1", 0.0) for _ in range(5)]
    assert [p.kind if p else None for p in picks] == [FaultKind.GONE] * 3 + [None, None]
    assert not plan


def test_a_vm_rule_leaves_other_vms_alone() -> None:
    plan = FaultPlan(seed=1)
    plan.add(FaultRule(FaultKind.ERROR, vm="vm1"), 0.0)
    assert plan.pick("vm2", 0.0) is None
    assert plan.pick("vm1", 0.0) is not None


def test_a_duration_ends_the_rule_in_real_seconds() -> None:
    plan = FaultPlan(seed=1)
    plan.add(FaultRule(FaultKind.GONE, seconds=70), 100.0)
    assert plan.pick("vm1", 169.9) is not None
    assert plan.pick("vm1", 170.0) is None
    assert plan.faults(170.0) == ()


def test_count_and_duration_end_at_whichever_comes_first() -> None:
    plan = FaultPlan(seed=1)
    plan.add(FaultRule(FaultKind.GONE, count=1, seconds=60), 0.0)
    assert plan.pick("vm1", 1.0) is not None
    assert plan.pick("vm1", 2.0) is None


def test_the_oldest_matching_rule_applies_first() -> None:
    plan = FaultPlan(seed=1)
    plan.add(FaultRule(FaultKind.THROTTLE, count=1), 0.0)
    plan.add(FaultRule(FaultKind.ERROR), 0.0)
    assert [plan.pick("vm", 0.0).kind for _ in range(2)] == [  # type: ignore[union-attr]
        FaultKind.THROTTLE,
        FaultKind.ERROR,
    ]


def hits(plan: FaultPlan, vm: str, n: int) -> list[bool]:
    return [plan.pick(vm, 0.0) is not None for _ in range(n)]


def test_a_seeded_probability_hits_the_same_requests_every_run() -> None:
    runs = []
    for _ in range(2):
        plan = FaultPlan()
        plan.add(FaultRule(FaultKind.ERROR, probability=0.3, seed=42), 0.0)
        runs.append(hits(plan, "vm1", 200))
    assert runs[0] == runs[1]
    assert 20 < sum(runs[0]) < 110  # a share, not all or none


def test_another_vms_traffic_does_not_shift_a_seeded_rule() -> None:
    alone = FaultPlan()
    alone.add(FaultRule(FaultKind.ERROR, vm="vm1", probability=0.5, seed=7), 0.0)
    busy = FaultPlan()
    busy.add(FaultRule(FaultKind.ERROR, vm="vm1", probability=0.5, seed=7), 0.0)
    expected = hits(alone, "vm1", 50)
    observed = []
    for _ in range(50):
        busy.pick("vm2", 0.0)
        observed.append(busy.pick("vm1", 0.0) is not None)
    assert observed == expected


def test_a_plan_seed_seeds_the_rules_given_none() -> None:
    seeds = []
    for _ in range(2):
        plan = FaultPlan(seed=5)
        seeds.append(plan.add(FaultRule(FaultKind.RESET, probability=0.5), 0.0).seed)
    assert seeds[0] == seeds[1]


def test_clear_by_id_by_vm_and_all() -> None:
    plan = FaultPlan(seed=1)
    first = plan.add(FaultRule(FaultKind.GONE, vm="vm1"), 0.0)
    plan.add(FaultRule(FaultKind.GONE, vm="vm2"), 0.0)
    plan.add(FaultRule(FaultKind.RESET), 0.0)
    assert plan.clear(first.id) == 1
    assert plan.clear(first.id) == 0
    assert plan.clear(vm="vm2") == 1
    assert plan.clear() == 1
    assert not plan


@pytest.mark.parametrize(
    "fields",
    [
        {"count": 0},
        {"seconds": 0},
        {"seconds": -1},
        {"probability": 0},
        {"probability": 1.5},
        {"delay": 1.0},  # an error fault takes no delay
    ],
)
def test_bad_rules_are_refused(fields: dict[str, float]) -> None:
    with pytest.raises(InvalidInputError):
        FaultRule(FaultKind.GONE, **fields)  # type: ignore[arg-type]


def test_latency_needs_a_delay() -> None:
    with pytest.raises(InvalidInputError, match="delay"):
        FaultRule(FaultKind.LATENCY)


def test_the_plan_is_bounded() -> None:
    plan = FaultPlan(seed=1)
    for _ in range(MAX_FAULTS):
        plan.add(FaultRule(FaultKind.RESET), 0.0)
    with pytest.raises(InvalidInputError, match="at most"):
        plan.add(FaultRule(FaultKind.RESET), 0.0)

"""Faults injected in front of the VM-facing endpoint: the plan, with no I/O.

The IMDS overview tells clients to retry some answers
(learn.microsoft.com/azure/virtual-machines/instance-metadata-service, "Errors and debugging": "410
Gone | Retry after some time for a max of 70 seconds", "429 Too Many Requests", "500 Service Error |
Retry after some time"; 503 "Internal service unavailable. Retry later" in the IMDS family's
error codes); real networks add slow answers, no answer at all, bodies cut short and
resets. A :class:`FaultPlan` holds rules saying which of these a VM's requests meet (one VM or all;
the next N requests, for a duration, with a probability) and decides, request by request, which
fault applies. The decision is all it does: the transports carry the fault out
(:mod:`forewarn.server.fault_hook`).

Faults are not platform state: they are never journaled, do not survive a restart, and a
request they answer never reaches the platform (except ``latency`` and ``truncate``, which
delay or cut the real answer). Each rule has its own seeded :class:`random.Random`, so a seeded
probability fault hits the same requests every run whatever other rules exist. Durations are
in real (monotonic) seconds, the time clients retry in, whatever the platform's clock.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from enum import StrEnum

from forewarn.errors import InvalidInputError

__all__ = [
    "MAX_FAULTS",
    "MAX_SECONDS",
    "ActiveFault",
    "FaultKind",
    "FaultPlan",
    "FaultRule",
]

#: Rules held at once; more is a mistake, not a test.
MAX_FAULTS = 256
#: The longest duration, delay or count accepted (a day; a count of a million).
MAX_SECONDS = 86_400.0
MAX_COUNT = 1_000_000


class FaultKind(StrEnum):
    """What a faulted request meets."""

    #: 410 Gone: "Retry after some time for a max of 70 seconds".
    GONE = "gone"
    #: 500: "Retry after some time".
    ERROR = "error"
    #: 429 Too Many Requests, as over the rate limit of 5 requests per second.
    THROTTLE = "throttle"
    #: 503: "Internal service unavailable. Retry later" (IMDS error codes: "the API is
    #: temporarily unavailable. Try your request later").
    UNAVAILABLE = "unavailable"
    #: The real answer, ``delay`` seconds late.
    LATENCY = "latency"
    #: No answer at all: the connection stays open until the client gives up.
    TIMEOUT = "timeout"
    #: The real answer's head with its full Content-Length, half its body, then a close.
    TRUNCATE = "truncate"
    #: The connection is reset (RST) without an answer.
    RESET = "reset"


#: The status each error fault answers with.
STATUS = {
    FaultKind.GONE: 410,
    FaultKind.ERROR: 500,
    FaultKind.THROTTLE: 429,
    FaultKind.UNAVAILABLE: 503,
}


@dataclass(frozen=True, slots=True)
class FaultRule:
    """One fault to inject. ``vm`` None means every VM. Without ``count`` or ``seconds`` the
    rule lasts until cleared; with both it ends at whichever comes first. ``probability`` is
    the share of matching requests hit (each hit counts towards ``count``); ``delay`` is the
    added latency of ``latency`` faults (and how long a ``timeout`` keeps its connection
    silent before closing it, None: until the client gives up)."""

    kind: FaultKind
    vm: str | None = None
    count: int | None = None
    seconds: float | None = None
    probability: float = 1.0
    delay: float | None = None
    seed: int | None = None

    def __post_init__(self) -> None:
        if self.count is not None and not 1 <= self.count <= MAX_COUNT:
            raise InvalidInputError(f"count must be between 1 and {MAX_COUNT}")
        if self.seconds is not None and not 0 < self.seconds <= MAX_SECONDS:
            raise InvalidInputError(f"seconds must be above 0 and at most {MAX_SECONDS:g}")
        if not 0 < self.probability <= 1:
            raise InvalidInputError("probability must be above 0 and at most 1")
        if self.delay is not None and not 0 <= self.delay <= MAX_SECONDS:
            raise InvalidInputError(f"delay must be between 0 and {MAX_SECONDS:g} seconds")
        if self.kind is FaultKind.LATENCY and self.delay is None:
            raise InvalidInputError("a latency fault needs a delay (seconds)")
        if self.delay is not None and self.kind not in (FaultKind.LATENCY, FaultKind.TIMEOUT):
            raise InvalidInputError(f"a {self.kind} fault takes no delay")

    @property
    def status(self) -> int | None:
        """The status an error fault answers with; None for the others."""
        return STATUS.get(self.kind)


@dataclass(slots=True)
class ActiveFault:
    """A rule in the plan: its id, what is left of it and how often it struck."""

    id: int
    rule: FaultRule
    seed: int
    expires_at: float | None
    remaining: int | None
    hits: int = 0
    _rng: random.Random = field(repr=False, default_factory=random.Random)

    def live(self, now: float) -> bool:
        if self.remaining is not None and self.remaining <= 0:
            return False
        return self.expires_at is None or now < self.expires_at


class FaultPlan:
    """The rules in force, and the decision for each request.

    ``seed`` seeds the rules given none, in order; without it they get random seeds, shown by
    :meth:`faults` so a run can be repeated.
    """

    __slots__ = ("_next_id", "_seeds", "active")

    def __init__(self, seed: int | None = None) -> None:
        #: The faults in force, oldest first (some may have expired since the last look);
        #: read only. Every request's path asks whether it is empty, and only that.
        self.active: list[ActiveFault] = []
        self._next_id = 1
        self._seeds = random.Random(seed) if seed is not None else random.SystemRandom()

    def __bool__(self) -> bool:
        """Whether any rule is held."""
        return bool(self.active)

    def add(self, rule: FaultRule, now: float) -> ActiveFault:
        self._expire(now)
        if len(self.active) >= MAX_FAULTS:
            raise InvalidInputError(f"at most {MAX_FAULTS} faults at once; clear some first")
        seed = rule.seed if rule.seed is not None else self._seeds.randrange(2**32)
        fault = ActiveFault(
            id=self._next_id,
            rule=rule,
            seed=seed,
            expires_at=now + rule.seconds if rule.seconds is not None else None,
            remaining=rule.count,
            _rng=random.Random(seed),
        )
        self._next_id += 1
        self.active.append(fault)
        return fault

    def faults(self, now: float) -> tuple[ActiveFault, ...]:
        """The rules still in force, oldest first (spent and expired ones are dropped)."""
        self._expire(now)
        return tuple(self.active)

    def clear(self, fault_id: int | None = None, *, vm: str | None = None) -> int:
        """Drop one rule by id, every rule for ``vm``, or all of them; how many went."""
        before = len(self.active)
        if fault_id is not None:
            self.active = [f for f in self.active if f.id != fault_id]
        elif vm is not None:
            self.active = [f for f in self.active if f.rule.vm != vm]
        else:
            self.active = []
        return before - len(self.active)

    def pick(self, vm: str, now: float) -> FaultRule | None:
        """The fault this request from ``vm`` meets, if any: the oldest live matching rule
        whose draw hits. A rule that does not match the VM draws nothing, so one VM's
        traffic never shifts another's seeded sequence."""
        chosen: FaultRule | None = None
        for fault in self.active:
            rule = fault.rule
            if rule.vm is not None and rule.vm != vm:
                continue
            if not fault.live(now):
                continue
            if rule.probability < 1 and fault._rng.random() >= rule.probability:
                continue
            fault.hits += 1
            if fault.remaining is not None:
                fault.remaining -= 1
            chosen = rule
            break
        self._expire(now)
        return chosen

    def _expire(self, now: float) -> None:
        if any(not fault.live(now) for fault in self.active):
            self.active = [fault for fault in self.active if fault.live(now)]

"""The control API's fault routes: set, list and clear faults (:mod:`forewarn.faults`).

Faults are not platform operations: they bypass the journal and the registry, and touch
nothing but the fault plan, so they live in a router of their own under the same prefix.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Annotated

from fastapi import APIRouter, Query
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field

from forewarn.domain.errors import UnknownGroupError
from forewarn.faults import MAX_COUNT, MAX_SECONDS, ActiveFault, FaultKind, FaultRule
from forewarn.server._control_models import API
from forewarn.service import ScheduledEventsService

__all__ = ["FaultIn", "FaultOut", "FaultsOut", "fault_router"]

_Seconds = Annotated[float, Field(strict=False, gt=0, le=MAX_SECONDS, allow_inf_nan=False)]


class FaultIn(BaseModel):
    """A fault to inject: ``kind`` for ``vm`` (every VM when absent), for the next ``count``
    requests and/or ``seconds``, hitting a ``probability`` share of them, seeded by ``seed``."""

    model_config = ConfigDict(extra="forbid")

    kind: FaultKind
    vm: Annotated[str, Field(min_length=1, max_length=128)] | None = None
    count: Annotated[int, Field(ge=1, le=MAX_COUNT)] | None = None
    seconds: _Seconds | None = None
    probability: Annotated[float, Field(gt=0, le=1, allow_inf_nan=False)] = 1.0
    delay: Annotated[float, Field(ge=0, le=MAX_SECONDS, allow_inf_nan=False)] | None = None
    seed: Annotated[int, Field(ge=0, lt=2**63)] | None = None

    def rule(self) -> FaultRule:
        return FaultRule(**self.model_dump())


class FaultOut(BaseModel):
    id: int
    kind: FaultKind
    vm: str | None
    status: int | None = Field(description="the status answered; null for non-HTTP faults")
    count: int | None
    remaining: int | None
    seconds: float | None
    expiresIn: float | None = Field(description="seconds left, or null")  # noqa: N815
    probability: float
    delay: float | None
    seed: int
    hits: int


class FaultsOut(BaseModel):
    faults: list[FaultOut]


class ClearedOut(BaseModel):
    cleared: int


def fault_out(fault: ActiveFault, now: float) -> FaultOut:
    rule = fault.rule
    return FaultOut(
        id=fault.id,
        kind=rule.kind,
        vm=rule.vm,
        status=rule.status,
        count=rule.count,
        remaining=fault.remaining,
        seconds=rule.seconds,
        expiresIn=None if fault.expires_at is None else max(0.0, fault.expires_at - now),
        probability=rule.probability,
        delay=rule.delay,
        seed=fault.seed,
        hits=fault.hits,
    )


def fault_router(
    service: ScheduledEventsService, monotonic: Callable[[], float] = time.monotonic
) -> APIRouter:
    router = APIRouter(prefix=API, tags=["faults"])

    @router.get("/faults")
    async def list_faults() -> FaultsOut:
        """The faults in force, oldest (and first to apply) first."""
        now = monotonic()
        return FaultsOut(faults=[fault_out(fault, now) for fault in service.faults(now)])

    @router.post("/faults", status_code=201)
    async def set_fault(body: FaultIn) -> FaultOut:
        """Inject a fault in front of the VM-facing endpoint; the platform is not touched."""
        now = monotonic()
        return fault_out(service.add_fault(body.rule(), now), now)

    @router.delete("/faults")
    async def clear_faults(
        vm: Annotated[str | None, Query(max_length=128)] = None,
    ) -> ClearedOut:
        """Clear every fault, or those set for one VM."""
        return ClearedOut(cleared=service.clear_faults(vm=vm))

    @router.delete("/faults/{fault_id}", status_code=204)
    async def clear_fault(fault_id: int) -> Response:
        if not service.clear_faults(fault_id):
            raise UnknownGroupError("fault", str(fault_id))  # a 404, as any unknown name
        return Response(status_code=204)

    return router

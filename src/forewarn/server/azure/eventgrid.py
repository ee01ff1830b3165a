"""The control API's Event Grid routes: subscriptions, their validation URL and their faults.

``/api/v1/eventgrid/subscriptions`` creates (with the validation handshake), lists and deletes
webhook subscriptions to the system topic of scheduled events; ``GET /api/v1/eventgrid/validate``
is the validation URL a receiver may GET instead of answering the handshake (it carries its own
secret, so the control guard lets it through without the token); ``POST .../{name}/faults``
injects ``eventgrid-duplicate``. Delivery itself is :class:`forewarn.eventgrid.delivery.EventGrid`.
"""

from __future__ import annotations

import secrets
from typing import Annotated, Literal

from fastapi import APIRouter, Query
from fastapi.responses import PlainTextResponse, Response
from pydantic import BaseModel, ConfigDict, Field, StrictInt

from forewarn.defaults import CONTROL_API
from forewarn.domain.errors import InvalidOperationError
from forewarn.eventgrid.delivery import EventGrid, SubscriptionView

_UNAVAILABLE = "Event Grid runs under forewarn serve, not in process"


class SubscribeRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    name: str | None = Field(default=None, max_length=64, description="3-64 letters, digits, -")
    endpoint: str = Field(max_length=4096, description="The webhook's http(s) URL")
    schema_: Literal["eventgrid", "cloudevents"] = Field(default="eventgrid", alias="schema")


class FaultRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["eventgrid-duplicate"]
    count: StrictInt = Field(default=1, ge=1, le=100_000)


class SubscriptionOut(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    name: str
    endpoint: str
    schema_: str = Field(alias="schema")
    provisioning_state: str = Field(
        alias="provisioningState", description="AwaitingManualAction, Succeeded or Failed"
    )
    delivered: int
    failed: int = Field(description="Failed attempts (each retry counts)")
    dead_lettered: int = Field(alias="deadLettered")
    dead_letter_failures: int = Field(
        alias="deadLetterFailures",
        description="Dead-letter writes that failed (each tried again a minute later)",
    )
    pending: int = Field(description="Deliveries not yet done")
    duplicates: int = Field(description="Deliveries still to be sent twice (fault)")
    last_error: str = Field(alias="lastError")


class SubscriptionsOut(BaseModel):
    subscriptions: list[SubscriptionOut]


def subscription_out(view: SubscriptionView) -> SubscriptionOut:
    s = view.subscription
    return SubscriptionOut.model_validate(
        {
            "name": s.name,
            "endpoint": s.endpoint,
            "schema": s.schema,
            "provisioningState": s.state,
            "delivered": s.delivered,
            "failed": s.failed,
            "deadLettered": s.dead_lettered,
            "deadLetterFailures": s.letter_failures,
            "pending": view.pending,
            "duplicates": s.duplicates,
            "lastError": s.last_error,
        }
    )


def eventgrid_router(grid: EventGrid | None) -> APIRouter:
    router = APIRouter(prefix=f"{CONTROL_API}/eventgrid", tags=["event grid"])

    def available() -> EventGrid:
        if grid is None:
            raise InvalidOperationError(_UNAVAILABLE)
        return grid

    @router.post("/subscriptions", status_code=201)
    async def subscribe(body: SubscribeRequest) -> SubscriptionOut:
        """Subscribe a webhook; the answer says whether the validation handshake succeeded."""
        name = body.name or f"forewarn-{secrets.token_hex(4)}"
        return subscription_out(await available().subscribe(name, body.endpoint, body.schema_))

    @router.get("/subscriptions")
    async def subscriptions() -> SubscriptionsOut:
        return SubscriptionsOut(
            subscriptions=[subscription_out(view) for view in await available().list()]
        )

    @router.delete("/subscriptions/{name}", status_code=204)
    async def delete(name: str) -> Response:
        await available().delete(name)
        return Response(status_code=204)

    @router.post("/subscriptions/{name}/faults")
    async def fault(name: str, body: FaultRequest) -> SubscriptionOut:
        """``eventgrid-duplicate``: the next ``count`` deliveries are sent twice, same ``id``."""
        return subscription_out(await available().duplicate(name, body.count))

    @router.get("/validate", include_in_schema=False)
    async def validate(
        subscription: Annotated[str, Query(max_length=64)],
        code: Annotated[str, Query(max_length=64)],
    ) -> PlainTextResponse:
        await available().validate(subscription, code)
        return PlainTextResponse("Webhook successfully validated as a subscription endpoint.")

    return router


__all__ = [
    "FaultRequest",
    "SubscribeRequest",
    "SubscriptionOut",
    "SubscriptionsOut",
    "eventgrid_router",
    "subscription_out",
]

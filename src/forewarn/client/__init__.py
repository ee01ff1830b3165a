"""The Scheduled Events client: read, approve and watch this VM's events.

The same code talks to Azure's Metadata Service at 169.254.169.254 and to ``forewarn serve``;
nothing in it knows which one answers. Usage is in ``docs/client.md``::

    from forewarn.client import Client

    with Client() as client:
        for change in client.watch():
            for event in change.added:
                ...  # prepare
            client.approve(*change.added)

Public names are re-exported here; the ``_modules`` behind them are private.
"""

from __future__ import annotations

from forewarn.client._async import AsyncClient
from forewarn.client._discovery import (
    DEFAULT_LEASE_PATHS,
    ENDPOINT_ENVIRONMENT_VARIABLE,
    IMDS_ADDRESS,
    Endpoint,
    discover_endpoint,
    endpoint_candidates,
    option_245_address,
)
from forewarn.client._errors import (
    BadRequestError,
    GoneError,
    ImdsConnectionError,
    ImdsError,
    ImdsHttpError,
    ImdsTimeoutError,
    ImdsTransportError,
    InvalidApiVersionError,
    MalformedResponseError,
    MethodNotAllowedError,
    NotFoundError,
    ServerError,
    TooManyRequestsError,
)
from forewarn.client._models import (
    ComputeMetadata,
    EventSource,
    EventStatus,
    EventType,
    ScheduledEvent,
    ScheduledEventsDocument,
    parse_compute,
    parse_document,
    parse_not_before,
)
from forewarn.client._protocol import (
    DEFAULT_API_VERSION,
    DEFAULT_INSTANCE_API_VERSION,
    DEFAULT_TIMEOUT,
    FIRST_CALL_TIMEOUT,
)
from forewarn.client._retry import NO_RETRY, RetryPolicy, is_transient
from forewarn.client._sync import Client
from forewarn.client._watch import (
    DEFAULT_POLL_INTERVAL,
    DocumentChange,
    EventUpdate,
    IncarnationTracker,
    diff_documents,
)

__all__ = [
    "DEFAULT_API_VERSION",
    "DEFAULT_INSTANCE_API_VERSION",
    "DEFAULT_LEASE_PATHS",
    "DEFAULT_POLL_INTERVAL",
    "DEFAULT_TIMEOUT",
    "ENDPOINT_ENVIRONMENT_VARIABLE",
    "FIRST_CALL_TIMEOUT",
    "IMDS_ADDRESS",
    "NO_RETRY",
    "AsyncClient",
    "BadRequestError",
    "Client",
    "ComputeMetadata",
    "DocumentChange",
    "Endpoint",
    "EventSource",
    "EventStatus",
    "EventType",
    "EventUpdate",
    "GoneError",
    "ImdsConnectionError",
    "ImdsError",
    "ImdsHttpError",
    "ImdsTimeoutError",
    "ImdsTransportError",
    "IncarnationTracker",
    "InvalidApiVersionError",
    "MalformedResponseError",
    "MethodNotAllowedError",
    "NotFoundError",
    "RetryPolicy",
    "ScheduledEvent",
    "ScheduledEventsDocument",
    "ServerError",
    "TooManyRequestsError",
    "diff_documents",
    "discover_endpoint",
    "endpoint_candidates",
    "is_transient",
    "option_245_address",
    "parse_compute",
    "parse_document",
    "parse_not_before",
]

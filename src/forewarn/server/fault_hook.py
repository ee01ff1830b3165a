"""Where the VM-facing transports meet the fault plan (:mod:`forewarn.faults`).

Each transport asks :func:`fault_for` once per request, before the endpoint answers (the socket
server asks the service's own ``fault_for``, which this calls, bound once: a Python call less on
every poll); it is one test of an empty list when no fault is set. The error faults are
answered here with what Azure's IMDS sends for them; the others (a delay, no answer, a cut body,
a reset) are carried out by the transport, as only it can: :mod:`forewarn.server.http` on
sockets, the in-process transport of :mod:`forewarn.testing` with the errors httpx raises for
them.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from forewarn.faults import STATUS, FaultKind, FaultRule
from forewarn.server.imds import ImdsEndpoint, ImdsResponse
from forewarn.wire.errors import SERVICE_UNAVAILABLE, TOO_MANY_REQUESTS, error_body

__all__ = ["ERROR_MESSAGES", "error_response", "fault_for"]

#: The message of each error fault.
#: learn.microsoft.com/azure/virtual-machines/instance-metadata-service, "Frequently asked
#: questions": "Why am I getting the error `500 Internal Server Error` or `410 Resource Gone`?"; 429
#: is the rate limit's own text and 503 the IMDS error codes' (SPEC 1.2). The bodies are the
#: IMDS family's ``{"error": "..."}`` (SPEC 1).
ERROR_MESSAGES = {
    FaultKind.GONE: "Resource Gone",
    FaultKind.ERROR: "Internal Server Error",
    FaultKind.THROTTLE: TOO_MANY_REQUESTS,
    FaultKind.UNAVAILABLE: SERVICE_UNAVAILABLE,
}
_ERRORS = {
    kind: ImdsResponse(status, error_body(ERROR_MESSAGES[kind])) for kind, status in STATUS.items()
}


def fault_for(
    endpoint: ImdsEndpoint,
    local_address: str,
    peer_address: str,
    monotonic: Callable[[], float] = time.monotonic,
) -> FaultRule | None:
    """The fault a request arriving at ``local_address`` meets, if any. Requests no VM
    answers for meet none: the endpoint refuses them as it always does."""
    return endpoint.service.fault_for(local_address, peer_address, monotonic)


def error_response(rule: FaultRule) -> ImdsResponse | None:
    """The answer of a 410, 500, 429 or 503 fault; None for the faults a transport carries out."""
    return _ERRORS.get(rule.kind)

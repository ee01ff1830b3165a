"""What Azure Resource Manager's routes share: paths read without regard to case, api-versions
and the ARM error envelope.

ARM answers an error as ``{"error": {"code": ..., "message": ..., "details": [...]}}`` (the
"ErrorResponse" every management-plane REST spec references, which the management SDKs parse
into ``HttpResponseError.error``), not as the control API's ``{"error": "..."}``; the routes of
this package answer so, whatever went wrong.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, MutableMapping, Sequence
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse

from forewarn.wire.status_names import STATUS_NAMES

_Scope = MutableMapping[str, Any]
_Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
_Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


class ArmPaths:
    """Reads the start of an ARM route's path without regard to case, as ARM reads resource
    ids (the Scheduled Events pages themselves spell ``resourcegroups`` and
    ``resourceGroups``, ``Microsoft.Maintenance`` and ``microsoft.maintenance``): a request
    whose path begins with one of ``prefixes`` in any spelling is routed as if it were
    spelled as given, so ``/SUBSCRIPTIONS/...`` reaches the same operation as
    ``/subscriptions/...`` rather than the control API's own 404. What follows the prefix is
    the route's to read without regard to case (:func:`forewarn.domain.arm.
    parse_scheduled_event_id`).

    An ASGI middleware around the whole control app: the routers' own matching is
    case-sensitive, and rebuilt by the framework when they are included."""

    def __init__(
        self, app: Callable[[_Scope, _Receive, _Send], Awaitable[None]], prefixes: Sequence[str]
    ) -> None:
        self.app = app
        self._prefixes = tuple((prefix.lower(), prefix) for prefix in prefixes)

    async def __call__(self, scope: _Scope, receive: _Receive, send: _Send) -> None:
        if scope["type"] == "http":
            path: str = scope["path"]
            lowered = path.lower()
            for folded, spelled in self._prefixes:
                if lowered.startswith(folded) and not path.startswith(spelled):
                    scope = {**scope, "path": spelled + path[len(spelled) :]}
                    break
        await self.app(scope, receive, send)


def is_arm_path(path: str, prefixes: Sequence[str]) -> bool:
    """Whether ``path`` is one of the ARM routes that begin with ``prefixes`` (in any case)."""
    lowered = path.lower()
    return any(lowered.startswith(prefix.lower()) for prefix in prefixes)


def arm_code(status: int) -> str:
    """The code of an ARM error no route named itself: the status's .NET name, as ARM's
    generic codes are (``ServiceUnavailable``, ``InternalServerError``, ``NotFound``)."""
    return STATUS_NAMES.get(status, "Error")


def arm_body(code: str, message: str, details: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
    """ARM's error envelope, for the routes and for the guard in front of them alike."""
    error: dict[str, Any] = {"code": code, "message": message}
    if details:
        error["details"] = list(details)
    return {"error": error}


def arm_error(
    status: int, code: str, message: str, details: Sequence[dict[str, Any]] = ()
) -> JSONResponse:
    return JSONResponse(arm_body(code, message, details), status_code=status)


def api_version_error(request: Request, supported: Collection[str]) -> JSONResponse | None:
    """ARM's refusal of a request without a supported ``api-version``, or None."""
    given = request.query_params.getlist("api-version")
    if not given:
        return arm_error(
            400,
            "MissingApiVersionParameter",
            "The api-version query parameter (?api-version=) is required for all requests.",
        )
    if len(given) > 1 or given[0] not in supported:
        return arm_error(
            400,
            "InvalidApiVersionParameter",
            f"The api-version '{given[-1][:32]}' is invalid. The supported versions are "
            f"'{','.join(sorted(supported))}'.",
        )
    return None


__all__ = ["ArmPaths", "api_version_error", "arm_body", "arm_code", "arm_error", "is_arm_path"]

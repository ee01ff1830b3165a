"""What Azure Resource Manager's routes share: api-versions and the ARM error envelope.

ARM answers an error as ``{"error": {"code": ..., "message": ..., "details": [...]}}`` (the
"ErrorResponse" every management-plane REST spec references, which the management SDKs parse
into ``HttpResponseError.error``), not as the control API's ``{"error": "..."}``; the routes of
this package answer so, whatever went wrong.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse


def arm_error(
    status: int, code: str, message: str, details: Sequence[dict[str, Any]] = ()
) -> JSONResponse:
    error: dict[str, Any] = {"code": code, "message": message}
    if details:
        error["details"] = list(details)
    return JSONResponse({"error": error}, status_code=status)


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


__all__ = ["api_version_error", "arm_error"]

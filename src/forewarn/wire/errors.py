"""Error bodies in the IMDS family's style: JSON ``{"error": "<message>"}`` (SPEC 1).

Texts documented for IMDS are used as they are; where no text is documented the message
follows the same style ([ours]).
"""

from __future__ import annotations

import orjson

from forewarn.domain.api_versions import NEWEST_VERSIONS

MISSING_METADATA_HEADER = "Bad request. Required metadata header not specified"
#: learn.microsoft.com/azure/virtual-machines/instance-metadata-service, "Versioning": the text for
#: a request without an api-version.
MISSING_API_VERSION = (
    "Bad request. api-version was not specified in the request. "
    "For more information refer to aka.ms/azureimds"
)
#: The same family's text for a version that is not served (SPEC 1).
INVALID_API_VERSION = (
    "Bad request. api-version is invalid. For more information refer to aka.ms/azureimds"
)
#: learn.microsoft.com/azure/load-balancer/troubleshoot-load-balancer-imds, "Error codes".
HEADER_VALUE_TOO_LONG = "Parameter header value length is larger than MaxHeaderValueLength: {}"
FORWARDED_REQUEST = "Bad request. Requests with an X-Forwarded-For header are not allowed"
DUPLICATE_PARAMETER = "Bad request. Query parameter names must not repeat"
TOO_MANY_REQUESTS = "Too many requests"
#: learn.microsoft.com/azure/load-balancer/troubleshoot-load-balancer-imds, "Error codes": the API
#: is temporarily unavailable (SPEC 1).
SERVICE_UNAVAILABLE = "Internal service unavailable. Retry later"


def error_body(message: str) -> bytes:
    return orjson.dumps({"error": message})


def invalid_api_version_body_for(newest: tuple[str, ...], *, given: bool = True) -> bytes:
    """The 400 for a missing (``given`` False) or unserved api-version, with the newest ones."""
    message = INVALID_API_VERSION if given else MISSING_API_VERSION
    return orjson.dumps({"error": message, "newest-versions": list(newest)})


def invalid_api_version_body(*, given: bool = True) -> bytes:
    """The Scheduled Events flavour: its own three newest versions ([ours])."""
    return invalid_api_version_body_for(NEWEST_VERSIONS, given=given)


def not_found_message(path: str, method: str) -> str:
    return f'API isn\'t found: Path = "{path}", Method = "{method}"'


def method_not_allowed_message(path: str, method: str) -> str:
    return f'Http method isn\'t allowed: Path = "{path}", Method = "{method}"'


__all__ = [
    "DUPLICATE_PARAMETER",
    "FORWARDED_REQUEST",
    "HEADER_VALUE_TOO_LONG",
    "INVALID_API_VERSION",
    "MISSING_API_VERSION",
    "MISSING_METADATA_HEADER",
    "SERVICE_UNAVAILABLE",
    "TOO_MANY_REQUESTS",
    "error_body",
    "invalid_api_version_body",
    "invalid_api_version_body_for",
    "method_not_allowed_message",
    "not_found_message",
]

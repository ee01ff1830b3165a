"""Error bodies in the IMDS family's style: JSON ``{"error": "<message>"}`` (SPEC 1).

Texts documented for IMDS are used as they are; where no text is documented the message
follows the same style ([ours]).
"""

from __future__ import annotations

import orjson

from forewarn.domain.api_versions import NEWEST_VERSIONS

MISSING_METADATA_HEADER = "Bad request. Required metadata header not specified"
INVALID_API_VERSION = (
    "Bad request. api-version is invalid or was not specified in the request. "
    "For more information refer to aka.ms/azureimds"
)
FORWARDED_REQUEST = "Bad request. Requests with an X-Forwarded-For header are not allowed"
DUPLICATE_PARAMETER = "Bad request. Query parameter names must not repeat"
TOO_MANY_REQUESTS = "Too many requests"


def error_body(message: str) -> bytes:
    return orjson.dumps({"error": message})


def invalid_api_version_body_for(newest: tuple[str, ...]) -> bytes:
    return orjson.dumps({"error": INVALID_API_VERSION, "newest-versions": list(newest)})


def invalid_api_version_body() -> bytes:
    """The Scheduled Events flavour: its own three newest versions ([ours])."""
    return invalid_api_version_body_for(NEWEST_VERSIONS)


def not_found_message(path: str, method: str) -> str:
    return f'API isn\'t found: Path = "{path}", Method = "{method}"'


def method_not_allowed_message(path: str, method: str) -> str:
    return f'Http method isn\'t allowed: Path = "{path}", Method = "{method}"'

"""Everything the client raises, in one tree, so a caller can catch as widely as it likes.

::

    ImdsError                          anything the client raises on purpose
    ├── ImdsTransportError             no HTTP answer at all                      transient
    │   ├── ImdsConnectionError        refused, reset, or closed unanswered       transient
    │   └── ImdsTimeoutError           connect, read, write or pool timeout       transient
    ├── ImdsHttpError                  an answer whose status is not 200
    │   ├── BadRequestError            400: header, query or body refused
    │   │   └── InvalidApiVersionError 400 naming the service's newest versions
    │   ├── NotFoundError              404
    │   ├── MethodNotAllowedError      405
    │   ├── GoneError                  410                                        transient
    │   ├── TooManyRequestsError       429                                        transient
    │   └── ServerError                5xx                                        transient
    └── MalformedResponseError         200, but not the JSON the path returns

``transient`` is what the default :class:`~forewarn.client.RetryPolicy` retries: the IMDS
family documents 410 and 500 as transient and 429 as its rate limit (SPEC 1); a
connection closed unanswered is what an endpoint does while its VM is frozen or rebooting
(SPEC 1 [ours]). The caller decides what is fatal: every error reaches it once the
retries are spent, with ``attempts`` saying how many tries were made.
"""

from __future__ import annotations

from typing import ClassVar

from forewarn.errors import ForewarnError


class ImdsError(ForewarnError):
    """Root of the client's errors."""

    transient: ClassVar[bool] = False

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
        #: How many requests were made before this error was given up on (1 = no retry).
        self.attempts = 1


class ImdsTransportError(ImdsError):
    """The request got no HTTP answer."""

    transient = True


class ImdsConnectionError(ImdsTransportError):
    """The connection could not be made, or was closed before an answer."""


class ImdsTimeoutError(ImdsTransportError):
    """No answer within the timeout."""


class ImdsHttpError(ImdsError):
    """The endpoint answered with a status other than 200.

    ``message`` is the ``error`` text of the IMDS JSON error body when there is one, else the
    body as text; ``retry_after`` is a ``Retry-After`` header in seconds, when one was sent.
    """

    def __init__(
        self, status: int, message: str, *, body: bytes = b"", retry_after: float | None = None
    ) -> None:
        super().__init__(f"{status}: {message}")
        self.message = message
        self.status = status
        self.body = body
        self.retry_after = retry_after


class BadRequestError(ImdsHttpError):
    """400: the service refused the request (missing header, bad payload, unknown EventId)."""


class InvalidApiVersionError(BadRequestError):
    """400 for an api-version the service does not serve; ``newest_versions`` lists its own."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        newest_versions: tuple[str, ...],
        body: bytes = b"",
        retry_after: float | None = None,
    ) -> None:
        super().__init__(status, message, body=body, retry_after=retry_after)
        self.newest_versions = newest_versions


class NotFoundError(ImdsHttpError):
    """404: no such path (or, for instance metadata, no such field)."""


class MethodNotAllowedError(ImdsHttpError):
    """405."""


class GoneError(ImdsHttpError):
    """410: a transient platform error; try again."""

    transient = True


class TooManyRequestsError(ImdsHttpError):
    """429: over the per-VM rate limit."""

    transient = True


class ServerError(ImdsHttpError):
    """5xx: a transient platform error; try again."""

    transient = True


class MalformedResponseError(ImdsError):
    """A 200 answer whose body is not the JSON document the path returns."""

    def __init__(self, message: str, *, body: bytes = b"") -> None:
        super().__init__(message)
        self.body = body

"""The names .NET's ``HttpStatusCode`` gives HTTP statuses, which Azure's services show
where they name a status: Event Grid's ``lastDeliveryOutcome`` ("Delivery event formats":
``"lastDeliveryOutcome": "NotFound"``) and the codes of ARM's errors that no operation names
itself (``ServiceUnavailable``). Written out rather than derived from Python's ``HTTPStatus``,
whose names differ from .NET's and change between Python versions (3.13 names 422
``UNPROCESSABLE_CONTENT``)."""

from __future__ import annotations

__all__ = ["STATUS_NAMES"]

#: The failures' statuses by their .NET names.
STATUS_NAMES = {
    400: "BadRequest",
    401: "Unauthorized",
    402: "PaymentRequired",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    406: "NotAcceptable",
    407: "ProxyAuthenticationRequired",
    408: "RequestTimeout",
    409: "Conflict",
    410: "Gone",
    411: "LengthRequired",
    412: "PreconditionFailed",
    413: "RequestEntityTooLarge",
    414: "RequestUriTooLong",
    415: "UnsupportedMediaType",
    416: "RequestedRangeNotSatisfiable",
    417: "ExpectationFailed",
    421: "MisdirectedRequest",
    422: "UnprocessableEntity",
    423: "Locked",
    424: "FailedDependency",
    426: "UpgradeRequired",
    428: "PreconditionRequired",
    429: "TooManyRequests",
    431: "RequestHeaderFieldsTooLarge",
    451: "UnavailableForLegalReasons",
    500: "InternalServerError",
    501: "NotImplemented",
    502: "BadGateway",
    503: "ServiceUnavailable",
    504: "GatewayTimeout",
    505: "HttpVersionNotSupported",
    506: "VariantAlsoNegotiates",
    507: "InsufficientStorage",
    508: "LoopDetected",
    510: "NotExtended",
    511: "NetworkAuthenticationRequired",
}

"""Raw requests for the in-process socket tests of ``server/http/``, and an endpoint that
fails on purpose (no request makes the shipped one fail)."""

from __future__ import annotations

import json

import pytest

from forewarn.server.imds import Answer, ImdsRequest
from forewarn.testing import ForewarnPlatform

TARGET = b"/metadata/scheduledevents?api-version=2020-07-01"
CLOSE = b"Connection: close\r\n"
FAILURE = "the endpoint failed on purpose"
#: The IMDS-style body of the 500 the server answers when the endpoint itself fails.
INTERNAL_ERROR = b'{"error":"Internal server error"}'


def get(target: bytes = TARGET, extra: bytes = b"", *, metadata: bool = True) -> bytes:
    header = b"Metadata: true\r\n" if metadata else b""
    return b"GET %s HTTP/1.1\r\nHost: 169.254.169.254\r\n%s%s\r\n" % (target, header, extra)


def post(body: bytes, extra: bytes = b"") -> bytes:
    return (
        b"POST %s HTTP/1.1\r\nHost: 169.254.169.254\r\nMetadata: true\r\n"
        b"Content-Length: %d\r\n%s\r\n%s" % (TARGET, len(body), extra, body)
    )


def approval(event_id: str) -> bytes:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Start an event": the
    StartRequests body."""
    return json.dumps({"StartRequests": [{"EventId": event_id}]}).encode()


def fail_from_now_on(platform: ForewarnPlatform, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every request the endpoint handles from now on raises."""

    def respond(request: ImdsRequest, *, admitted: bool = False) -> Answer:
        raise RuntimeError(FAILURE)

    def respond_again(*repeated: object, admitted: bool = False) -> None:
        raise RuntimeError(FAILURE)

    monkeypatch.setattr(platform.endpoint, "respond", respond)
    monkeypatch.setattr(platform.endpoint, "respond_again", respond_again)

"""A failure inside the endpoint must show as what it is: a 500 to the client and a traceback in
the server's log, never a 400 that blames the client's HTTP.

No request makes the shipped endpoint fail, so a process of its own serves the real socket
protocol (``forewarn.server.http``, started by ``forewarn.testing``) around an endpoint whose
``respond`` (what the socket server calls) raises.
"""

from __future__ import annotations

import re
import sys

import pytest
from e2e_documented import InteractiveProcess
from e2e_support import (
    SCHEDULED_EVENTS,
    clean_environment,
    exchange,
    parse_responses,
)

pytestmark = pytest.mark.e2e

_LINE = re.compile(r"\n")

_BROKEN_SERVER = """
import time

from forewarn.testing import ForewarnPlatform


def broken(request):
    raise RuntimeError("the endpoint failed on purpose")


with ForewarnPlatform() as platform:
    platform.endpoint.respond = broken
    print(platform.port, flush=True)
    time.sleep(30)
"""


def test_an_exception_in_the_endpoint_is_a_logged_500() -> None:
    """SPEC 1: "410/500 are transient platform errors that clients retry"; a 400
    would tell the client its request was wrong, and it would not retry."""
    server = InteractiveProcess([sys.executable, "-c", _BROKEN_SERVER], clean_environment())
    try:
        server.read_for(10.0, _LINE, 1)
        port = int(server.stdout.strip())
        request = (
            f"GET {SCHEDULED_EVENTS}?api-version=2020-07-01 HTTP/1.1\r\nMetadata: true\r\n\r\n"
        )
        reply = exchange("127.0.0.1", port, request.encode())
    finally:
        server.process.kill()
        _, _, log = server.finish(timeout=5.0)
    (response,) = parse_responses(reply.data)
    assert response.status == 500
    assert response.json() == {"error": "Internal server error"}
    assert response.header("Connection") == "close"
    assert reply.closed
    assert "error answering a request" in log
    assert "RuntimeError: the endpoint failed on purpose" in log

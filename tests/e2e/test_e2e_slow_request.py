"""A request that trickles in forever is closed (SPEC 1: untrusted input is bounded).

A client sending one byte now and then never looks idle, so the idle timeout alone would keep
its connection, and its buffers, for as long as it likes.
"""

from __future__ import annotations

import asyncio

import pytest

from forewarn.server.http import limits
from forewarn.testing import ForewarnPlatform

pytestmark = pytest.mark.e2e


async def _trickle(port: int, pause: float, pieces: int) -> bytes:
    """What the server sent before closing the connection. A byte written in the moment
    between its close and the client seeing it is answered by a reset, which ends the
    connection unanswered all the same (nothing is sent before a close)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    request = b"GET /metadata/scheduledevents?api-version=2020-07-01 HTTP/1.1\r\nMetadata: true\r\n"
    try:
        for index in range(pieces):
            writer.write(request[index : index + 1] or b"X")
            await writer.drain()
            await asyncio.sleep(pause)
            if reader.at_eof():
                break
        return await asyncio.wait_for(reader.read(), timeout=2)
    except ConnectionResetError:
        return b""
    finally:
        writer.close()


async def _run(port: int) -> tuple[bytes, bytes]:
    closed = await _trickle(port, pause=0.05, pieces=40)  # 2 s of trickling
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(
        b"GET /metadata/scheduledevents?api-version=2020-07-01 HTTP/1.1\r\n"
        b"Host: x\r\nMetadata: true\r\nConnection: close\r\n\r\n"
    )
    answer = await asyncio.wait_for(reader.read(), timeout=2)
    writer.close()
    return closed, answer


def test_a_trickling_request_is_closed_and_others_still_answered(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(limits, "REQUEST_TIMEOUT", 0.3)
    monkeypatch.setattr(limits, "IDLE_SWEEP", 0.05)
    with ForewarnPlatform(rate_limit=1000) as platform:
        closed, answer = asyncio.run(_run(platform.port))
    assert closed == b""  # closed without an answer, long before the 40 pieces were sent
    assert answer.startswith(b"HTTP/1.1 200 OK")
    assert answer.endswith(b'{"DocumentIncarnation":1,"Events":[]}')

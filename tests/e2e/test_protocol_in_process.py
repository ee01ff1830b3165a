"""The socket protocol's rules, against the endpoint's server running in this process.

``test_e2e_hostile_input.py`` and most of ``test_e2e_http_protocol.py`` run against ``forewarn
serve`` in a process of its own (the internal-error and slow-request cases already start the
socket server here, and are simply collected again outside the ``e2e`` mark). Here the same test functions run against the same socket
server (``server/http/``) started by ``forewarn.testing`` in a thread of this process, with
the platform driven directly instead of through the control API. Nothing is weakened: every
case keeps its assertions. What it adds is that a change to ``server/http/`` is seen by
tools that only watch this process, mutation testing first (docs/contributing.md).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pytest
import test_e2e_hostile_input as hostile
import test_e2e_http_internal_error as internal_error
import test_e2e_http_protocol as protocol
import test_e2e_slow_request as slow_request
from e2e_support import (
    OUTSIDER_HOST,
    PAIR_HOSTS,
    Exchange,
    ForewarnServer,
    assert_cut_short,
    exchange,
    pair_fleet,
    parse_responses,
)

from forewarn.testing import ForewarnPlatform


class _Thread:
    """What the cases ask of a server process, for the server thread."""

    def __init__(self, platform: ForewarnPlatform) -> None:
        self.platform = platform

    def output(self) -> str:
        return ""

    def assert_healthy(self) -> None:
        assert self.platform.serve().is_running(), "the server thread stopped"


class InProcessServer(ForewarnServer):
    """:class:`ForewarnServer`'s socket side as is; its control side done on the platform."""

    def __init__(self, platform: ForewarnPlatform) -> None:  # no control API to connect to
        self.platform = platform
        self.port = platform.serve().port
        self.vm_hosts = (*PAIR_HOSTS, OUTSIDER_HOST)
        self.control_url = ""
        self.process = _Thread(platform)  # type: ignore[assignment]

    def create_event(self, event_type: str, resources: Sequence[str], **fields: Any) -> str:
        event = self.platform.schedule(
            event_type,
            *resources,
            source=fields.pop("source", "Platform"),
            description=fields.pop("description", ""),
            duration_seconds=fields.pop("durationInSeconds", -1),
        )
        assert not fields, f"not modelled here: {fields}"
        return event.event_id

    def events(self) -> dict[str, dict[str, Any]]:
        return {
            view.event.event_id: {
                "EventId": view.event.event_id,
                "EventStatus": view.event.status.value,
                "approvedBy": sorted(view.approvals),
            }
            for view in self.platform.events()
        }

    def cancel(self, event_id: str) -> None:
        self.platform.cancel(event_id)

    def advance(self, seconds: float) -> None:
        self.platform.advance(seconds)

    def clock(self) -> str:
        return self.platform.now.isoformat()

    def stop(self) -> int:
        self.platform.close()
        return 0


@pytest.fixture(scope="module")
def in_process_pair() -> Iterator[InProcessServer]:
    fleet = pair_fleet(*PAIR_HOSTS, OUTSIDER_HOST)
    with ForewarnPlatform(fleet=fleet, rate_limit=1000, seed=2022) as platform:
        yield InProcessServer(platform)


@pytest.fixture
def pair(in_process_pair: InProcessServer) -> InProcessServer:
    """The shared server, healthy and with empty documents, as the e2e tier's ``pair``."""
    in_process_pair.process.assert_healthy()
    in_process_pair.clear()
    return in_process_pair


target = hostile.target

_HOSTILE = [name for name in dir(hostile) if name.startswith("test_")]
#: Cases that need a server process of their own (its rate limit, its command line).
_PROCESS_ONLY = {"test_rate_limit_answers_429_per_vm"}
_PROTOCOL = [
    name for name in dir(protocol) if name.startswith("test_") and name not in _PROCESS_ONLY
]
for _name in _HOSTILE:
    globals()[_name] = getattr(hostile, _name)
for _name in _PROTOCOL:
    globals()[_name] = getattr(protocol, _name)
# Already in this process (they start the socket server themselves), and quick.
test_an_exception_in_the_endpoint_is_a_logged_500 = (
    internal_error.test_an_exception_in_the_endpoint_is_a_logged_500
)
test_a_trickling_request_is_closed_and_others_still_answered = (
    slow_request.test_a_trickling_request_is_closed_and_others_still_answered
)


# -- faults on the wire (docs/faults.md), against the same in-process socket server ----------

RAW_GET = (
    b"GET /metadata/scheduledevents?api-version=2020-07-01 HTTP/1.1\r\n"
    b"Host: 169.254.169.254\r\nMetadata: true\r\n\r\n"
)


RAW_GET_CLOSE = RAW_GET.replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n")


def _get(pair: InProcessServer, **options: Any) -> Exchange:
    """One GET on a connection of its own, as WestNO_0."""
    return exchange(pair.host, pair.port, RAW_GET_CLOSE, **options)


@pytest.fixture
def faulty(pair: InProcessServer) -> Iterator[InProcessServer]:
    yield pair
    pair.platform.clear_faults()


@pytest.mark.parametrize(
    ("kind", "status", "message"),
    [("gone", 410, "Resource Gone"), ("error", 500, "Internal Server Error"),
     ("throttle", 429, "Too many requests"),
     ("unavailable", 503, "Internal service unavailable. Retry later")],
)  # fmt: skip
def test_an_error_fault_is_an_imds_answer_and_keeps_the_connection(
    faulty: InProcessServer, kind: str, status: int, message: str
) -> None:
    """learn.microsoft.com/azure/virtual-machines/instance-metadata-service, "Errors and debugging":
    410, 500 and 429 with IMDS's bodies; a kept-alive connection goes on to the real answer."""
    faulty.platform.fault(kind, count=1)
    both = exchange(
        faulty.host,
        faulty.port,
        RAW_GET + RAW_GET_CLOSE,
    )
    first, second = parse_responses(both.data)
    assert (first.status, first.json()) == (status, {"error": message})
    assert "IMDS" in (first.header("Server") or "")
    assert second.status == 200
    faulty.platform.fault(kind, count=1)
    closed = _get(faulty)
    assert closed.closed
    assert [r.status for r in parse_responses(closed.data)] == [status]


def test_a_reset_fault_resets_at_once(faulty: InProcessServer) -> None:
    faulty.platform.fault("reset", count=1)
    reply = _get(faulty)
    assert (reply.reset, reply.data) == (True, b"")
    assert parse_responses(_get(faulty).data)[0].status == 200


def test_a_truncated_answer_announces_its_whole_length_and_stops_short(
    faulty: InProcessServer,
) -> None:
    whole = _get(faulty).data
    faulty.platform.fault("truncate", count=1)
    assert_cut_short(whole, _get(faulty))


def test_a_truncated_error_cuts_its_head(faulty: InProcessServer) -> None:
    """An answer with no body (a 304) is cut in its head: the client never sees its end."""
    first = parse_responses(_get(faulty).data)[0]
    tag = first.header("ETag")
    assert tag is not None
    faulty.platform.fault("truncate", count=1)
    request = RAW_GET.replace(
        b"\r\n\r\n", b"\r\nIf-None-Match: " + tag.encode() + b"\r\nConnection: close\r\n\r\n"
    )
    cut = exchange(faulty.host, faulty.port, request)
    assert cut.closed
    assert cut.data.startswith(b"HTTP/1.1 304")
    assert b"\r\n\r\n" not in cut.data


def test_a_timeout_fault_is_silence_until_its_delay_then_a_close(faulty: InProcessServer) -> None:
    faulty.platform.fault("timeout", count=1, delay=60)  # silent all through the read
    quiet = _get(faulty, read_timeout=0.2)
    assert (quiet.data, quiet.closed) == (b"", False)
    faulty.platform.fault("timeout", count=1, delay=0.3)
    ended = _get(faulty, read_timeout=30.0)  # a bound on the wait: it ends with the close
    assert (ended.data, ended.closed) == (b"", True)
    assert ended.seconds >= 0.3  # not before the delay


def test_a_latency_fault_delays_the_real_answer_and_what_is_pipelined_behind(
    faulty: InProcessServer,
) -> None:
    faulty.platform.fault("latency", count=1, delay=0.3)
    both = exchange(
        faulty.host,
        faulty.port,
        RAW_GET + RAW_GET_CLOSE,
        read_timeout=3.0,
    )
    assert [r.status for r in parse_responses(both.data)] == [200, 200]
    assert both.seconds >= 0.3

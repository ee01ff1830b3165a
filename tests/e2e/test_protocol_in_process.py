"""The socket protocol's rules, against the endpoint's server running in this process.

``test_e2e_hostile_input.py`` and most of ``test_e2e_http_protocol.py`` run against ``forewarn
serve`` in a process of its own. Here the same test functions run against the same socket
server (``server/http.py``) started by ``forewarn.testing`` in a thread of this process, with
the platform driven directly instead of through the control API. Nothing is weakened: every
case keeps its assertions. What it adds is that a change to ``server/http.py`` is seen by
tools that only watch this process, mutation testing first (docs/contributing.md).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pytest
import test_e2e_hostile_input as hostile
import test_e2e_http_protocol as protocol
from e2e_support import OUTSIDER_HOST, PAIR_HOSTS, ForewarnServer, pair_fleet

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

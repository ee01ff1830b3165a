"""Traces for tests: the shipped example, traces written by hand, a replay served on a real
socket, and the documents a scenario shows a VM step by step."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime, parsedate_to_datetime
from pathlib import Path
from typing import Any

import httpx

from forewarn.domain.api_versions import CURRENT_VERSION
from forewarn.scenario import Scenario, parse_scenario
from forewarn.server.trace_replay import ReplayEndpoint, ReplaySettings, load_replay
from forewarn.testing import ForewarnPlatform
from forewarn.testing._server import ServerThread
from forewarn.trace.format import (
    DocumentRecord,
    Trace,
    approval_line,
    document_line,
    parse_trace,
    start_line,
)
from forewarn.wire.documents import document_fields

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "traces" / "live-migration.trace"


def trace_bytes(
    vm: str,
    documents: Sequence[tuple[datetime, int, list[dict[str, Any]]]],
    approvals: Sequence[tuple[datetime, tuple[str, ...]]] = (),
) -> bytes:
    """A trace of ``vm`` showing each (time, DocumentIncarnation, events) in turn."""
    lines = [
        (
            documents[0][0],
            start_line(
                documents[0][0],
                endpoint="http://169.254.169.254",
                api_version="2020-07-01",
                recorder="tests",
                approve_after=None,
                max_bytes=None,
                compute={"name": vm},
            ),
        )
    ]
    for at, incarnation, events in documents:
        body = json.dumps({"DocumentIncarnation": incarnation, "Events": events})
        headers = {"ETag": f'"{incarnation}"', "Date": format_datetime(at, usegmt=True)}
        lines.append((at, document_line(at, 200, headers, body)))
    for at, ids in approvals:
        lines.append((at, approval_line(at, ids, 200)))
    lines.sort(key=lambda item: item[0])
    return b"".join(line for _, line in lines)


def event(status: str, not_before: str, **fields: Any) -> dict[str, Any]:
    """A user Reboot of vm0 as the documents show it, with ``fields`` replaced."""
    shown = {
        "EventId": "5A1C6A9E-0A55-4D6B-9A8E-6B4B8C3B8E01",
        "EventStatus": status,
        "EventType": "Reboot",
        "ResourceType": "VirtualMachine",
        "Resources": ["vm0"],
        "NotBefore": not_before,
        "Description": "Virtual machine is going to be restarted as requested by authorized user.",
        "EventSource": "User",
        "DurationInSeconds": -1,
    }
    shown.update(fields)
    return shown


def without_ids(document: DocumentRecord | dict[str, Any]) -> tuple[int, list[dict[str, Any]]]:
    """A document's incarnation and events, EventIds aside."""
    if isinstance(document, DocumentRecord):
        incarnation, events = document.incarnation, list(document.events)
    else:
        incarnation, events = document["DocumentIncarnation"], document["Events"]
    return incarnation, [{k: v for k, v in e.items() if k != "EventId"} for e in events]


@dataclass
class Replayed:
    endpoint: ReplayEndpoint
    server: ServerThread

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.port}/metadata/scheduledevents"

    def get(self, api_version: str = "2020-07-01", **headers: str) -> httpx.Response:
        return httpx.get(
            self.url,
            params={"api-version": api_version},
            headers={"Metadata": "true", **headers},
            trust_env=False,
        )

    def move_to(self, moment: datetime) -> None:
        self.server.call(lambda: self.endpoint.service.set_clock(moment))

    def advance(self, delta: timedelta) -> None:
        self.server.call(lambda: self.endpoint.service.advance_clock(delta))


@contextmanager
def replayed(path: Path, trace: Trace | None = None) -> Iterator[Replayed]:
    """``path`` replayed on a manual clock, on a real socket in this process."""
    loaded = trace or parse_trace(path.read_bytes(), str(path))
    endpoint = load_replay(ReplaySettings(path, manual=True, rate_limit=1000), loaded)
    server = ServerThread(endpoint, ["127.0.0.1"])
    server.start()
    try:
        yield Replayed(endpoint, server)
    finally:
        server.stop()


def documents_shown(
    platform: ForewarnPlatform, scenario: Scenario, vm: str
) -> list[tuple[datetime, int, list[dict[str, Any]]]]:
    """Run ``scenario`` on ``platform``, reading ``vm``'s document after every step; each
    distinct one with the platform time it was first read at (EventIds aside)."""
    seen: list[tuple[datetime, int, list[dict[str, Any]]]] = []

    def read(*_: object) -> None:
        if vm not in platform.vm_names:
            return
        fields = document_fields(platform.document(vm), CURRENT_VERSION)
        incarnation, events = without_ids(fields)
        if not seen or seen[-1][1:] != (incarnation, events):
            seen.append((platform.now, incarnation, events))

    result = platform.run_scenario(scenario, on_step=read)
    assert result.passed, result.failure and result.failure.render("scenario", 0)
    return seen


def scenario_of(text: str) -> Scenario:
    return parse_scenario(text, "from-trace.yaml")


def date_of(document: DocumentRecord) -> datetime:
    """The platform time a document was answered at: its Date header."""
    date = document.header("Date")
    assert date is not None
    return parsedate_to_datetime(date).astimezone(UTC)

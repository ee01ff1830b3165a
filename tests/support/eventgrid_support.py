"""Receivers as real processes (receiver.py, built on azure-eventgrid and cloudevents), and a
``forewarn serve`` on a manual clock whose VMs publish their events."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from e2e_support import clean_environment, free_port, json_lines, wait_for

RECEIVER = Path(__file__).with_name("receiver.py")


@dataclass
class Receiver:
    process: subprocess.Popen[bytes]
    port: int
    log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api/events"

    def entries(self) -> list[dict[str, Any]]:
        return json_lines(self.log)

    def events(self) -> list[dict[str, Any]]:
        return [entry for entry in self.entries() if "id" in entry]

    def statuses(self, event_id: str) -> list[str]:
        return [e["status"] for e in self.events() if e["eventId"] == event_id]


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


@contextmanager
def receiver(workdir: Path, schema: str, *flags: str, name: str = "r") -> Iterator[Receiver]:
    port = free_port(["127.0.0.1"])
    log = workdir / f"{name}-{port}.jsonl"
    process = subprocess.Popen(
        [sys.executable, str(RECEIVER), str(port), schema, str(log), *flags],
        env=clean_environment(),
        stdin=subprocess.DEVNULL,
    )
    try:
        wait_for(lambda: _listening(port), what=f"the {schema} receiver")
        yield Receiver(process, port, log)
    finally:
        process.terminate()
        process.wait(10)


def subscribe(
    control: httpx.Client, name: str, endpoint: str, schema: str = "eventgrid"
) -> dict[str, Any]:
    answer = control.post(
        "/eventgrid/subscriptions",
        json={"name": name, "endpoint": endpoint, "schema": schema},
        timeout=40,
    )
    assert answer.status_code == 201, answer.text
    subscription: dict[str, Any] = answer.json()
    return subscription


def subscription(control: httpx.Client, name: str) -> dict[str, Any]:
    listed: list[dict[str, Any]] = control.get("/eventgrid/subscriptions").json()["subscriptions"]
    (found,) = [s for s in listed if s["name"] == name]
    return found

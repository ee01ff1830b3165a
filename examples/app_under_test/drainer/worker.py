"""The worker: poll Scheduled Events with plain ``requests``, as the documented sample does.

What it does with a document, following the documentation's advice (Microsoft Learn,
"Scheduled Events for Windows VMs", "Use the API" and "Python Sample"):

- every event in a document is handled together, once per DocumentIncarnation;
- an event that names this VM in ``Resources`` and would take it down (Reboot, Redeploy,
  Preempt, Terminate, or a Freeze of unknown or 9 seconds or more) makes the worker *drain*:
  stop taking new work, then approve the event so the platform need not wait for NotBefore;
- a short Freeze (0 to 8 seconds) is approved at once without draining;
- events for other VMs of the same availability set are seen but left alone;
- when the last event that impacted this VM has left the document, the worker recovers.

While the VM is rebooting or frozen its endpoint does not answer; the worker counts that and
keeps polling.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import Any

import requests

AZURE_ENDPOINT = "http://169.254.169.254"
API_VERSION = "2020-07-01"
HEADERS = {"Metadata": "true"}
#: Freezes shorter than this are approved without draining, as in the documented sample.
HARMLESS_FREEZE_SECONDS = 9


@dataclass
class Worker:
    """The scheduled-events side of a service running on the VM ``vm_name``."""

    vm_name: str
    endpoint: str = AZURE_ENDPOINT
    timeout: float = 2.0
    session: requests.Session = field(default_factory=requests.Session)
    draining: bool = False
    incarnation: int | None = None
    unanswered: int = 0
    known: dict[str, dict[str, Any]] = field(default_factory=dict)
    journal: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        return self.endpoint.rstrip("/") + "/metadata/scheduledevents"

    def poll_once(self) -> bool:
        """Read the document once and act on it; False when the endpoint did not answer."""
        try:
            response = self.session.get(
                self.url, headers=HEADERS, params={"api-version": API_VERSION}, timeout=self.timeout
            )
        except requests.RequestException:
            self.unanswered += 1
            return False
        if response.status_code != 200:
            self.unanswered += 1
            return False
        document = response.json()
        if document["DocumentIncarnation"] != self.incarnation:
            self.incarnation = document["DocumentIncarnation"]
            self._handle(document["Events"])
        return True

    def _handle(self, events: list[dict[str, Any]]) -> None:
        current = {event["EventId"]: event for event in events}
        to_approve: list[str] = []
        for event_id, event in current.items():
            if event_id in self.known:
                continue
            self.known[event_id] = event
            if self.vm_name not in event["Resources"]:
                self.journal.append(f"seen {event['EventType']} for {event['Resources']}")
                continue
            if event["EventStatus"] == "Started":
                self.journal.append(f"{event['EventType']} already started")
                self._drain()
            elif _harmless(event):
                self.journal.append(f"short {event['EventType']}: approving")
                to_approve.append(event_id)
            else:
                self._drain()
                to_approve.append(event_id)
        for event_id in [known for known in self.known if known not in current]:
            self.journal.append(f"{self.known.pop(event_id)['EventType']} is over")
        if self.draining and not any(self.vm_name in e["Resources"] for e in self.known.values()):
            self.draining = False
            self.journal.append("recovered")
        if to_approve:
            self._approve(to_approve)

    def _drain(self) -> None:
        if not self.draining:
            self.draining = True
            self.journal.append("drained")

    def _approve(self, event_ids: list[str]) -> None:
        payload = json.dumps({"StartRequests": [{"EventId": e} for e in event_ids]})
        try:
            response = self.session.post(
                self.url,
                headers=HEADERS,
                params={"api-version": API_VERSION},
                data=payload,
                timeout=self.timeout,
            )
        except requests.RequestException:
            self.journal.append("approval not delivered")
            return
        self.journal.append(f"approved {', '.join(event_ids)}: {response.status_code}")

    def run(self, stop: threading.Event, interval: float = 1.0) -> None:
        """Poll every ``interval`` seconds until ``stop`` is set (once a second is advised)."""
        while not stop.is_set():
            self.poll_once()
            stop.wait(interval)

    def close(self) -> None:
        self.session.close()


def _harmless(event: dict[str, Any]) -> bool:
    duration = event.get("DurationInSeconds", -1)
    return bool(event["EventType"] == "Freeze" and 0 <= duration < HARMLESS_FREEZE_SECONDS)

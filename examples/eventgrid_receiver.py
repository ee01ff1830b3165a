"""A webhook for forewarn's (or Azure's) Event Grid system topic of scheduled events.

``python examples/eventgrid_receiver.py [PORT] [--cloudevents]`` listens on 127.0.0.1:PORT
(default 8080), answers the validation handshake and prints one line per scheduled event it is
delivered, parsed with the official SDK: ``azure-eventgrid``'s ``EventGridEvent`` for the Event
Grid schema, ``cloudevents`` for CloudEvents 1.0. Events may arrive twice ("Double
notifications"): the Event Grid ``id`` tells them apart, so it remembers the ids it handled.
"""

from __future__ import annotations

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from azure.eventgrid import EventGridEvent
from cloudevents.core.bindings.http import HTTPMessage, from_http_event

VALIDATION = "Microsoft.EventGrid.SubscriptionValidationEvent"
seen: set[str] = set()


def handle(event_id: str, data: dict[str, Any]) -> None:
    if event_id in seen:  # a double notification: identical, safe to ignore
        return
    seen.add(event_id)
    properties = data["resourceInfo"]["properties"]
    print(
        properties["EventStatus"],
        properties["EventType"],
        properties["EventId"],
        ",".join(properties["Resources"]),
        flush=True,
    )


class Webhook(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def reply(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        """Anything but a delivery: says the receiver is up (scripts wait for it so)."""
        self.reply(200, b"Event Grid receiver\n", {"Content-Type": "text/plain"})

    def do_OPTIONS(self) -> None:
        """CloudEvents abuse protection: allow the origin that asks."""
        origin = self.headers.get("WebHook-Request-Origin", "")
        self.reply(200, headers={"WebHook-Allowed-Origin": origin})

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if self.headers.get("Content-Type", "").startswith("application/cloudevents+json"):
            headers = {name.lower(): value for name, value in self.headers.items()}
            event = from_http_event(HTTPMessage(headers, body))
            data = event.get_data()
            assert isinstance(data, dict)
            handle(event.get_id(), data)
            self.reply(200)
            return
        for item in json.loads(body):
            grid_event = EventGridEvent.from_dict(item)
            if grid_event.event_type == VALIDATION:  # the handshake: echo the code
                answer = {"validationResponse": grid_event.data["validationCode"]}
                self.reply(200, json.dumps(answer).encode(), {"Content-Type": "application/json"})
                return
            handle(grid_event.id, grid_event.data)
        self.reply(200)


if __name__ == "__main__":
    port = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else 8080
    ThreadingHTTPServer(("127.0.0.1", port), Webhook).serve_forever()

"""An Event Grid webhook receiver built on the official SDKs, run as a process of its own.

``python receiver.py PORT SCHEMA LOG [--fail N] [--status S] [--hang] [--huge] [--manual]``:
answers Event Grid's validation handshake (the Event Grid schema's SubscriptionValidationEvent,
parsed with ``azure.eventgrid.EventGridEvent``, or the CloudEvents abuse-protection OPTIONS
exchange) and parses every delivery with ``azure-eventgrid`` or ``cloudevents``, writing one
JSON line per event to LOG. ``--fail N`` answers 500 to the first N deliveries, ``--status S``
answers S to all, ``--hang`` never answers, ``--huge`` answers 500 with 20 MB, ``--manual``
does not echo the code (its validation URL, logged, is for the test to GET).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any

from azure.eventgrid import EventGridEvent
from cloudevents.core.bindings.http import HTTPMessage, from_http_event


def _example() -> Any:
    """examples/eventgrid_receiver.py, the receiver the documentation shows."""
    path = Path(__file__).resolve().parents[2] / "examples" / "eventgrid_receiver.py"
    spec = importlib.util.spec_from_file_location("eventgrid_receiver", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _Replying(BaseHTTPRequestHandler):
    """The example's handler as the type checker sees it: ``reply`` is the example's."""

    def reply(
        self, status: int, body: bytes = b"", headers: dict[str, str] | None = None
    ) -> None: ...


if TYPE_CHECKING:
    Webhook = _Replying
else:
    Webhook = _example().Webhook


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("port", type=int)
    parser.add_argument("schema", choices=["eventgrid", "cloudevents"])
    parser.add_argument("log")
    parser.add_argument("--fail", type=int, default=0)
    parser.add_argument("--status", type=int, default=200)
    parser.add_argument("--hang", action="store_true")
    parser.add_argument("--huge", action="store_true")
    parser.add_argument("--manual", action="store_true")
    options = parser.parse_args()
    lock = threading.Lock()
    failures = [options.fail]

    def record(entry: dict[str, Any]) -> None:
        with lock, open(options.log, "a", encoding="utf-8") as log:
            log.write(json.dumps(entry) + "\n")

    class Handler(Webhook):  # the example's, for its way of replying
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_OPTIONS(self) -> None:  # noqa: N802 (http.server names it); CloudEvents
            origin = self.headers.get("WebHook-Request-Origin", "")
            record({"handshake": "options", "origin": origin})
            self.reply(200, headers={"WebHook-Allowed-Origin": origin, "Allow": "POST"})

        def do_POST(self) -> None:  # noqa: N802 (http.server names it)
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            if self.headers.get("aeg-event-type") == "SubscriptionValidation":
                (event,) = [EventGridEvent.from_dict(item) for item in json.loads(body)]
                record(
                    {
                        "handshake": event.event_type,
                        "url": event.data["validationUrl"],
                        "code": event.data["validationCode"],
                        "topic": event.topic,
                    }
                )
                if options.manual:
                    self.reply(200, b"{}")
                    return
                reply = json.dumps({"validationResponse": event.data["validationCode"]})
                self.reply(200, reply.encode(), {"Content-Type": "application/json"})
                return
            # the time as it came on the wire (an SDK may fill in one that is missing)
            document = json.loads(body)
            wire_times = (
                [item.get("eventTime") for item in document]
                if isinstance(document, list)
                else [document.get("time")]
            )
            if options.schema == "eventgrid":
                events = [EventGridEvent.from_dict(item) for item in json.loads(body)]
                parsed: list[tuple[Any, ...]] = [
                    (
                        e.id,
                        e.event_type,
                        e.subject,
                        e.event_time.isoformat(),
                        e.data,
                        e.data_version,
                    )
                    for e in events
                ]
            else:
                headers = {name.lower(): value for name, value in self.headers.items()}
                cloud = from_http_event(HTTPMessage(headers, body))
                data: Any = cloud.get_data()
                assert isinstance(data, dict)
                moment: Any = cloud.get_time()
                parsed = [
                    (
                        cloud.get_id(),
                        cloud.get_type(),
                        cloud.get_subject(),
                        moment.isoformat(),
                        data,
                        cloud.get_specversion(),
                    )
                ]
            with lock:
                failing = failures[0] > 0
                failures[0] -= 1
            status = 500 if failing else options.status
            for (id_, type_, subject, at, content, version), wire_time in zip(
                parsed, wire_times, strict=True
            ):
                properties = content["resourceInfo"]["properties"]
                record(
                    {
                        "id": id_,
                        "type": type_,
                        "subject": subject,
                        "time": at,
                        "wireTime": wire_time,
                        "version": version,
                        "status": properties["EventStatus"],
                        "notBefore": properties["NotBefore"],
                        "eventId": properties["EventId"],
                        "resources": properties["Resources"],
                        "apiVersion": content["apiVersion"],
                        "attempt": self.headers.get("aeg-delivery-count"),
                        "answered": status,
                        "contentType": self.headers.get("Content-Type"),
                    }
                )
            if options.hang:
                time.sleep(3600)
            if options.huge:
                self.reply(500, b"x" * (20 * 1024 * 1024))
                return
            self.reply(status)

    ThreadingHTTPServer.request_queue_size = 128  # every concurrent delivery is let in
    server = ThreadingHTTPServer(("127.0.0.1", options.port), Handler)
    server.daemon_threads = True
    server.serve_forever()


if __name__ == "__main__":
    main()

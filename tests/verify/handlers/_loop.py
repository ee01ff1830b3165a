"""A small Scheduled Events handler, standard library only, with one defect switched on.

The documented loop (learn.microsoft.com/azure/virtual-machines/windows/scheduled-events,
"Polling frequency", "Start an event"): poll once a second with ``Metadata: true``, find its
own name in the instance metadata, approve the events naming it, once each, and retry
whatever fails. Each ``DEFECTS`` entry breaks exactly one of those habits, so a test can show
that `forewarn verify` fails exactly the trial that catches it.
"""

from __future__ import annotations

import http.client
import json
import os
import sys
import time
import urllib.error
import urllib.request

DEFECTS = ("approves-others", "dies-on-500", "no-timeout")
API = "api-version=2020-07-01"


def main(defect: str | None = None, base: str | None = None) -> None:
    """Poll for ever; ``base`` hard-codes the endpoint (else ``FOREWARN_IMDS_ENDPOINT``)."""
    base = (base or os.environ["FOREWARN_IMDS_ENDPOINT"]).rstrip("/")
    timeout = None if defect == "no-timeout" else 3.0
    headers = {"Metadata": "true"}

    def call(path: str, body: bytes | None = None) -> bytes:
        request = urllib.request.Request(base + path, data=body, headers=headers)
        if timeout is None:
            with urllib.request.urlopen(request) as answer:
                return bytes(answer.read())
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            return bytes(answer.read())

    name = None
    approved: set[str] = set()
    while True:
        try:
            if name is None:
                instance = json.loads(call("/metadata/instance?api-version=2021-02-01"))
                name = instance["compute"]["name"]
            document = json.loads(call("/metadata/scheduledevents?" + API))
            for event in document["Events"]:
                mine = name in event["Resources"]
                if event["EventId"] in approved or event["EventStatus"] != "Scheduled":
                    continue
                if mine or defect == "approves-others":
                    body = json.dumps({"StartRequests": [{"EventId": event["EventId"]}]})
                    call("/metadata/scheduledevents?" + API, body.encode())
                    approved.add(event["EventId"])
        except urllib.error.HTTPError as error:
            if defect == "dies-on-500" and error.code == 500:
                print(f"giving up: {error}", file=sys.stderr)
                sys.exit(3)
        except (OSError, ValueError, KeyError, http.client.HTTPException):
            pass  # a reset, a timeout, a cut body: try again next second
        time.sleep(1.0)

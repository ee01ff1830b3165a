#!/usr/bin/env python3
"""A flawed Scheduled Events handler: it polls once a minute, with no timeout.

    forewarn verify --suite quick -- python examples/handlers/flawed_polls_every_60s.py

good_stdlib.py with one defect (the two lines marked DEFECT): it polls every 60 seconds, where
the documentation recommends once a second because "in some cases advance notice might be as
little as 30 seconds" (learn.microsoft.com/azure/virtual-machines/linux/scheduled-events,
"Polling frequency"); and its requests have no timeout, so a request the platform holds holds
the handler. docs/verify.md lists the trials it fails. ``EXAMPLE_POLL_SECONDS`` in the
environment sets another interval (tests/verify/test_example_handlers.py runs it faster, with
a notice scaled down alike).
"""

import http.client
import json
import os
import sys
import time
import urllib.error
import urllib.request

ENDPOINT = os.environ.get("FOREWARN_IMDS_ENDPOINT", "http://169.254.169.254").rstrip("/")
if "://" not in ENDPOINT:
    ENDPOINT = "http://" + ENDPOINT
EVENTS_URL = ENDPOINT + "/metadata/scheduledevents?api-version=2020-07-01"
NAME_URL = ENDPOINT + "/metadata/instance/compute/name?api-version=2021-02-01&format=text"
POLL_SECONDS = float(os.environ.get("EXAMPLE_POLL_SECONDS", 60))  # DEFECT: once a minute.
TIMEOUT_SECONDS = None  # DEFECT: no timeout: a held request holds it.
#: What a failed request raises (refused, reset, timed out, cut short, an error status) and
#: what a body that is not a Scheduled Events document does.
FAILURES = (OSError, http.client.HTTPException, ValueError, LookupError, TypeError)


def log(message):
    print(time.strftime("%H:%M:%S"), message, flush=True)


def call(url, body=None, etag=None):
    """One request: (status, ETag, body). Error statuses raise urllib.error.HTTPError."""
    headers = {"Metadata": "true"}
    if etag:
        headers["If-None-Match"] = etag
    if body is not None:
        headers["Content-Type"] = "application/json"
    request = urllib.request.Request(url, data=body, headers=headers)
    with urllib.request.urlopen(request, timeout=TIMEOUT_SECONDS) as response:
        return response.status, response.headers.get("ETag"), response.read()


def vm_name():
    """This VM's name, as Resources lists it (instance metadata, compute/name)."""
    while True:
        try:
            return call(NAME_URL)[2].decode().strip()
        except FAILURES as error:
            log(f"instance metadata: {error!r}; again in {POLL_SECONDS} s")
            time.sleep(POLL_SECONDS)


def drain(event):
    """Where the application gets ready: stop taking work, checkpoint, leave the pool."""
    log(f"draining for {event['EventType']} {event['EventId']}")


def approve(event_id):
    """Tell the platform it may start the event now. True when the answer is final."""
    body = json.dumps({"StartRequests": [{"EventId": event_id}]}).encode()
    try:
        status = call(EVENTS_URL, body)[0]
        log(f"approved {event_id}: {status}")
        return True
    except FAILURES as error:
        log(f"approval of {event_id}: {error!r}")
        # A 4xx other than 429 will not change by asking again (the event is gone, or not
        # this VM's to approve); anything else is worth another try at the next poll.
        code = getattr(error, "code", 0)
        return 400 <= code < 500 and code != 429


def handle(document, me, done):
    for event in document["Events"]:
        if event["EventStatus"] != "Scheduled" or event["EventId"] in done:
            continue
        if me not in event["Resources"]:
            continue
        drain(event)
        if approve(event["EventId"]):
            done.add(event["EventId"])


def main():
    me = vm_name()
    log(f"handling Scheduled Events for {me} at {EVENTS_URL}")
    done, etag, document = set(), None, None
    while True:
        try:
            try:
                _, tag, body = call(EVENTS_URL, etag=etag)
                document, etag = json.loads(body), tag
            except urllib.error.HTTPError as error:
                if error.code != 304 or document is None:  # 304: unchanged since that ETag
                    raise
            handle(document, me, done)
        except FAILURES as error:
            log(f"poll: {error!r}")
        time.sleep(POLL_SECONDS)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit(0)

#!/usr/bin/env python3
"""A Scheduled Events handler in plain Python (standard library only) that does it right.

    forewarn verify --suite quick -- python examples/handlers/good_stdlib.py

What the documentation asks of a handler (learn.microsoft.com/azure/virtual-machines/linux/
scheduled-events, "Polling frequency", "Start an event", "Query for events"), and what its
Python sample leaves out:

- poll once a second, with a timeout on every request, and keep going whatever an answer is
  (an error status, a cut body, a reset, a request held for minutes);
- send ``Metadata: true`` and a supported api-version; ``If-None-Match`` with the last ETag;
- approve only events whose ``Resources`` name this VM, once each, while they are Scheduled,
  after draining (``drain`` below is where an application would do its part).

The flawed handlers beside it are this file with one thing changed (each says which, on a line
marked ``DEFECT``); ``forewarn verify`` grades them, and docs/verify.md lists what each gets.
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
POLL_SECONDS = 1
TIMEOUT_SECONDS = 10
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

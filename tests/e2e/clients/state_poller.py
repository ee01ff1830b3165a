"""A VM's poller that only watches: once a second it reads the document (a call made during an
impact simply completes late) and prints the statuses of its events as one JSON line, until
the file named by its second argument exists.

Usage: state_poller.py BASE_URL STOP_FILE
"""

import json
import sys
import time
from pathlib import Path

import requests

url = sys.argv[1] + "/metadata/scheduledevents"
stop = Path(sys.argv[2])
while not stop.exists():
    began = time.monotonic()
    payload = requests.get(
        url, headers={"Metadata": "true"}, params={"api-version": "2020-07-01"}, timeout=30
    ).json()
    statuses = [event["EventStatus"] for event in payload["Events"]]
    print(json.dumps({"statuses": statuses, "waited": time.monotonic() - began}), flush=True)
    time.sleep(1)

"""A client written the way the documentation shows: poll once a second, approve what is
Scheduled, no error handling at all
(learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Python Sample").

It leaves once its eviction is announced, as a handler shuts its workload down.
Each document it reads is printed as one JSON line, with how long the request took; each
approval it sends, as a line of its own with how long that took (a call made during the impact
is held, whichever it is).
"""

import json
import sys
import time

import requests

url = sys.argv[1] + "/metadata/scheduledevents"
header = {"Metadata": "true"}
query_params = {"api-version": "2020-07-01"}
last = None
while True:
    began = time.monotonic()
    payload = requests.get(url, headers=header, params=query_params).json()
    waited = time.monotonic() - began
    events = [[e["EventType"], e["EventStatus"]] for e in payload["Events"]]
    line = {"incarnation": payload["DocumentIncarnation"], "waited": waited, "events": events}
    print(json.dumps(line), flush=True)
    if payload["DocumentIncarnation"] != last:
        last = payload["DocumentIncarnation"]
        for event in payload["Events"]:
            if event["EventType"] == "Preempt":
                sys.exit(0)  # drained and gone; the eviction comes at its NotBefore
            if event["EventStatus"] == "Scheduled":
                body = json.dumps({"StartRequests": [{"EventId": event["EventId"]}]})
                began = time.monotonic()
                status = requests.post(url, headers=header, params=query_params, data=body)
                waited = time.monotonic() - began
                assert status.status_code == 200, status.status_code
                print(json.dumps({"approved": event["EventId"], "waited": waited}), flush=True)
    time.sleep(1)

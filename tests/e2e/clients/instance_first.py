"""What a cluster agent or a drainer does on a fresh VM: read its name from instance metadata,
then ask for events. Prints one JSON line: each call's status and how long it took (s)."""

import json
import sys
import time
import urllib.request

base = sys.argv[1]
timings = {}
for name, path in (
    ("instance", "/metadata/instance/compute/name?api-version=2021-02-01&format=text"),
    ("events", "/metadata/scheduledevents?api-version=2020-07-01"),
):
    request = urllib.request.Request(base + path, headers={"Metadata": "true"})
    started = time.monotonic()
    with urllib.request.urlopen(request, timeout=120) as response:  # the documented wait
        body = response.read().decode()
        timings[name] = {"status": response.status, "seconds": time.monotonic() - started}
    timings[name]["body"] = body
print(json.dumps(timings), flush=True)

"""Polls as Microsoft's sample service does (Azure/vm-scheduled-events, node/src/index.ts):
``If-None-Match`` with the last ETag (0 before the first answer), a 200 is a new document, a
304 is "not modified". Stops when the file named by its second argument exists. Prints one
JSON line per answer: status, ETag, incarnation (200 only), and the time; with a third
argument ``--log-asks``, a line before each request too (``asking``), so a test can tell a
call that never completed."""

import json
import os
import sys
import time
import urllib.request

url = sys.argv[1] + "/metadata/scheduledevents?api-version=2020-07-01"
stop_file = sys.argv[2]
log_asks = sys.argv[3:] == ["--log-asks"]
etag = "0"
while not os.path.exists(stop_file):
    if log_asks:
        print(json.dumps({"asking": "GET", "at": time.time()}), flush=True)
    request = urllib.request.Request(url, headers={"Metadata": "true", "If-None-Match": etag})
    try:
        with urllib.request.urlopen(request) as response:
            status, body = response.status, response.read()
            etag = response.headers["ETag"]
    except urllib.error.HTTPError as answer:  # urllib raises on 304
        status, body = answer.code, answer.read()
        if status != 304:
            raise
    incarnation = json.loads(body)["DocumentIncarnation"] if status == 200 else None
    line = {"status": status, "etag": etag, "incarnation": incarnation, "length": len(body)}
    line["at"] = time.time()
    print(json.dumps(line), flush=True)
    time.sleep(1)

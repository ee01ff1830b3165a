"""Runs the documentation's Python sample (its own functions, unchanged but for the address)
round after round, as its ``main()`` does when a user keeps pressing 1, until something stops
the process from outside. Each call it makes is logged as one JSON line before it is sent
(``asking``) and when it is answered (``answered``, with the document's events), so a test
can tell a call that never completed from one that did."""

import importlib.util
import json
import sys
import time
from typing import Any

spec = importlib.util.spec_from_file_location("sample", sys.argv[1])
assert spec is not None
assert spec.loader is not None
sample: Any = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sample)
read, confirm = sample.get_scheduled_events, sample.confirm_scheduled_event


def log(**fields: Any) -> None:
    print(json.dumps({"at": time.time(), **fields}), flush=True)


def reading() -> Any:
    log(asking="GET")
    payload = read()
    events = [[e["EventType"], e["EventStatus"]] for e in payload["Events"]]
    log(answered="GET", incarnation=payload["DocumentIncarnation"], events=events)
    return payload


def confirming(event_id: str) -> Any:
    log(asking="POST")
    status = confirm(event_id)
    log(answered="POST", status=status)
    return status


sample.get_scheduled_events = reading
sample.confirm_scheduled_event = confirming
last = "-1"
while True:
    last = sample.advanced_sample(last)

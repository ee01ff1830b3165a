"""Runs the documentation's Python sample (its own functions, unchanged but for the address)
round after round, as its ``main()`` does when a user presses 1, until the sample has read a
document announcing the VM's eviction."""

import importlib.util
import sys
from typing import Any

spec = importlib.util.spec_from_file_location("sample", sys.argv[1])
assert spec is not None
assert spec.loader is not None
sample: Any = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sample)
read = sample.get_scheduled_events
seen: list[dict[str, Any]] = []


def reading() -> Any:
    payload = read()
    seen.append(payload)
    return payload


sample.get_scheduled_events = reading
last = "-1"
while True:
    last = sample.advanced_sample(last)
    if any(e["EventType"] == "Preempt" for e in seen[-1]["Events"]):
        print("eviction announced: leaving", flush=True)
        break

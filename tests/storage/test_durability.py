"""What survives the process: reopening, and a SIGKILL in the middle of appending.

SPEC 2 [ours: restart]: DocumentIncarnation "never goes backwards, not even across a
service restart", and the service answers only after journaling (``forewarn.service``), so
every acknowledged append must be found, intact and in order, by the next process.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from queue import Empty, Queue

from .append_until_killed import record_for
from .conftest import Store

CHILD = Path(__file__).with_name("append_until_killed.py")
#: Acknowledgements to collect before the kill: enough that the kill lands mid-stream.
ACKS_BEFORE_KILL = 300


def test_records_and_metadata_survive_reopening(durable_store: Store) -> None:
    first = durable_store.open()
    first.set_metadata("seed", "20220411")
    first.append_many([{"n": 1}, {"n": 2}])
    first.close()
    second = durable_store.open()
    assert second.metadata() == {"seed": "20220411"}
    assert second.last_sequence() == 2
    assert second.append({"n": 3}) == 3
    assert list(second.records()) == [(1, {"n": 1}), (2, {"n": 2}), (3, {"n": 3})]


def _read_lines(stream: object, lines: Queue[str | None]) -> None:
    assert hasattr(stream, "readline")
    for line in iter(stream.readline, ""):
        lines.put(line.strip())
    lines.put(None)


def test_every_acknowledged_record_survives_a_kill(durable_store: Store) -> None:
    """The child prints a sequence only after append returned; SIGKILL gives it no chance to
    flush or close anything, so only what was durable at each acknowledgement remains."""
    child = subprocess.Popen(
        [sys.executable, str(CHILD), durable_store.url],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    lines: Queue[str | None] = Queue()
    reader = threading.Thread(target=_read_lines, args=(child.stdout, lines), daemon=True)
    reader.start()
    acknowledged: list[int] = []
    deadline = time.monotonic() + 30
    try:
        while len(acknowledged) < ACKS_BEFORE_KILL and time.monotonic() < deadline:
            try:
                line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except Empty:
                break
            if line is None:
                break
            if line != "ready":
                acknowledged.append(int(line))
        child.send_signal(signal.SIGKILL)
    finally:
        if child.poll() is None:
            child.kill()
        child.wait(timeout=30)
        # Standard output is the reader's alone (communicate() would read it too, closing it
        # under the reader): it ends at the dead child's end of file.
        reader.join(10)
        assert child.stdout is not None
        assert child.stderr is not None
        stderr = child.stderr.read()
        child.stdout.close()
        child.stderr.close()
    while (line := lines.get_nowait() if not lines.empty() else None) is not None:
        acknowledged.append(int(line))
    assert child.returncode == -signal.SIGKILL, f"child ended on its own: {stderr}"
    assert len(acknowledged) >= ACKS_BEFORE_KILL, f"child stalled: {stderr}"
    assert acknowledged == list(range(1, len(acknowledged) + 1))

    journal = durable_store.open()
    stored = list(journal.records())
    # Records committed but not yet acknowledged when the kill came may be there too.
    assert len(stored) >= len(acknowledged)
    assert journal.last_sequence() == len(stored)
    for sequence, record in stored:
        assert record == record_for(sequence), f"record {sequence} is not intact"
    assert [sequence for sequence, _ in stored] == list(range(1, len(stored) + 1))
    # The journal goes on from where the killed process stopped.
    assert journal.append({"after": "crash"}) == len(stored) + 1

"""Resource Graph's query process (``QueryProcess``) never holds ``forewarn serve``'s stop.

Seen under load: a serve that had answered queries did not stop within 5 s of SIGTERM, since
closing the query process waited for it to take its turn (it runs niced, so a busy machine
schedules it last) and for any query it was running. Closing now ends it within a bound,
even a process that is not running at all (stopped here with SIGSTOP, as a starved one is).
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading

from forewarn.resourcegraph.answer import QueryJob
from forewarn.server.azure.resourcegraph import CLOSE_SECONDS, QueryProcess

JOB = QueryJob(
    query="maintenanceresources | count",
    subscriptions=None,
    top=100,
    skip=0,
    skip_token=None,
    result_format="objectArray",
    events=b"[]",
    resources=b"[]",
)


def test_closing_ends_the_query_process_even_one_that_is_not_scheduled() -> None:
    queries = QueryProcess()
    status, _ = asyncio.run(queries(JOB))
    assert status == 200
    (process,) = queries._pool._processes.values()  # type: ignore[union-attr]
    assert process.pid is not None
    os.kill(process.pid, signal.SIGSTOP)  # never scheduled again: shutdown() waited for ever
    closing = threading.Thread(target=queries.close, daemon=True)
    try:
        closing.start()
        closing.join(timeout=2 * CLOSE_SECONDS + 5)  # bounded: a failure is not a hang
        assert not closing.is_alive(), "close() is still waiting for the query process"
        assert not process.is_alive()
    finally:
        if process.is_alive():
            process.kill()

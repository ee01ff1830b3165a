"""Resource Graph's query process (``QueryProcess``) never holds ``forewarn serve``'s stop.

Seen under load: a serve that had answered queries did not stop within 5 s of SIGTERM, since
closing the query process waited for it to take its turn (it runs niced, so a busy machine
schedules it last) and for any query it was running. Closing now ends it within a bound,
even a process that is not running at all (stopped here with SIGSTOP, as a starved one is).
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing.connection
import os
import signal
import threading
from typing import Any

import pytest

from forewarn.resourcegraph.answer import QueryJob, execute
from forewarn.server.azure import resourcegraph
from forewarn.server.azure.resourcegraph import CLOSE_SECONDS, QUERY_NICENESS, QueryProcess

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
        # Killed by close(): it ends once the machine schedules it (a stopped process never
        # ends on SIGTERM alone). Its sentinel, not is_alive(): see _ended.
        ended = multiprocessing.connection.wait([process.sentinel], timeout=30)
        assert ended, "the stopped query process outlived close()"
    finally:
        if not _ended(process):
            process.kill()


def _ended(process: Any) -> bool:
    """Whether ``process`` has exited: its sentinel is ready (multiprocessing's docs,
    ``Process.sentinel``). Not ``is_alive()``: the executor's own thread may be reaping the
    same process, and ``is_alive()`` answers True in between."""
    return bool(multiprocessing.connection.wait([process.sentinel], timeout=0))


def _nice_of(pid: int) -> int:
    return os.getpriority(os.PRIO_PROCESS, pid)


def _ignores_sigint(pid: int) -> bool:
    """Whether the process ignores SIGINT: its ``SigIgn`` mask (proc(5), /proc/PID/status)."""
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        (mask,) = (line.split()[1] for line in status if line.startswith("SigIgn:"))
    return bool(int(mask, 16) >> (signal.SIGINT - 1) & 1)


def test_queries_run_in_one_fresh_process_at_a_lower_priority_deaf_to_ctrl_c() -> None:
    """docs/azure-side.md, "Resource Graph": "Under ``forewarn serve`` queries run in a process
    of their own, at a lower CPU priority, so a heavy one never takes the interpreter that
    answers the VMs". One process (spawned: a fresh interpreter, no copy of the server's
    state), answering as the in-process runner does; Ctrl-C is left to ``forewarn serve``,
    which stops it (QueryProcess's docstring)."""
    queries = QueryProcess()
    try:

        async def two_at_once() -> list[tuple[int, bytes]]:
            return list(await asyncio.gather(queries(JOB), queries(JOB)))

        assert asyncio.run(two_at_once()) == [execute(JOB), execute(JOB)]
        (process,) = queries._pool._processes.values()  # type: ignore[union-attr]
        assert process.pid is not None
        with open(f"/proc/{process.pid}/cmdline", "rb") as cmdline:
            assert b"multiprocessing.spawn" in cmdline.read()  # not a fork of this process
        assert _nice_of(process.pid) == min(19, _nice_of(0) + QUERY_NICENESS)
        assert _nice_of(process.pid) > _nice_of(0) or _nice_of(0) == 19
        assert _ignores_sigint(process.pid)
        assert not _ignores_sigint(os.getpid())  # what the check tells apart
        assert asyncio.run(queries(JOB)) == execute(JOB)
        (again,) = queries._pool._processes.values()  # type: ignore[union-attr]
        assert again is process  # the same process for the next query
    finally:
        queries.close()
    assert _ended(process)


def test_a_query_process_that_dies_is_a_503_and_the_next_query_spawns_another() -> None:
    """QueryProcess's docstring: "a query that kills it is a 503 and the next query spawns
    another"; the refusal in ARM's error envelope, code ``ServiceUnavailable`` as
    docs/azure-side.md names a 503's."""
    queries = QueryProcess()
    try:
        assert asyncio.run(queries(JOB))[0] == 200
        (first,) = queries._pool._processes.values()  # type: ignore[union-attr]
        assert first.pid is not None
        os.kill(first.pid, signal.SIGKILL)
        first.join(timeout=30)  # bounded: a failure is not a hang
        status, body = asyncio.run(queries(JOB))
        assert (status, json.loads(body)) == (
            503,
            {
                "error": {
                    "code": "ServiceUnavailable",
                    "message": "The query process stopped while running the query; retry.",
                }
            },
        )
        assert asyncio.run(queries(JOB)) == execute(JOB)
        (second,) = queries._pool._processes.values()  # type: ignore[union-attr]
        assert second.pid not in (None, first.pid)
    finally:
        queries.close()


def test_closing_a_query_process_never_started_or_closed_already_is_harmless() -> None:
    """``forewarn serve`` closes it on the way out whether or not a query ran."""
    queries = QueryProcess()
    queries.close()
    assert asyncio.run(queries(JOB)) == execute(JOB)
    (process,) = queries._pool._processes.values()  # type: ignore[union-attr]
    queries.close()
    assert _ended(process)
    queries.close()


def test_the_query_process_setup_leaves_ctrl_c_to_serve_and_yields_the_cpu(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What the query process runs first (the test above sees its effect on a real one; this
    one sees the calls, in this process, without changing it): SIGINT ignored, the niceness
    raised by :data:`QUERY_NICENESS` (10: "a lower CPU priority", docs/azure-side.md)."""
    calls: list[tuple[object, ...]] = []
    monkeypatch.setattr(signal, "signal", lambda *args: calls.append(("signal", *args)))
    monkeypatch.setattr(os, "nice", lambda *args: calls.append(("nice", *args)))
    resourcegraph._query_process_setup()
    assert calls == [("signal", signal.SIGINT, signal.SIG_IGN), ("nice", 10)]
    assert QUERY_NICENESS == 10

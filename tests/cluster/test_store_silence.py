"""PostgreSQL falling silent under a real ``forewarn serve --store``, a control write pending.

A server that stops answering without closing anything (a hung host, a network dropping
packets) is not a cut: connections stay open, nothing comes back, and the operating system
reports nothing for minutes. docs/scale-out.md, "A silent PostgreSQL", states the bounds this
test holds the front-end to:

- a write waits for PostgreSQL at most ``WRITE_SECONDS`` (2 s), then is answered ``503``;
- a write answered ``503`` that way is not applied later, when PostgreSQL answers again;
- while it waits (off the event loop), VMs' polls are answered from the state the
  front-end holds, and ``/livez`` says alive; after it, further writes are refused at once
  until PostgreSQL answers again; ``/readyz`` (and ``/healthz``) answer 503 within 3 s (below the
  Kubernetes probes' timeout in deploy/kubernetes/): docs/control.md, "Health".

PostgreSQL goes silent through a TCP proxy (tests/support/tcp_proxy.py, :meth:`TcpProxy.silence`)
which holds what either side sends until it resumes, then delivers it: a ``COMMIT`` held
there would commit then, which is what the second bound rules out.
"""

from __future__ import annotations

import threading
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
from tcp_proxy import TcpProxy

from forewarn.cluster.replica import WRITE_SECONDS

from .front_ends import AUTH, HEADERS, URL, VMS, FrontEnd, namespace_rows

#: What a VM's poll may take while a write waits on a silent PostgreSQL: the write's own
#: bound (a poll waits for a write applied here until its commit is answered), with a
#: second for a busy machine.
POLL_BOUND = WRITE_SECONDS + 1.0
#: /healthz's bound (docs/control.md, "Health").
HEALTH_BOUND = 3.0


def _journaled_ops(store: str) -> list[str]:
    """Every record's operation in the namespace, read from PostgreSQL directly."""
    rows = namespace_rows(
        store,
        "SELECT body->>'op' FROM public.forewarn_records WHERE namespace = %s ORDER BY sequence",
    )
    return [str(op) for (op,) in rows]


def _wait_for(check: object, what: str, proxy: TcpProxy, front_end: FrontEnd) -> None:
    """Wait until ``check()`` holds (each try an HTTP round trip or a look at the proxy)."""
    for _ in range(600):
        if check():  # type: ignore[operator]
            return
        threading.Event().wait(0.05)
    raise AssertionError(f"never {what}; proxy holds {proxy.held()} bytes: {front_end.log()}")


@pytest.mark.e2e
def test_a_silent_postgresql_bounds_a_write_and_holds_up_no_poll_nor_healthz(
    tmp_path: Path, shared_store: str, fleet_file: Path
) -> None:
    parts = urlsplit(shared_store)
    assert parts.hostname is not None
    with TcpProxy((parts.hostname, parts.port or 5432)) as proxy:
        user = f"{parts.username}@" if parts.username else ""
        store = parts._replace(netloc=f"{user}127.0.0.1:{proxy.port}").geturl()
        front_end = FrontEnd(store, fleet_file, ())
        front_end.start()
        try:
            before = front_end.documents()  # every VM on: its polls change nothing now
            control = f"http://127.0.0.1:{front_end.control_port}"
            health = f"{control}/healthz"
            assert httpx.get(health, timeout=HEALTH_BOUND).status_code == 200

            proxy.silence()
            answers: list[httpx.Response] = []
            write = threading.Thread(
                target=lambda: answers.append(front_end.post("/vms/WestNO_0/restart"))
            )
            write.start()
            # the write's first statement is on its way, and held: it waits now
            _wait_for(lambda: proxy.held() > 0, "sent a statement into the silence", proxy,
                      front_end)  # fmt: skip
            for vm, address in VMS.items():
                url = f"http://{address}:{front_end.port}/metadata/scheduledevents"
                poll = httpx.get(
                    f"{url}?api-version=2020-07-01", headers={"Metadata": "true"},
                    timeout=POLL_BOUND,
                )  # fmt: skip
                assert poll.status_code == 200, (vm, poll.text)
                assert poll.content == before[vm]
            alive = httpx.get(f"{control}/livez", timeout=HEALTH_BOUND)
            assert (alive.status_code, alive.json()) == (200, {"status": "alive"})
            write.join(WRITE_SECONDS + 2.0)
            assert not write.is_alive(), "the write was not answered within its bound"
            (answer,) = answers
            assert answer.status_code == 503, answer.text
            assert "nothing was applied" in answer.json()["error"], answer.text
            # ready no more: the store does not answer its check, within the probes' bound
            ready = httpx.get(f"{control}/readyz", timeout=HEALTH_BOUND)
            assert (ready.status_code, ready.json()) == (
                503, {"status": "unready", "reason": "the store does not answer"},
            )  # fmt: skip
            assert httpx.get(health, timeout=HEALTH_BOUND).status_code == 503

            proxy.resume()
            # what was held is delivered (a COMMIT among it would commit now), and the
            # front-end writes again once PostgreSQL answers
            _wait_for(lambda: proxy.held() == 0, "delivered what it held", proxy, front_end)
            _wait_for(
                lambda: front_end.post("/vms/WestNO_1/restart").status_code == 200,
                "wrote again after PostgreSQL resumed", proxy, front_end,
            )  # fmt: skip
            _wait_for(
                lambda: httpx.get(f"{control}/readyz", timeout=HEALTH_BOUND).status_code == 200,
                "ready again", proxy, front_end,
            )  # fmt: skip
            ops = _journaled_ops(shared_store)
            targets = [event["Resources"] for event in front_end.get("/events")["events"]]
            assert targets == [["WestNO_1"]], targets
            assert ops.count("restart") == 1, ops
        finally:
            proxy.resume()
            front_end.stop()


#: Control writes pending at once while PostgreSQL is silent.
PENDING_WRITES = 5
#: Polls of the other VMs made while they are pending.
POLLS = 4


@pytest.mark.e2e
def test_writes_pending_on_a_silent_postgresql_hold_up_no_poll_and_each_is_refused_in_time(
    shared_store: str, fleet_file: Path
) -> None:
    """docs/scale-out.md, "A silent PostgreSQL": the waits of a write happen off the event
    loop, so several writes pending at once hold up no VM's poll; after the first runs out of
    time the others are refused at once (the breaker), each within its own bound, and none of
    them is applied when PostgreSQL answers again."""
    parts = urlsplit(shared_store)
    assert parts.hostname is not None
    with TcpProxy((parts.hostname, parts.port or 5432)) as proxy:
        user = f"{parts.username}@" if parts.username else ""
        store = parts._replace(netloc=f"{user}127.0.0.1:{proxy.port}").geturl()
        front_end = FrontEnd(store, fleet_file, ())
        front_end.start()
        try:
            before = front_end.documents()  # every VM on: its polls change nothing now
            proxy.silence()
            # what was answered, in the order it was: ("write", status, error) or
            # ("poll", vm, status, body)
            answered: list[tuple[object, ...]] = []
            lock = threading.Lock()

            def restart() -> None:
                response = httpx.post(
                    f"{front_end.control}/vms/WestNO_0/restart", headers=AUTH, json={},
                    timeout=WRITE_SECONDS + 2.0,  # its bound, with two seconds for the machine
                )  # fmt: skip
                with lock:
                    answered.append(("write", response.status_code, response.json()["error"]))

            writes = [threading.Thread(target=restart) for _ in range(PENDING_WRITES)]
            for write in writes:
                write.start()
            _wait_for(lambda: proxy.held() > 0, "sent a statement into the silence", proxy,
                      front_end)  # fmt: skip
            others = [vm for vm in VMS if vm != "WestNO_0"]
            for index in range(POLLS):
                vm = others[index % len(others)]
                poll = httpx.get(URL.format(VMS[vm], front_end.port), headers=HEADERS, timeout=10)
                with lock:
                    answered.append(("poll", vm, poll.status_code, poll.content))
            for write in writes:
                write.join(30)  # a guard: httpx's timeout above is the bound
            kinds = [entry[0] for entry in answered]
            # every poll was answered while every write still waited on PostgreSQL
            assert kinds == ["poll"] * POLLS + ["write"] * PENDING_WRITES, answered
            for _, polled, status, body in answered[:POLLS]:
                assert (status, body) == (200, before[str(polled)]), polled
            for _, status, error in answered[POLLS:]:
                assert status == 503, error
                assert "nothing was applied" in str(error), error

            proxy.resume()
            _wait_for(lambda: proxy.held() == 0, "delivered what it held", proxy, front_end)
            _wait_for(
                lambda: front_end.post("/vms/WestNO_1/restart").status_code == 200,
                "wrote again after PostgreSQL resumed", proxy, front_end,
            )  # fmt: skip
            # none of the refused restarts shows, anywhere: only the one made since
            targets = [event["Resources"] for event in front_end.get("/events")["events"]]
            assert targets == [["WestNO_1"]], targets
            assert _journaled_ops(shared_store).count("restart") == 1
        finally:
            proxy.resume()
            front_end.stop()

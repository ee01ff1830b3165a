"""Kill the server with SIGKILL in the middle of a maintenance campaign and start it again.

Issue text (durable state): "no event or approval is lost, no DocumentIncarnation goes
backwards, pending NotBefore times still hold". SPEC 2: DocumentIncarnation "never goes
backwards, not even across a service restart" [ours: restart].
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from e2e_support import ServerProcess, free_port, serve_argv, wait_for

#: The control API's token, which the test run sets (tests/conftest.py).
AUTH = {"Authorization": f"Bearer {os.environ['FOREWARN_TOKEN']}"}

#: Two fault domains on hosts of their own, so a campaign has two steps.
FLEET = """
availabilitySets: [{name: west, faultDomains: 2}]
vms:
  - {name: WestNO_0, address: 127.0.0.2, availabilitySet: west, faultDomain: 0, host: h1}
  - {name: WestNO_1, address: 127.0.0.3, availabilitySet: west, faultDomain: 1, host: h2}
"""
VMS = {"WestNO_0": "127.0.0.2", "WestNO_1": "127.0.0.3"}
URL = "http://{}:{}/metadata/scheduledevents?api-version=2020-07-01"
HEADERS = {"Metadata": "true"}


@contextmanager
def server(data_dir: Path, port: int, control_port: int) -> Iterator[ServerProcess]:
    """``forewarn serve`` on ``data_dir``, at the same ports each time (e2e_support)."""
    argv = serve_argv(
        bind=f"127.0.0.1:{port}",
        control=f"127.0.0.1:{control_port}",
        seed=5,
        fleet=fleet_file(data_dir),
        rate_limit=1000,
        extra=("--data-dir", str(data_dir)),
    )
    logs = len(list(data_dir.glob("serve-*.log")))
    process = ServerProcess(argv, data_dir / f"serve-{logs + 1}.log")
    try:
        wait_for(
            lambda: (
                httpx.get(
                    f"http://127.0.0.1:{control_port}/api/v1/clock", timeout=1, headers=AUTH
                ).status_code
                == 200
            ),
            what="the control API",
            server=process,
        )
        yield process
    finally:
        process.stop()


def fleet_file(data_dir: Path) -> Path:
    path = data_dir.with_name(data_dir.name + "-fleet.yaml")
    path.write_text(FLEET)
    return path


def documents(port: int) -> dict[str, bytes]:
    return {
        name: httpx.get(URL.format(address, port), headers=HEADERS, timeout=5).content
        for name, address in VMS.items()
    }


def incarnation(body: bytes) -> int:
    return int(httpx.Response(200, content=body).json()["DocumentIncarnation"])


@pytest.mark.e2e
def test_sigkill_mid_campaign_loses_nothing(tmp_path: Path) -> None:
    port, control_port = free_port(["127.0.0.1"]), free_port(["127.0.0.1"])
    control = f"http://127.0.0.1:{control_port}/api/v1"
    with server(tmp_path, port, control_port) as process:
        assert (
            httpx.post(f"{control}/campaigns", json={}, timeout=5, headers=AUTH).status_code == 201
        )
        first = documents(port)
        (event,) = httpx.get(URL.format(VMS["WestNO_0"], port), headers=HEADERS).json()["Events"]
        # WestNO_0 approves its own fault domain's event through its endpoint
        approval = httpx.post(
            URL.format(VMS["WestNO_0"], port),
            headers=HEADERS,
            content=f'{{"StartRequests":[{{"EventId":"{event["EventId"]}"}}]}}',
        )
        assert approval.status_code == 200
        httpx.post(f"{control}/clock/advance", json={"seconds": 60}, timeout=5, headers=AUTH)
        before = documents(port)
        events_before = httpx.get(f"{control}/events", headers=AUTH).json()
        clock_before = httpx.get(f"{control}/clock", headers=AUTH).json()["now"]
        os.kill(process.process.pid, signal.SIGKILL)
        process.process.wait(10)

    with server(tmp_path, port, control_port):
        assert httpx.get(f"{control}/clock", headers=AUTH).json()["now"] == clock_before
        assert httpx.get(f"{control}/events", headers=AUTH).json() == events_before
        after = documents(port)
        assert after == before
        for name in VMS:
            assert incarnation(after[name]) >= incarnation(first[name])
        # the campaign goes on: fault domain 0's event ends, then fault domain 1 is scheduled
        httpx.post(f"{control}/clock/advance", json={"seconds": 600}, timeout=5, headers=AUTH)
        later = httpx.get(URL.format(VMS["WestNO_1"], port), headers=HEADERS).json()
        assert incarnation(before["WestNO_1"]) < later["DocumentIncarnation"]
        assert [e["EventStatus"] for e in later["Events"]] == ["Scheduled"]
        assert later["Events"][0]["EventId"] != event["EventId"]

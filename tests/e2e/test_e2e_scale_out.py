"""``examples/scale-out/run.sh`` as a reader runs it: three front-ends, each in a network
namespace of its own answering its VMs at 169.254.169.254:80, one PostgreSQL namespace.

learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Endpoint discovery": "For VNET
enabled VMs, Metadata Service is available from a static nonroutable IP, 169.254.169.254"; "Scope":
events are delivered to "All the VMs in an availability set", whichever front-end answers them; and
learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "Start an event": "Acknowledging
an event allows the event to proceed for all Resources in the event, not just the VM that
acknowledges the event". So an operation through one front-end and an approval through another must
meet. Needs root, iproute2, curl and PostgreSQL (run.sh's own check says when it is absent); skipped
with the reason otherwise. Each run uses namespaces, links, a run directory and a store namespace of
its own, all removed afterwards.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from e2e_support import (
    AZURE_ENDPOINT,
    USER_REBOOT,
    clean_environment,
    run,
    skip_unless_namespaces_work,
)
from machine_support import require_tool, unavailable
from postgres_support import POSTGRES_URL

ROOT = Path(__file__).resolve().parents[2]
RUN_SH = ROOT / "examples" / "scale-out" / "run.sh"
QUERY = "metadata/scheduledevents?api-version=2020-07-01"
INSTANCE = "metadata/instance?api-version=2021-02-01"
#: The fleet file's VMs per front-end (examples/scale-out/fleet.yaml).
VMS = {
    "a": {"web-a1": "10.201.1.11", "web-a2": "10.201.1.12"},
    "b": {"web-b1": "10.201.2.11", "web-b2": "10.201.2.12"},
    "c": {"web-c1": "10.201.3.11", "web-c2": "10.201.3.12"},
}
#: How long a change made through one front-end may take to show on another.
PROPAGATION = 5.0


def _postgres_settings() -> dict[str, str]:
    """run.sh's settings naming the PostgreSQL server the storage tests use."""
    url = urlsplit(POSTGRES_URL)
    return {
        "FOREWARN_SCALE_OUT_PG": f"{url.hostname or '127.0.0.1'}:{url.port or 5432}",
        "FOREWARN_SCALE_OUT_PG_USER": url.username or "postgres",
        "FOREWARN_SCALE_OUT_PG_DATABASE": url.path.lstrip("/") or "test",
    }


def _forget(namespace: str) -> None:
    import psycopg

    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        conn.execute("DELETE FROM public.forewarn_namespaces WHERE namespace = %s", [namespace])


@dataclass(frozen=True)
class Deployment:
    """One run of ``run.sh start``: its settings, and how to talk to its pieces."""

    env: dict[str, str]
    prefix: str
    links: str
    token: str

    def netns(self, front_end: str) -> str:
        return f"{self.prefix}-{front_end}"

    def control(self, front_end: str) -> str:
        """The front-end's control API, on its end of its link to the host."""
        index = "abc".index(front_end)
        return f"http://{self.links}.{4 * index + 2}:16955/api/v1"

    def script(self, command: str) -> Any:
        return run(["bash", str(RUN_SH), command], env=self.env, timeout=120)

    def call(self, front_end: str, method: str, path: str, body: Any = None) -> Any:
        with httpx.Client(trust_env=False, timeout=10) as client:
            response = client.request(
                method,
                self.control(front_end) + path,
                json=body,
                headers={"Authorization": f"Bearer {self.token}"},
            )
        assert response.is_success, (response.status_code, response.text)
        return response.json() if response.content else None

    def as_vm(self, front_end: str, vm: str, path: str, body: Any = None) -> tuple[int, Any]:
        """A request from ``vm`` to 169.254.169.254, inside its front-end's namespace."""
        argv = ["curl", "-sS", "--max-time", "5", "-H", "Metadata:true"]
        argv += ["--interface", VMS[front_end][vm], "-w", "\n%{http_code}"]
        if body is not None:
            argv += ["-X", "POST", "-d", json.dumps(body)]
        done = run(
            ["ip", "netns", "exec", self.netns(front_end), *argv, f"http://{AZURE_ENDPOINT}/{path}"]
        )
        assert done.returncode == 0, done.stderr
        text, _, status = done.stdout.rpartition("\n")
        return int(status), json.loads(text) if text else None


def _eventually(what: str, check: Callable[[], Any]) -> Any:
    """``check()``'s first truthy answer within :data:`PROPAGATION` seconds."""
    deadline = time.monotonic() + PROPAGATION
    while True:
        answer = check()
        if answer:
            return answer
        assert time.monotonic() < deadline, f"{what}: not within {PROPAGATION:g} s"
        time.sleep(0.05)


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    skip_unless_namespaces_work()
    require_tool("curl", "the example's VMs call with it")
    suffix = secrets.token_hex(3)
    store_namespace = f"test_scale_out_{suffix}"
    run_dir = tmp_path_factory.mktemp("scale-out") / "run"
    env = {
        **clean_environment(),
        "FOREWARN": str(Path(sys.executable).parent / "forewarn"),
        "FOREWARN_SCALE_OUT_NAMESPACE": store_namespace,
        "FOREWARN_SCALE_OUT_PREFIX": f"fwt{suffix}",
        "FOREWARN_SCALE_OUT_LINKS": f"10.200.{100 + secrets.randbelow(150)}",
        "FOREWARN_SCALE_OUT_RUN_DIR": str(run_dir),
        **_postgres_settings(),
    }
    env.pop("FOREWARN_TOKEN", None)
    started = run(["bash", str(RUN_SH), "start"], env=env, timeout=120)
    if "no PostgreSQL answers" in started.stderr:  # run.sh checks before it makes anything
        unavailable(started.stderr.strip())
    try:
        assert started.returncode == 0, started.stdout + started.stderr
        yield Deployment(
            env,
            env["FOREWARN_SCALE_OUT_PREFIX"],
            env["FOREWARN_SCALE_OUT_LINKS"],
            (run_dir / "token").read_text(encoding="utf-8").strip(),
        )
    finally:
        for log in sorted(run_dir.glob("*.log")):
            print(f"--- {log.name} ---\n{log.read_text(encoding='utf-8', errors='replace')}")
        stopped = run(["bash", str(RUN_SH), "stop"], env=env, timeout=120)
        _forget(store_namespace)
    assert stopped.returncode == 0, stopped.stderr
    listed = run(["ip", "netns", "list"]).stdout
    assert env["FOREWARN_SCALE_OUT_PREFIX"] not in listed
    assert not run_dir.exists()


@pytest.mark.e2e
@pytest.mark.netns
def test_each_front_end_answers_its_own_vms_at_the_azure_address(
    deployment: Deployment,
) -> None:
    """Each namespace's 169.254.169.254 answers each of its VMs with its own identity
    (instance metadata names the caller) and a Scheduled Events document."""
    for front_end, vms in VMS.items():
        for vm in vms:
            status, instance = deployment.as_vm(front_end, vm, INSTANCE)
            assert (status, instance["compute"]["name"]) == (200, vm)
            status, document = deployment.as_vm(front_end, vm, QUERY)
            assert status == 200
            assert isinstance(document["DocumentIncarnation"], int)
            assert isinstance(document["Events"], list)
    status = deployment.script("status")
    assert status.returncode == 0, status.stdout + status.stderr
    assert status.stdout.count("DocumentIncarnation") == 3, status.stdout


@pytest.mark.e2e
@pytest.mark.netns
def test_an_operation_through_a_meets_an_approval_through_c(deployment: Deployment) -> None:
    """A restart of web-c1 asked of front-end A shows in the next documents of C's VMs (the
    set's events reach every member); web-c2 approves it through C, and A's VMs and control
    API see it Started ("Start an event": NotBefore becomes empty)."""
    (event,) = deployment.call("a", "POST", "/vms/web-c1/restart", {})["events"]
    event_id = event["EventId"]
    assert event["Description"] == USER_REBOOT

    def shown_to(front_end: str, vm: str, status: str) -> bool:
        code, document = deployment.as_vm(front_end, vm, QUERY)
        return code == 200 and any(
            (e["EventId"], e["EventStatus"]) == (event_id, status) for e in document["Events"]
        )

    _eventually("the restart, to web-c2 through C", lambda: shown_to("c", "web-c2", "Scheduled"))
    status, answer = deployment.as_vm(
        "c", "web-c2", QUERY, {"StartRequests": [{"EventId": event_id}]}
    )
    assert (status, answer) == (200, None)
    _eventually("the approval, to web-a1 through A", lambda: shown_to("a", "web-a1", "Started"))
    seen_by_a = deployment.call("a", "GET", f"/events/{event_id}")
    assert (seen_by_a["EventStatus"], seen_by_a["NotBefore"]) == ("Started", "")
    assert seen_by_a["approvedBy"], seen_by_a


@pytest.mark.e2e
def test_start_refuses_in_one_line_without_root() -> None:
    """Without root nothing is made, and the one line says what to do."""
    argv = ["bash", str(RUN_SH), "start"]
    if os.geteuid() == 0:
        setpriv = require_tool("setpriv", "to drop root to another user", package="util-linux")
        argv = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", *argv]
    done = run(argv)
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.splitlines() == [
        "run.sh: needs root for network namespaces: sudo " + str(RUN_SH) + " start"
    ]


@pytest.mark.e2e
def test_start_refuses_in_one_line_without_postgresql(tmp_path: Path) -> None:
    """With nothing listening where PostgreSQL should be, nothing is made."""
    skip_unless_namespaces_work()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        unused = probe.getsockname()[1]  # closed again: nothing listens there
    env = {
        **clean_environment(),
        "FOREWARN_SCALE_OUT_PG": f"127.0.0.1:{unused}",
        "FOREWARN_SCALE_OUT_PREFIX": f"fwt{secrets.token_hex(3)}",
        "FOREWARN_SCALE_OUT_RUN_DIR": str(tmp_path / "run"),
    }
    done = run(["bash", str(RUN_SH), "start"], env=env)
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        f"run.sh: no PostgreSQL answers at 127.0.0.1:{unused} "
        "(start it, or set FOREWARN_SCALE_OUT_PG=HOST:PORT)"
    ]
    assert not (tmp_path / "run").exists()
    assert env["FOREWARN_SCALE_OUT_PREFIX"] not in run(["ip", "netns", "list"]).stdout

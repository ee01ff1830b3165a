"""The documented clients with nothing changed at all: ``forewarn serve`` on 169.254.169.254:80
inside a network namespace of the test's own, and the clients run in it.

learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Endpoint discovery": "For VNET
enabled VMs, Metadata Service is available from a static nonroutable IP, 169.254.169.254"; SPEC 1:
"binding to 169.254.169.254:80 inside a network namespace lets unmodified clients run". The
namespace is private: nothing on the host changes, and it is deleted (with anything still
running in it) however the test ends. Needs root and iproute2; skipped with the reason
otherwise.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from e2e_documented import (
    QUERY_2020,
    START_2020,
    InteractiveProcess,
    curl_argv,
    documented_sample,
    drive_advanced_sample,
    write_sample,
)
from e2e_support import (
    AZURE_ENDPOINT,
    TENANT,
    USER_REBOOT,
    Namespace,
    ServerProcess,
    clean_environment,
    namespace_for_test,
    pair_fleet,
    run,
    serve_argv,
)
from machine_support import require_tool

pytestmark = [pytest.mark.e2e, pytest.mark.netns]

CONTROL = "127.0.0.1:16955"  # the namespace is new, so the default port is free in it
PARTNER = "127.0.0.3"  # WestNO_1, on the namespace's own loopback


@pytest.fixture(scope="module")
def namespace() -> Iterator[Namespace]:
    with namespace_for_test() as created:
        yield created


_WAIT_READY = """
import os, sys, time, urllib.error, urllib.request
deadline = time.monotonic() + 10
auth = {"Authorization": "Bearer " + os.environ["FOREWARN_TOKEN"]}
for url, wanted in ((sys.argv[1], 200), (sys.argv[2], 404)):
    while True:
        try:
            with urllib.request.urlopen(urllib.request.Request(url, headers=auth), timeout=1) as response:
                status = response.status
        except urllib.error.HTTPError as error:
            status = error.code
            error.close()
        except OSError:
            status = 0
        if status == wanted:
            break
        if time.monotonic() > deadline:
            sys.exit(f"{url} did not answer {wanted} within 10 s (last: {status})")
        time.sleep(0.05)
"""

_RELAY = """
import json, os, sys, urllib.error, urllib.request
for line in sys.stdin:
    call = json.loads(line)
    data = None if call["body"] is None else json.dumps(call["body"]).encode()
    request = urllib.request.Request(
        sys.argv[1] + call["path"], data=data, method=call["method"],
        headers={"Content-Type": "application/json",
                 "Authorization": "Bearer " + os.environ["FOREWARN_TOKEN"]},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            status, body = response.status, response.read()
    except urllib.error.HTTPError as error:
        status, body = error.code, error.read()
        error.close()
    print(json.dumps({"status": status, "body": body.decode()}), flush=True)
"""


_LINE = re.compile(r"\n")


class ControlRelay:
    """The control API from inside the namespace, through one small process that relays
    requests: a CLI process per call would cost a second of start-up each."""

    def __init__(self, namespace: Namespace) -> None:
        argv = namespace.argv(sys.executable, "-c", _RELAY, f"http://{CONTROL}/api/v1")
        self.process = InteractiveProcess(argv, clean_environment())
        self.answers = 0

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        self.process.send(json.dumps({"method": method, "path": path, "body": body}) + "\n")
        self.answers += 1
        self.process.read_for(10.0, _LINE, self.answers)
        lines = self.process.stdout.splitlines()
        assert len(lines) == self.answers, self.process.stdout
        answer = json.loads(lines[-1])
        return answer["status"], json.loads(answer["body"]) if answer["body"] else None

    def create_event(self, event_type: str, resources: Sequence[str], **fields: Any) -> str:
        payload = {"type": event_type, "resources": list(resources), **fields}
        status, event = self.call("POST", "/events", payload)
        assert status == 201, event
        event_id: str = event["EventId"]
        return event_id

    def events(self) -> dict[str, dict[str, Any]]:
        status, listed = self.call("GET", "/events")
        assert status == 200, listed
        return {event["EventId"]: event for event in listed["events"]}

    def cancel(self, event_id: str) -> None:
        status, body = self.call("DELETE", f"/events/{event_id}")
        assert status == 204, body

    def clear(self) -> None:
        """Empty documents again, as ``ForewarnServer.clear`` does on loopback."""
        for event_id, event in self.events().items():
            if event["EventStatus"] == "Scheduled":
                self.cancel(event_id)
        status, body = self.call("POST", "/clock/advance", {"seconds": 11 * 60})
        assert status == 200, body
        assert self.events() == {}

    def close(self) -> None:
        """End of input ends the relay (``finish`` closes its stdin)."""
        status, _, errors = self.process.finish(timeout=5.0)
        assert status == 0, errors


@dataclass
class NamespacedServer:
    namespace: Namespace
    process: ServerProcess
    control: ControlRelay
    workdir: Path


@pytest.fixture(scope="module")
def azure_address(
    namespace: Namespace, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[NamespacedServer]:
    """``forewarn serve --bind 169.254.169.254:80`` in the namespace: WestNO_0 answers at
    Azure's address, WestNO_1 (same availability set) at another loopback address."""
    workdir = tmp_path_factory.mktemp("netns")
    fleet = workdir / "fleet.yaml"
    fleet.write_text(pair_fleet(AZURE_ENDPOINT, PARTNER), encoding="utf-8")
    argv = serve_argv(bind=f"{AZURE_ENDPOINT}:80", control=CONTROL, seed=2017, fleet=fleet)
    process = ServerProcess(namespace.argv(*argv), workdir / "forewarn-serve.log")
    with ExitStack() as stack:
        stack.callback(lambda: print(f"--- forewarn serve output ---\n{process.output()}"))
        stack.callback(process.stop)
        ready = run(
            namespace.argv(
                sys.executable,
                "-c",
                _WAIT_READY,
                f"http://{CONTROL}/api/v1/clock",
                f"http://{AZURE_ENDPOINT}/",
            ),
            timeout=20,
        )
        assert ready.returncode == 0, ready.stderr + process.output()
        relay = ControlRelay(namespace)
        stack.callback(relay.close)
        yield NamespacedServer(namespace, process, relay, workdir)
    problems = process.problems()
    assert not problems, "; ".join(problems)


@pytest.fixture
def inside(azure_address: NamespacedServer) -> NamespacedServer:
    azure_address.process.assert_healthy()
    azure_address.control.clear()
    return azure_address


def test_unmodified_python_sample_inside_the_namespace(
    inside: NamespacedServer, tmp_path: Path
) -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Python Sample", byte
    for byte: it talks to http://169.254.169.254/metadata/scheduledevents as written, and gets
    forewarn."""
    path = write_sample(tmp_path, documented_sample())
    sample = InteractiveProcess(
        inside.namespace.argv(sys.executable, str(path)), clean_environment()
    )
    drive_advanced_sample(sample, inside.control)


def test_unmodified_curl_inside_the_namespace(inside: NamespacedServer) -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Query for events" and
    "Start an event", exactly as printed (the POST with the event's id in place of the example's);
    the event is put there with ``forewarn events create``, as the README shows."""
    require_tool("curl", "the documented commands are curl command lines")
    namespace = inside.namespace
    created = run(
        namespace.argv(
            sys.executable,
            "-m",
            "forewarn",
            "events",
            "create",
            "--type",
            "Reboot",
            "--vm",
            "WestNO_1",
            "--source",
            "User",
            "--description",
            USER_REBOOT,
            "--control",
            CONTROL,
            "-o",
            "json",
        )
    )
    assert created.returncode == 0, created.stderr
    event_id = json.loads(created.stdout)["EventId"]

    query = run(namespace.argv(*curl_argv(QUERY_2020)))
    assert query.returncode == 0, query.stderr
    before = json.loads(query.stdout)
    assert [(e["EventId"], e["EventStatus"]) for e in before["Events"]] == [(event_id, "Scheduled")]

    as_printed = run(namespace.argv(*curl_argv(START_2020)))
    assert "error" in json.loads(as_printed.stdout)  # the example's id names no event here

    approve = run(namespace.argv(*curl_argv(START_2020, event_id=event_id)))
    assert (approve.returncode, approve.stdout) == (0, ""), approve.stderr

    after = json.loads(run(namespace.argv(*curl_argv(QUERY_2020))).stdout)
    assert after["DocumentIncarnation"] > before["DocumentIncarnation"]
    assert [(e["EventId"], e["EventStatus"], e["NotBefore"]) for e in after["Events"]] == [
        (event_id, "Started", "")
    ]
    assert inside.control.events()[event_id]["approvedBy"] == [TENANT]

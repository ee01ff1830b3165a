"""What a run against a failing store must never show, checked as the run goes.

The fault tier (a full disk under SQLite, PostgreSQL cut away, then a restart of forewarn)
drives a real ``forewarn serve`` and hands everything its VMs and its control API answer to
a :class:`Witness`, which holds the rules every answer must keep (SPEC 2: a VM's
DocumentIncarnation "increases whenever this VM's Events array changes; the same incarnation
always means the same information", and never goes backwards across a restart of forewarn
[ours]; EventIds are "globally unique, stable for the life of the event" [doc]); the tests
add what each fault must keep: nothing acknowledged lost, nothing refused visible.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from e2e_support import ServerProcess, free_port, serve_argv, wait_for
from machine_support import unavailable

#: The control API's token, which the test run sets (tests/conftest.py).
AUTH = {"Authorization": f"Bearer {os.environ['FOREWARN_TOKEN']}"}
URL = "http://{}:{}/metadata/scheduledevents?api-version=2020-07-01"
HEADERS = {"Metadata": "true"}
#: IMDS's answer to a request it cannot serve now (SPEC 1: 503 "Internal service
#: unavailable. Retry later"; learn.microsoft.com ... troubleshoot-load-balancer-imds,
#: "Error codes").
UNAVAILABLE = {"error": "Internal service unavailable. Retry later"}
#: How long a test waits for a store that works again to be written to: forewarn refuses
#: writes without trying for a moment after a failure (forewarn.writer.QUIET_SECONDS, the
#: replica's reconnecting); the test waits for the first success, never a fixed time.
RECOVERY_SECONDS = 20.0
#: How long a start may take: a PostgreSQL front-end replays and registers before it
#: listens, which takes seconds on a machine busy with other tests.
START_SECONDS = 30.0


@dataclass
class Witness:
    """Every document and event a run was shown, and the rules they keep."""

    #: VM -> incarnation -> the document's bytes shown at that incarnation.
    documents: dict[str, dict[int, bytes]] = field(default_factory=dict)
    #: EventId -> (EventType, Resources): what the id named when first shown.
    events: dict[str, tuple[str, tuple[str, ...]]] = field(default_factory=dict)

    def document(self, vm: str, body: bytes) -> dict[str, Any]:
        """``vm`` was shown ``body``: its incarnation is not below any it was shown before,
        and means the same bytes each time; each event keeps its identity."""
        shown = httpx.Response(200, content=body).json()
        incarnation = int(shown["DocumentIncarnation"])
        seen = self.documents.setdefault(vm, {})
        if seen:
            latest = max(seen)
            assert incarnation >= latest, (
                f"{vm} went back from incarnation {latest} to {incarnation}"
            )
        assert seen.setdefault(incarnation, body) == body, (
            f"{vm}'s incarnation {incarnation} was shown as {seen[incarnation]!r}, now {body!r}"
        )
        for event in shown["Events"]:
            self.event(event["EventId"], event["EventType"], event["Resources"])
        return dict(shown)

    def event(self, event_id: str, event_type: str, resources: list[str]) -> None:
        identity = (event_type, tuple(sorted(resources)))
        first = self.events.setdefault(event_id, identity)
        assert first == identity, f"EventId {event_id} named {first}, now {identity}"

    def listing(self, events: list[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
        """The control API listed ``events``: each id keeps its identity there too."""
        for event in events:
            self.event(event["EventId"], event["EventType"], event["Resources"])
        return events

    def latest(self, vm: str) -> bytes:
        seen = self.documents[vm]
        return seen[max(seen)]


@dataclass
class Front:
    """A running ``forewarn serve``'s two planes, as its VMs and its operator reach them."""

    port: int
    control_port: int
    addresses: Mapping[str, str]
    witness: Witness

    @property
    def control(self) -> str:
        return f"http://127.0.0.1:{self.control_port}/api/v1"

    def poll(self, vm: str) -> httpx.Response:
        """A VM's poll; a 200's document is handed to the witness."""
        answer = httpx.get(URL.format(self.addresses[vm], self.port), headers=HEADERS, timeout=10)
        if answer.status_code == 200:
            self.witness.document(vm, answer.content)
        return answer

    def shown(self, vm: str) -> dict[str, Any]:
        answer = self.poll(vm)
        assert answer.status_code == 200, answer.text
        return dict(answer.json())

    def approve(self, vm: str, event_id: str) -> httpx.Response:
        """A VM approves, as the documentation's samples do (StartRequests)."""
        return httpx.post(
            URL.format(self.addresses[vm], self.port),
            headers=HEADERS,
            content=f'{{"StartRequests":[{{"EventId":"{event_id}"}}]}}',
            timeout=10,
        )

    def call(self, method: str, path: str, body: Any = None) -> httpx.Response:
        """The control API; events in a 200 or 201 are handed to the witness."""
        answer = httpx.request(method, f"{self.control}{path}", json=body, headers=AUTH, timeout=10)
        if answer.status_code in (200, 201) and isinstance(answer.json(), dict):
            self.witness.listing(answer.json().get("events") or [])
        return answer

    def listing(self) -> list[Mapping[str, Any]]:
        answer = self.call("GET", "/events")
        assert answer.status_code == 200, answer.text
        return list(answer.json()["events"])

    def clock(self) -> str:
        answer = self.call("GET", "/clock")
        assert answer.status_code == 200, answer.text
        return str(answer.json()["now"])

    def state(self) -> dict[str, Any]:
        """What every VM is shown, the events listed and the time: equal before a restart
        and after it, or something acknowledged was lost (or something refused kept)."""
        return {
            "documents": {vm: self.shown(vm)["DocumentIncarnation"] for vm in self.addresses},
            "bodies": {vm: self.witness.latest(vm) for vm in self.addresses},
            "events": self.listing(),
            "clock": self.clock(),
        }

    def status_line(self, vm: str, event_id: str) -> bytes:
        """The first line of the raw answer to ``vm``'s approval: its status and reason."""
        body = b'{"StartRequests":[{"EventId":"%s"}]}' % event_id.encode()
        request = (
            b"POST /metadata/scheduledevents?api-version=2020-07-01 HTTP/1.1\r\n"
            b"Host: 169.254.169.254\r\nMetadata: true\r\nConnection: close\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
        )
        with socket.create_connection((self.addresses[vm], self.port), timeout=10) as sock:
            sock.sendall(request)
            answer = b""
            while chunk := sock.recv(65536):
                answer += chunk
        return answer.split(b"\r\n", 1)[0]

    @contextlib.contextmanager
    def serving(
        self, logs: Path, options: Sequence[str], start_seconds: float = START_SECONDS
    ) -> Iterator[ServerProcess]:
        """``forewarn serve`` with ``options`` at this front's ports, its output in ``logs``
        (one file per start), until the block ends; no traceback may show in it. It must
        answer within ``start_seconds``."""
        argv = serve_argv(
            bind=f"127.0.0.1:{self.port}",
            control=f"127.0.0.1:{self.control_port}",
            seed=5,
            rate_limit=1000,
            extra=(*options, "--timing", "first_call_delay=0"),
        )
        process = ServerProcess(argv, logs / f"serve-{len(list(logs.glob('serve-*.log')))}.log")
        try:
            wait_for(
                lambda: httpx.get(f"{self.control}/clock", headers=AUTH, timeout=1).is_success,
                what="the control API",
                server=process,
                timeout=start_seconds,
            )
            yield process
        finally:
            process.stop()
            assert "Traceback" not in process.output(), process.output()


def until(ask: Callable[[], httpx.Response]) -> httpx.Response:
    """Ask again while the answer is 503, for a store that works again to be used (bounded
    by RECOVERY_SECONDS): the first answer that is not."""
    deadline = time.monotonic() + RECOVERY_SECONDS
    while True:
        answer = ask()
        if answer.status_code != 503 or time.monotonic() > deadline:
            return answer
        time.sleep(0.1)


def refused(answer: httpx.Response) -> str:
    """The error of a change refused for the store's sake: 503 and a message that says so."""
    assert answer.status_code == 503, (answer.status_code, answer.text)
    message = str(answer.json()["error"])
    assert message, answer.text
    return message


class SmallDisk:
    """A mounted tmpfs of 2 MB; :meth:`fill` takes all its room, :meth:`free` gives it back."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._filler = root / "filler"

    def fill(self) -> None:
        with self._filler.open("ab", buffering=0) as filler:
            block = b"\0" * 4096
            while True:
                try:
                    filler.write(block)
                except OSError as exc:
                    if exc.errno != errno.ENOSPC:
                        raise
                    break
            with contextlib.suppress(OSError):  # the last bytes a partial block fits
                filler.write(b"\0")

    def free(self) -> None:
        self._filler.unlink()


@contextlib.contextmanager
def small_disk_at(root: Path) -> Iterator[SmallDisk]:
    """A 2 MB tmpfs mounted at ``root`` (made) for the ``with`` block, unmounted after it.

    Mounting needs root (CI runs as root, as the network-namespace tests do). Elsewhere the
    test skips and says why, except under ``CI``, where its absence fails the run."""
    root.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(root)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        reason = (
            "cannot mount a 2 MB tmpfs for a full disk (needs root): "
            f"{' '.join(mounted.stderr.split()) or mounted.returncode}"
        )
        unavailable(reason)
    try:
        yield SmallDisk(root)
    finally:
        if subprocess.run(["umount", str(root)], check=False).returncode != 0:
            subprocess.run(["umount", "--lazy", str(root)], check=False)


#: A campaign over a set of two fault domains, two VMs the operator restarts (vmB only while
#: the store fails), and one that has not asked yet.
FLEET = """
availabilitySets: [{name: west, faultDomains: 2}]
vms:
  - {name: WestNO_0, address: 127.0.0.2, availabilitySet: west, faultDomain: 0, host: h1}
  - {name: WestNO_1, address: 127.0.0.3, availabilitySet: west, faultDomain: 1, host: h2}
  - {name: vmB, address: 127.0.0.4}
  - {name: vmC, address: 127.0.0.5}
  - {name: late, address: 127.0.0.6, scheduledEventsEnabled: false}
"""
ADDRESSES = {
    "WestNO_0": "127.0.0.2",
    "WestNO_1": "127.0.0.3",
    "vmB": "127.0.0.4",
    "vmC": "127.0.0.5",
    "late": "127.0.0.6",
}


@dataclass(frozen=True)
class StoreFault:
    """How a test makes the store fail and work again, and what a refusal then says."""

    start: Callable[[], None]
    end: Callable[[], None]
    says: str


def campaign_through_a_fault(tmp_path: Path, options: Sequence[str], fault: StoreFault) -> None:
    """The fault tier's run: a campaign with approvals flowing, the store failing under it
    (changes refused with 503, reads going on, nothing refused shown), the store back
    (changes taken again), then ``kill -9`` and a restart: the same documents, events and
    time as before it, every acknowledged event there, every incarnation kept and no
    EventId naming two events, with a :class:`Witness` over everything shown meanwhile."""
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(FLEET)
    options = (*options, "--fleet", str(fleet))
    witness = Witness()
    front = Front(free_port(["127.0.0.1"]), free_port(["127.0.0.1"]), ADDRESSES, witness)
    up = ["WestNO_1", "vmB", "vmC"]  # WestNO_0 is down for its impact (7 s) meanwhile
    with front.serving(tmp_path, options) as process:
        for vm in ("WestNO_0", *up):
            front.poll(vm)
        campaign = front.call("POST", "/campaigns", {"vms": ["WestNO_0", "WestNO_1"]})
        assert campaign.status_code == 201, campaign.text
        (first,) = front.shown("WestNO_0")["Events"]
        restart = front.call("POST", "/vms/WestNO_1/restart")
        assert restart.status_code == 200, restart.text
        (pending,) = restart.json()["events"]
        assert front.approve("WestNO_0", first["EventId"]).status_code == 200
        before = {vm: front.shown(vm) for vm in up}
        assert [e["EventStatus"] for e in before["WestNO_1"]["Events"]] == ["Started", "Scheduled"]
        listed, now = front.listing(), front.clock()

        fault.start()
        for _ in range(3):  # the three restarts of vmB
            assert fault.says in refused(front.call("POST", "/vms/vmB/restart"))
        assert front.listing() == listed
        assert front.shown("vmB") == before["vmB"]
        refused(front.call("POST", "/clock/advance", {"seconds": 60}))
        approval = front.approve("WestNO_1", pending["EventId"])
        assert (approval.status_code, approval.json()) == (503, UNAVAILABLE)
        assert front.status_line("WestNO_1", pending["EventId"]) == (
            b"HTTP/1.1 503 Service Unavailable"
        )
        first_request = front.poll("late")  # it would turn Scheduled Events on: a change
        assert (first_request.status_code, first_request.json()) == (503, UNAVAILABLE)
        # reads go on, and show nothing that was refused
        assert {vm: front.shown(vm) for vm in up} == before
        assert front.listing() == listed
        assert front.clock() == now
        assert front.call("GET", "/vms/late").json()["receiving"] is False

        fault.end()
        moved = until(lambda: front.call("POST", "/clock/advance", {"seconds": 7}))
        assert moved.status_code == 200, moved.text  # and WestNO_0's impact is over
        assert front.approve("WestNO_1", pending["EventId"]).status_code == 200
        made = front.call("POST", "/vms/vmC/restart")
        assert made.status_code == 200, made.text
        assert until(lambda: front.poll("late")).status_code == 200
        assert front.call("GET", "/vms/late").json()["receiving"] is True
        moved = front.call("POST", "/clock/advance", {"seconds": 7})  # WestNO_1's impact
        assert moved.status_code == 200, moved.text
        ended = front.state()
        os.kill(process.process.pid, signal.SIGKILL)
        process.process.wait(10)

    with front.serving(tmp_path, options):
        assert front.state() == ended
    statuses = {event["EventId"]: event["EventStatus"] for event in ended["events"]}
    (later,) = made.json()["events"]
    assert statuses == {
        first["EventId"]: "Started",
        pending["EventId"]: "Started",
        later["EventId"]: "Scheduled",
    }
    # vmB's restarts were refused: none was ever shown, before the restart or after it
    assert set(witness.documents["vmB"]) == {1}
    assert all("vmB" not in resources for _, resources in witness.events.values())

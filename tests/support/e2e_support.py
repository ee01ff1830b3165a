"""Running ``forewarn serve`` as a real process and talking to it over real sockets.

The end-to-end tier exists to catch what only the shipped command shows (argument parsing,
uvloop, signal handling, real sockets, real clients), so it starts exactly what a user starts:
``python -m forewarn serve`` with the interpreter running the tests, so any virtual environment
works, on loopback or inside a private network namespace at Azure's own address. Everything
here is bounded in time: a process that does not come up, a socket that does not answer or a
server that does not stop is a failure with its output shown, never a hang.

This is the one module that starts ``forewarn serve`` processes; it is on ``sys.path`` for
every test folder (pytest's ``pythonpath``). A platform in the test's own process comes from
:mod:`forewarn.testing` instead.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import resource
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
from machine_support import require_namespaces, unavailable

REPO_ROOT = Path(__file__).resolve().parents[2]
#: The public documents the behaviour comes from; beside the repository in development.
REFERENCE_DIR = REPO_ROOT.parent / "shared" / "reference"

START_TIMEOUT = 10.0
#: How long a started ``forewarn serve`` may take to answer before it is called hung. Only a
#: hang waits this long (an exit is reported at once): three serves starting on one
#: PostgreSQL beside other suites on two cores once took more than START_TIMEOUT.
UP_TIMEOUT = 60.0
STOP_TIMEOUT = 5.0
SOCKET_TIMEOUT = 3.0

API_VERSION = "2020-07-01"
SCHEDULED_EVENTS = "/metadata/scheduledevents"
#: Azure's address, as every documented client writes it.
AZURE_ENDPOINT = "169.254.169.254"
#: The subscription both VMs of the availability set belong to: approvals count per tenant.
TENANT = "00000000-0000-0000-0000-000000000000"

#: Texts from learn.microsoft.com/azure/virtual-machines/windows/scheduled-events ("Event
#: properties", "Example responses") and SPEC 2, used as the events' descriptions.
USER_REBOOT = "Virtual machine is going to be restarted as requested by authorized user."
LIVE_MIGRATION = (
    "Virtual machine is being paused because of a memory-preserving Live Migration operation."
)
HOST_MAINTENANCE = "Host server is undergoing maintenance."
EMERGENCY_REPAIR = "Host server is undergoing an emergency repair."

StartServer = Callable[..., "ForewarnServer"]

_TRACE_MARKERS = ("Traceback (most recent call last)", "Exception in callback", "Fatal error")


#: Where WestNO_0 and WestNO_1 (and the standalone Outsider) answer on loopback.
PAIR_HOSTS = ("127.0.0.2", "127.0.0.3")
OUTSIDER_HOST = "127.0.0.4"


def pair_fleet(leader: str, partner: str, outsider: str | None = None) -> str:
    """Two VMs of one availability set, as in the documentation's live-migration example
    (learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Example responses":
    WestNO_0 and WestNO_1), plus an optional standalone VM whose events the pair must never see
    (SPEC 5).

    The tests talk as WestNO_0 and put events on WestNO_1: every VM of a set sees the set's
    events, and an approval "allows the event to proceed for all Resources", so WestNO_0 can
    approve without itself going down for the impact.
    """
    text = (
        "availabilitySets:\n"
        "  - name: west\n"
        "vms:\n"
        f"  - {{name: WestNO_0, address: {leader}, availabilitySet: west, faultDomain: 0}}\n"
        f"  - {{name: WestNO_1, address: {partner}, availabilitySet: west, faultDomain: 1}}\n"
    )
    if outsider is not None:
        text += f"  - {{name: Outsider, address: {outsider}}}\n"
    return text


def clean_environment() -> dict[str, str]:
    """The environment for child processes: unbuffered, and with no proxy, so that a client
    under test talks to the address it was given and nothing else."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key.lower() not in ("http_proxy", "https_proxy", "all_proxy", "no_proxy")
    }
    env["PYTHONUNBUFFERED"] = "1"
    return env


#: The ports tests listen on: below the kernel's ephemeral ports (32768 and up), from which
#: every outgoing connection of the machine takes its source port. A port the kernel chose
#: for a probe could be taken by any connection before the server bound it ("Address already
#: in use" under a busy suite); none takes one of these. Above the benchmarks' own range.
TEST_PORTS = range(20000, 32000)
#: Each pytest-xdist worker hands out ports of its own slice, so two workers never pick one
#: port between a probe and a bind.
_SLICES = 16


class _PortPicker:
    """Ports of this process's slice of :data:`TEST_PORTS` in turn, from a random place."""

    def __init__(self) -> None:
        worker = re.fullmatch(r"gw(\d+)", os.environ.get("PYTEST_XDIST_WORKER", ""))
        size = len(TEST_PORTS) // _SLICES
        start = TEST_PORTS.start + (int(worker.group(1)) % _SLICES if worker else 0) * size
        self.ports = range(start, start + size)
        self._next = secrets.randbelow(size)
        self._lock = threading.Lock()

    def pick(self, hosts: Sequence[str]) -> int:
        with self._lock:
            for _ in range(len(self.ports)):
                port = self.ports[self._next]
                self._next = (self._next + 1) % len(self.ports)
                if all(_can_bind(host, port) for host in hosts):
                    return port
        raise RuntimeError(f"no free port in {self.ports.start}-{self.ports.stop - 1}")


_PICKER = _PortPicker()


def json_lines(path: Path) -> list[Any]:
    """The JSON lines a running process has written whole to ``path``: the last may be half
    written as it is read."""
    if not path.exists():
        return []
    written = path.read_text()
    return [json.loads(line) for line in written[: written.rfind("\n") + 1].splitlines() if line]


def free_port(hosts: Sequence[str]) -> int:
    """A TCP port nobody listens on at any of ``hosts``, never an ephemeral one."""
    return _PICKER.pick(hosts)


def _can_bind(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


def serve_argv(
    *,
    bind: str,
    control: str,
    seed: int,
    fleet: Path | None = None,
    rate_limit: float | None = None,
    clock: str = "manual",
    extra: Sequence[str] = (),
) -> list[str]:
    argv = [sys.executable, "-m", "forewarn", "serve", "--bind", bind, "--control", control]
    argv += ["--clock", clock, "--seed", str(seed), *extra]
    if fleet is not None:
        argv += ["--fleet", str(fleet)]
    if rate_limit is not None:
        argv += ["--rate-limit", f"{rate_limit:g}"]
    return argv


def _limit_open_files(soft: int, hard: int) -> None:
    """In the child, before it runs: at most ``soft`` descriptors (``ulimit -n``), ``hard``
    the most it may raise that to."""
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


class ServerProcess:
    """A started ``forewarn serve`` with its output going to a file (a pipe could fill up);
    ``open_files`` its descriptor limits (soft, hard), as ``ulimit -n`` would set them."""

    def __init__(
        self,
        argv: Sequence[str],
        output_path: Path,
        *,
        open_files: tuple[int, int] | None = None,
    ) -> None:
        self.argv = list(argv)
        self.output_path = output_path
        self._output = output_path.open("wb")
        self.process = subprocess.Popen(
            self.argv,
            stdin=subprocess.DEVNULL,
            stdout=self._output,
            stderr=subprocess.STDOUT,
            env=clean_environment(),
            cwd=output_path.parent,
            preexec_fn=None
            if open_files is None
            else functools.partial(_limit_open_files, *open_files),
        )
        self.stopped_by_us = False
        self.killed = False

    def output(self) -> str:
        return self.output_path.read_text(encoding="utf-8", errors="replace")

    def alive(self) -> bool:
        return self.process.poll() is None

    def problems(self) -> list[str]:
        """What a healthy server never shows: an early exit or a traceback in its output."""
        found = []
        status = self.process.poll()
        if status is not None and not self.stopped_by_us:
            found.append(f"the server exited by itself with status {status}")
        if self.killed:
            found.append(f"the server did not stop within {STOP_TIMEOUT} s of SIGTERM")
        elif status not in (None, 0):
            found.append(f"the server exited with status {status} after SIGTERM")
        output = self.output()
        found += [f"its output shows {marker!r}" for marker in _TRACE_MARKERS if marker in output]
        return found

    def assert_healthy(self) -> None:
        problems = self.problems()
        assert not problems, "; ".join(problems) + "\n--- server output ---\n" + self.output()

    def stop(self) -> int:
        """SIGTERM, then SIGKILL if it has not stopped within the bound; the exit status."""
        if self.alive():
            self.stopped_by_us = True
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.killed = True
                self.process.kill()
                self.process.wait(STOP_TIMEOUT)
        self._output.close()
        return self.process.returncode


def wait_until(
    check: Callable[[], bool],
    *,
    what: str,
    timeout: float = START_TIMEOUT,
    context: Callable[[], str] = lambda: "",
) -> None:
    """Poll ``check`` with short waits until it holds; past ``timeout`` seconds, fail naming
    ``what`` (and ``context()``, what the failure should show). The suite's one deadline
    loop: a test waits with it for the next thing that must happen, never sleeps to show
    that something did not, and its bound is on a hang, not on speed."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}{context()}")
        time.sleep(0.05)


def wait_for(
    check: Callable[[], bool],
    *,
    what: str,
    server: ServerProcess | None = None,
    timeout: float = START_TIMEOUT,
) -> None:
    """:func:`wait_until` ``check`` holds, a refused connection or an HTTP error counting as
    not yet; with ``server``, failing at once should it exit, and showing its output."""

    def holds() -> bool:
        if server is not None and not server.alive():
            raise AssertionError(
                f"forewarn serve exited with status {server.process.returncode} "
                f"before {what}\n--- server output ---\n{server.output()}"
            )
        with contextlib.suppress(OSError, httpx.HTTPError):
            return check()
        return False

    def output() -> str:
        return "\n--- server output ---\n" + (server.output() if server is not None else "")

    wait_until(holds, what=what, timeout=timeout, context=output)


@dataclass
class ForewarnServer:
    """A server on loopback, with the control API at hand; ``vm_hosts`` are where VMs ask."""

    process: ServerProcess
    port: int
    control_url: str
    vm_hosts: tuple[str, ...]
    control: httpx.Client = field(init=False)

    def __post_init__(self) -> None:
        token = os.environ["FOREWARN_TOKEN"]  # set for the whole run by tests/conftest.py
        self.control = httpx.Client(
            base_url=self.control_url,
            timeout=5.0,
            trust_env=False,
            headers={"Authorization": f"Bearer {token}"},
        )

    @property
    def control_address(self) -> str:
        """The control API's ``host:port``, as ``FOREWARN_CONTROL`` and ``--control`` take it."""
        return httpx.URL(self.control_url).netloc.decode("ascii")

    @property
    def host(self) -> str:
        """The address the first VM's requests arrive at."""
        return self.vm_hosts[0]

    def base_url(self, host: str | None = None) -> str:
        return f"http://{host or self.host}:{self.port}"

    def url(self, api_version: str = API_VERSION, host: str | None = None) -> str:
        return f"{self.base_url(host)}{SCHEDULED_EVENTS}?api-version={api_version}"

    # -- the control API (src/forewarn/server/control.py) ----------------------------------

    def create_event(self, event_type: str, resources: Sequence[str], **fields: Any) -> str:
        payload = {"type": event_type, "resources": list(resources), **fields}
        response = self.control.post("/events", json=payload)
        assert response.status_code == 201, response.text
        event_id: str = response.json()["EventId"]
        return event_id

    def events(self) -> dict[str, dict[str, Any]]:
        response = self.control.get("/events")
        assert response.status_code == 200, response.text
        return {event["EventId"]: event for event in response.json()["events"]}

    def cancel(self, event_id: str) -> None:
        response = self.control.delete(f"/events/{event_id}")
        assert response.status_code == 204, response.text

    def advance(self, seconds: float) -> None:
        response = self.control.post("/clock/advance", json={"seconds": seconds})
        assert response.status_code == 200, response.text

    def clear(self) -> None:
        """Back to empty documents: Scheduled events are called off, Started ones run their
        course (the clock moves past the Started period). Bounded: events never multiply."""
        for _ in range(3):
            events = self.events()
            if not events:
                break
            for event_id, event in events.items():
                if event["EventStatus"] == "Scheduled":
                    self.cancel(event_id)
            self.advance(11 * 60)
        assert not self.events(), self.events()
        for host in self.vm_hosts:
            # A request from each VM, as real VMs poll: none goes idle (SPEC 7)
            # however many tests move the clock.
            assert self.document_response(host).status == 200

    def clock(self) -> str:
        now: str = self.control.get("/clock").json()["now"]
        return now

    # -- the VM-facing endpoint, as a VM sees it -------------------------------------------

    def document_response(self, host: str | None = None) -> RawResponse:
        """One GET with the Metadata header on a connection of its own."""
        request = (
            f"GET {SCHEDULED_EVENTS}?api-version={API_VERSION} HTTP/1.1\r\n"
            f"Host: {AZURE_ENDPOINT}\r\nMetadata: true\r\nConnection: close\r\n\r\n"
        ).encode()
        responses = parse_responses(exchange(host or self.host, self.port, request).data)
        assert len(responses) == 1, responses
        return responses[0]

    def document(self, host: str | None = None) -> dict[str, Any]:
        response = self.document_response(host)
        assert response.status == 200, response
        document: dict[str, Any] = response.json()
        return document

    def approve_raw(self, event_ids: Sequence[str], host: str | None = None) -> RawResponse:
        body = json.dumps({"StartRequests": [{"EventId": e} for e in event_ids]}).encode()
        request = (
            f"POST {SCHEDULED_EVENTS}?api-version={API_VERSION} HTTP/1.1\r\n"
            f"Host: {AZURE_ENDPOINT}\r\nMetadata: true\r\nContent-Length: {len(body)}\r\n"
            "Connection: close\r\n\r\n"
        ).encode() + body
        responses = parse_responses(exchange(host or self.host, self.port, request).data)
        assert len(responses) == 1, responses
        return responses[0]

    def stop(self) -> int:
        self.control.close()
        return self.process.stop()


def start_forewarn(
    workdir: Path,
    *,
    fleet: str | None = None,
    vm_hosts: Sequence[str] = ("127.0.0.1",),
    rate_limit: float | None = None,
    seed: int = 2022,
    clock: str = "manual",
    extra: Sequence[str] = (),
    open_files: tuple[int, int] | None = None,
) -> ForewarnServer:
    """Start ``forewarn serve`` on free loopback ports and wait until both planes answer;
    ``open_files``: its descriptor limits (soft, hard)."""
    fleet_path = None
    if fleet is not None:
        fleet_path = workdir / "fleet.yaml"
        fleet_path.write_text(fleet, encoding="utf-8")
    port = free_port(["127.0.0.1", *vm_hosts])
    control_port = free_port(["127.0.0.1"])
    while control_port == port:
        control_port = free_port(["127.0.0.1"])
    argv = serve_argv(
        bind=f"127.0.0.1:{port}",
        control=f"127.0.0.1:{control_port}",
        seed=seed,
        fleet=fleet_path,
        rate_limit=rate_limit,
        clock=clock,
        extra=extra,
    )
    process = ServerProcess(argv, workdir / "forewarn-serve.log", open_files=open_files)
    server = ForewarnServer(process, port, f"http://127.0.0.1:{control_port}/api/v1", (*vm_hosts,))
    try:
        wait_for(
            lambda: server.control.get("/clock").status_code == 200,
            what="the control API",
            server=process,
            timeout=UP_TIMEOUT,
        )
        for host in vm_hosts:
            # An unknown path is answered before any VM is looked up or rate-limited, so
            # waiting costs the VMs nothing.
            wait_for(
                lambda host=host: _status_of_root(host, port) == 404,  # type: ignore[misc]
                what=f"the endpoint at {host}:{port}",
                server=process,
                timeout=UP_TIMEOUT,
            )
    except BaseException:
        server.stop()
        print(process.output())
        raise
    return server


def _status_of_root(host: str, port: int) -> int:
    reply = exchange(host, port, b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    responses = parse_responses(reply.data)
    return responses[0].status if responses else 0


# -- raw HTTP/1.1 over a socket ------------------------------------------------------------


@dataclass
class RawResponse:
    status: int
    reason: str
    headers: list[tuple[str, str]]
    body: bytes
    head: bytes

    def header(self, name: str) -> str | None:
        values = [value for key, value in self.headers if key.lower() == name.lower()]
        assert len(values) <= 1, f"{name} appears {len(values)} times"
        return values[0] if values else None

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Exchange:
    """What came back on one connection, and how it ended."""

    data: bytes
    closed: bool  # the server closed (or reset) the connection
    reset: bool
    seconds: float


def exchange(
    host: str,
    port: int,
    *parts: bytes,
    pause: float = 0.0,
    shutdown_write: bool = False,
    read_timeout: float = SOCKET_TIMEOUT,
    until: Callable[[bytes], bool] | None = None,
) -> Exchange:
    """Send ``parts`` (with ``pause`` seconds between them), then read until the server
    closes, ``until`` holds for what was read, or ``read_timeout`` passes."""
    started = time.monotonic()
    data = bytearray()
    closed = reset = False
    with socket.create_connection((host, port), timeout=SOCKET_TIMEOUT) as sock:
        try:
            for index, part in enumerate(parts):
                if index and pause:
                    time.sleep(pause)
                sock.sendall(part)
            if shutdown_write:
                sock.shutdown(socket.SHUT_WR)
        except (BrokenPipeError, ConnectionResetError):
            reset = True
        deadline = time.monotonic() + read_timeout
        while not closed and not (until is not None and until(bytes(data))):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            sock.settimeout(remaining)
            try:
                chunk = sock.recv(65536)
            except TimeoutError:
                break
            except ConnectionResetError:
                closed = reset = True
                break
            if not chunk:
                closed = True
            data += chunk
    return Exchange(bytes(data), closed or reset, reset, time.monotonic() - started)


def assert_cut_short(whole: bytes, cut: Exchange) -> None:
    """``cut`` is ``whole``'s 200 answer announced at its full Content-Length, then closed
    before all of its body came (the ``truncate`` fault, docs/faults.md)."""
    assert cut.closed
    head, _, body = cut.data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 OK\r\n")
    length = int(head.split(b"Content-Length: ")[1].split(b"\r\n")[0])
    assert length == len(whole.partition(b"\r\n\r\n")[2])
    assert 0 < len(body) < length


_STATUS_LINE = re.compile(rb"^HTTP/1\.[01] (\d{3}) ?([^\r\n]*)$")


def parse_responses(data: bytes) -> list[RawResponse]:
    """Split a byte stream into responses; each must carry an exact Content-Length."""
    responses = []
    rest = data
    while rest:
        head, separator, rest = rest.partition(b"\r\n\r\n")
        assert separator, f"incomplete response head: {head!r}"
        status_line, *header_lines = head.split(b"\r\n")
        match = _STATUS_LINE.match(status_line)
        assert match is not None, f"bad status line {status_line!r}"
        headers = []
        for line in header_lines:
            name, colon, value = line.partition(b":")
            assert colon, f"bad header line {line!r}"
            headers.append((name.decode("latin-1"), value.strip().decode("latin-1")))
        response = RawResponse(int(match.group(1)), match.group(2).decode(), headers, b"", head)
        if response.status in (100, 304):  # never a body (RFC 9110 15.2, 15.4.5)
            responses.append(response)
            continue
        length = response.header("Content-Length")
        assert length is not None, f"no Content-Length in {head!r}"
        assert length.isdigit(), f"Content-Length {length!r} is not a number"
        size = int(length)
        assert len(rest) >= size, f"body shorter than Content-Length {size}: {rest!r}"
        response.body, rest = rest[:size], rest[size:]
        responses.append(response)
    return responses


def responses_complete(count: int) -> Callable[[bytes], bool]:
    """An ``until`` for :func:`exchange`: true once ``count`` whole responses have arrived."""

    def complete(data: bytes) -> bool:
        try:
            return len([r for r in parse_responses(data) if r.status != 100]) >= count
        except AssertionError:
            return False

    return complete


def run(
    argv: Sequence[str],
    *,
    input_text: str | None = None,
    timeout: float = 20.0,
    env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """A short-lived command (curl, the CLI), bounded in time, output captured."""
    return subprocess.run(
        list(argv),
        input=input_text,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=dict(env) if env is not None else clean_environment(),
        check=False,
    )


@contextlib.contextmanager
def stopped_at_exit(server: ForewarnServer) -> Iterator[ForewarnServer]:
    """Stop ``server`` however the block ends; show its output, and fail on a traceback."""
    try:
        yield server
    finally:
        status = server.stop()
        print(f"--- forewarn serve exited with status {status} ---\n{server.process.output()}")
    problems = server.process.problems()
    assert not problems, "; ".join(problems)


# -- a private network namespace: loopback up and 169.254.169.254 on it ---------------------
# Deleted (with anything still running in it) however the test ends. Needs root and
# iproute2; the test is skipped with the reason otherwise (a failure under CI).


@dataclass(frozen=True)
class Namespace:
    name: str

    def argv(self, *argv: str) -> list[str]:
        """``argv`` run inside the namespace."""
        return ["ip", "netns", "exec", self.name, *argv]


def skip_unless_namespaces_work() -> None:
    """Go on where a network namespace can be made; otherwise skip saying why (fail under CI,
    which runs as root with iproute2: :mod:`machine_support`)."""
    require_namespaces()


def _kill_everything_in(namespace: str) -> None:
    """Only this test starts processes in its namespace; none may outlive it."""
    listed = run(["ip", "netns", "pids", namespace], timeout=10)
    for pid in listed.stdout.split():
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(pid), signal.SIGKILL)


@contextlib.contextmanager
def namespace_for_test() -> Iterator[Namespace]:
    skip_unless_namespaces_work()
    name = f"forewarn-e2e-{os.getpid()}-{secrets.token_hex(3)}"
    added = run(["ip", "netns", "add", name], timeout=10)
    if added.returncode != 0:
        unavailable(f"`ip netns add {name}` failed: {added.stderr.strip()}")
    namespace = Namespace(name)
    try:
        for argv in (
            ["ip", "link", "set", "lo", "up"],
            ["ip", "addr", "add", f"{AZURE_ENDPOINT}/32", "dev", "lo"],
        ):
            result = run(namespace.argv(*argv), timeout=10)
            assert result.returncode == 0, f"{' '.join(argv)}: {result.stderr}"
        yield namespace
    finally:
        _kill_everything_in(name)
        deleted = run(["ip", "netns", "del", name], timeout=10)
        assert deleted.returncode == 0, deleted.stderr


@contextlib.contextmanager
def serve_with_its_link(
    workdir: Path, *, fleet: str | None = None, seed: int = 3
) -> Iterator[tuple[str, str, int]]:
    """``forewarn serve`` on a manual clock as a user starts it to open the dashboard: with no
    ``FOREWARN_TOKEN``, so it makes a token up and prints it in its link. Yields (the printed
    link, the control API's base URL, the VM-facing port); stopped when the block ends."""
    workdir.mkdir(parents=True, exist_ok=True)
    port, control = free_port(["127.0.0.1"]), free_port(["127.0.0.1"])
    while control == port:
        control = free_port(["127.0.0.1"])
    env = {k: v for k, v in clean_environment().items() if k != "FOREWARN_TOKEN"}
    env["FOREWARN_RUNTIME_DIR"] = str(workdir / "runtime")
    argv = [sys.executable, "-m", "forewarn", "serve", "--clock", "manual", "--seed", str(seed)]
    argv += ["--bind", f"127.0.0.1:{port}", "--control", f"127.0.0.1:{control}"]
    if fleet is not None:
        (workdir / "fleet.yaml").write_text(fleet, encoding="utf-8")
        argv += ["--fleet", str(workdir / "fleet.yaml")]
    log = workdir / "serve.log"
    with log.open("wb") as out:
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env)
    try:
        match = re.search(r"control: (http://\S+/\?token=\S+)", start_up_lines(log, process))
        assert match is not None, log.read_text()
        yield match.group(1), f"http://127.0.0.1:{control}", port
    finally:
        process.terminate()
        process.wait(STOP_TIMEOUT)


def start_up_lines(
    log: Path, process: subprocess.Popen[bytes], line: str = "control: http://"
) -> str:
    """What a ``forewarn serve`` started by hand into ``log`` printed, once its start-up
    lines down to ``line`` are out (bounded in time; an early exit fails with its output)."""

    def printed() -> bool:
        assert process.poll() is None, log.read_text()
        return line in log.read_text()

    wait_until(printed, what=f"{line!r} in {log}", timeout=UP_TIMEOUT, context=log.read_text)
    return log.read_text()


@contextlib.contextmanager
def http_server_in_thread(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """A small HTTP server of the test's own on loopback, on a thread: its base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)

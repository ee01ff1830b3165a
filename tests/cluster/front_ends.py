"""Real ``forewarn serve --store postgresql://...`` processes sharing one namespace."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any
from urllib.parse import parse_qs, urlsplit

import httpx
import psycopg
from e2e_support import free_port

#: The control API's token, which the test run sets (tests/conftest.py).
AUTH = {"Authorization": f"Bearer {os.environ['FOREWARN_TOKEN']}"}
VMS = {"WestNO_0": "127.0.0.2", "WestNO_1": "127.0.0.3", "WestNO_2": "127.0.0.4"}
URL = "http://{}:{}/metadata/scheduledevents?api-version=2020-07-01"
HEADERS = {"Metadata": "true"}


def loopback_port() -> int:
    """A free port on 127.0.0.1 (e2e_support's one rule for free ports)."""
    return free_port(["127.0.0.1"])


@dataclass
class FrontEnd:
    """One front-end: its ports stay the same across restarts."""

    store: str
    fleet: Path
    extra: tuple[str, ...]
    port: int = field(default_factory=loopback_port)
    control_port: int = field(default_factory=loopback_port)
    process: subprocess.Popen[bytes] | None = None
    #: How many times it was started, so a failure can say which process answered.
    starts: int = 0
    #: What its stopped processes logged (warnings and worse), and the running one's file.
    _logged: str = ""
    _log: IO[bytes] | None = None

    @property
    def control(self) -> str:
        return f"http://127.0.0.1:{self.control_port}/api/v1"

    def start(self) -> None:
        command = [
            sys.executable, "-m", "forewarn", "serve", "--store", self.store,
            "--fleet", str(self.fleet), "--seed", "5", "--rate-limit", "1000",
            "--bind", f"127.0.0.1:{self.port}", "--control", f"127.0.0.1:{self.control_port}",
            "--log-level", "warning", *self.extra,
        ]  # fmt: skip
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 (closed by stop, kept till then)
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=self._log)
        self.starts += 1
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(f"{self.control}/clock", headers=AUTH, timeout=1)
                return
            except httpx.TransportError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(f"forewarn serve did not come up: {self.log()}") from None
                time.sleep(0.05)

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
        self.stop()

    def stop(self) -> None:
        if self.process is not None:
            if self.process.poll() is None:
                self.process.terminate()
            self.process.wait(15)
            self.process = None
        if self._log is not None:
            self._logged = self.log()
            self._log.close()
            self._log = None

    def log(self) -> str:
        """Everything its processes have logged so far."""
        if self._log is None:
            return self._logged
        self._log.seek(0)
        return self._logged + self._log.read().decode(errors="replace")

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def document(self, vm: str) -> bytes:
        return httpx.get(URL.format(VMS[vm], self.port), headers=HEADERS, timeout=5).content

    def documents(self) -> dict[str, bytes]:
        return {vm: self.document(vm) for vm in VMS}

    def approve(self, vm: str, event_id: str) -> httpx.Response:
        body = f'{{"StartRequests":[{{"EventId":"{event_id}"}}]}}'
        return httpx.post(URL.format(VMS[vm], self.port), headers=HEADERS, content=body, timeout=5)

    def get(self, path: str) -> Any:
        response = httpx.get(f"{self.control}{path}", headers=AUTH, timeout=5)
        response.raise_for_status()
        return response.json()

    def post(self, path: str, body: object = None) -> httpx.Response:
        return httpx.post(f"{self.control}{path}", headers=AUTH, json=body or {}, timeout=10)


def silence(store: str, front_end: str, seconds: float) -> None:
    """Make the last report of ``front_end`` (a LIKE pattern naming exactly one) ``seconds``
    old, as if it had been silent that long: its heartbeat is what the others judge it by."""
    url = urlsplit(store)
    (namespace,) = parse_qs(url.query)["namespace"]
    with psycopg.connect(url._replace(query="").geturl(), autocommit=True) as conn:
        updated = conn.execute(
            "UPDATE public.forewarn_front_ends "
            "SET heartbeat = clock_timestamp() - make_interval(secs => %s) "
            "WHERE namespace = %s AND front_end LIKE %s",
            [seconds, namespace, front_end],
        )
        assert updated.rowcount == 1, f"not one front-end {front_end} in {namespace}"


def namespace_rows(store: str, query: str, *values: object) -> list[tuple[Any, ...]]:
    """The rows ``query`` gives, read from PostgreSQL directly, its first parameter the
    namespace of ``store`` (a shared store's URL) and ``values`` the others."""
    url = urlsplit(store)
    (namespace,) = parse_qs(url.query)["namespace"]
    with psycopg.connect(url._replace(query="").geturl(), autocommit=True) as conn:
        return conn.execute(query, [namespace, *values]).fetchall()


def front_end_rows(store: str) -> dict[str, int]:
    """The namespace's list of front-ends: each one's name and the record it applied last."""
    rows = namespace_rows(
        store, "SELECT front_end, applied FROM public.forewarn_front_ends WHERE namespace = %s"
    )
    return {str(name): int(applied) for name, applied in rows}


def agreed(front_ends: list[FrontEnd], timeout: float = 10.0) -> dict[str, bytes]:
    """Every VM's document, once all front-ends serve the same bytes (they follow each other
    within milliseconds; the loop allows for a busy machine)."""
    deadline = time.monotonic() + timeout
    while True:
        seen = [front_end.documents() for front_end in front_ends]
        if all(documents == seen[0] for documents in seen):
            return seen[0]
        if time.monotonic() > deadline:
            raise AssertionError(f"front-ends still disagree: {seen}")
        time.sleep(0.05)


def agreed_events(front_ends: list[FrontEnd], timeout: float = 10.0) -> list[dict[str, Any]]:
    """The live events, once all front-ends' control APIs list the same ones."""
    deadline = time.monotonic() + timeout
    while True:
        seen = [front_end.get("/events")["events"] for front_end in front_ends]
        if all(events == seen[0] for events in seen):
            return list(seen[0])
        if time.monotonic() > deadline:
            raise AssertionError(f"front-ends still disagree: {seen}")
        time.sleep(0.05)

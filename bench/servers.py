"""The two servers under test, each started on loopback and stopped by its own process id.

nginx serves a static file with the same bytes forewarn answers, checking the Metadata header
as forewarn does, with the settings that make it fastest for a small file (file cache, no
sendfile, no access log); serving a fleet, it answers each address its own document from
memory. It runs one worker: forewarn is one process on one event loop, and on the 2-core
machines the figures are quoted for, the other core runs the load generator.
"""

from __future__ import annotations

import json
import os
import resource
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from bench.tools import stop, wait_for_port

API_VERSION = "2020-07-01"
PATH = "/metadata/scheduledevents"
QUERY = f"api-version={API_VERSION}"
#: What forewarn answers without the header (wire/errors.py), so nginx fails the same way.
MISSING_HEADER_BODY = '{"error":"Bad request. Required metadata header not specified"}'

_NGINX_CONF = """\
daemon off;
master_process on;
worker_processes 1;
pid {work}/nginx.pid;
error_log {work}/nginx-error.log warn;
worker_rlimit_nofile {open_files};
events {{ worker_connections {connections}; multi_accept on; }}
http {{
    access_log off;
    server_tokens off;
    sendfile off;
    etag off;
    keepalive_requests 100000000;
    keepalive_timeout 75s;
    open_file_cache max=16 inactive=600s;
    open_file_cache_valid 600s;
    client_body_temp_path {work}/nginx-tmp/body;
    proxy_temp_path {work}/nginx-tmp/proxy;
    fastcgi_temp_path {work}/nginx-tmp/fastcgi;
    uwsgi_temp_path {work}/nginx-tmp/uwsgi;
    scgi_temp_path {work}/nginx-tmp/scgi;
{documents}    server {{
        listen {host}:{port} backlog=4096;
        root {www};
        location = {path} {{
            if ($http_metadata != "true") {{
                return 400 '{missing}';
            }}
            default_type "application/json; charset=utf-8";
            {answer}
        }}
    }}
}}
"""


_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU time of ``pids`` (Linux ``/proc``): what serving cost, whatever else
    the machine was doing at the time.

    Each thread's ``schedstat`` counts its time on a CPU in nanoseconds, so the few
    milliseconds a short run costs are measured rather than rounded to the clock tick (10 ms)
    of ``stat``, which is read only where ``schedstat`` is missing."""
    total = 0.0
    for task, fields in _schedstats(pids):
        try:
            total += int(fields[0]) / 1e9
        except (IndexError, ValueError):
            total += _ticks(f"{task}/stat")
    return total


def timeslices(pids: list[int]) -> int:
    """How many times the threads of ``pids`` were put on a CPU (``schedstat``'s third field,
    Linux): each a wake-up or a preemption, the kernel's share of serving that the CPU time
    of a process at a low rate of requests is mostly made of. 0 where ``schedstat`` is
    missing."""
    total = 0
    for _, fields in _schedstats(pids):
        try:
            total += int(fields[2])
        except (IndexError, ValueError):
            continue
    return total


def _schedstats(pids: list[int]) -> Iterator[tuple[str, list[str]]]:
    """Each thread of ``pids``: its ``/proc`` folder and its ``schedstat`` fields (none where
    the file cannot be read)."""
    for pid in pids:
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for task in tasks:
            folder = f"/proc/{pid}/task/{task}"
            try:
                with open(f"{folder}/schedstat", encoding="ascii") as stat:
                    yield folder, stat.read().split()
            except OSError:
                yield folder, []


def _ticks(path: str) -> float:
    try:
        with open(path, encoding="ascii") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICKS


class _Process:
    process: subprocess.Popen[bytes] | None = None
    stop_signal = signal.SIGTERM
    #: Put before the server's command, e.g. ``taskset -c 0`` to pin it to a core.
    prefix: Sequence[str] = ()

    def serving_pids(self) -> list[int]:
        """The processes that answer requests."""
        return [] if self.process is None else [self.process.pid]

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self.process is not None:
            stop(self.process, sig=self.stop_signal)
            self.process = None
        self.cleanup()

    def cleanup(self) -> None:
        """Anything the server needed outside its work folder."""


#: Each address's document, from memory: $server_addr is the address the connection arrived
#: at, as forewarn tells VMs apart. Files would cost an open per poll, or, cached, a
#: descriptor per document beside a connection per VM, past RLIMIT_NOFILE.
_BY_ADDRESS = """if ($document = "") {
                return 404;
            }
            return 200 $document;"""


def _documents_map(documents: Mapping[str, bytes]) -> str:
    """The ``map`` from the address a connection arrived at to that address's document."""
    size = 1 << max(10, (2 * len(documents)).bit_length())
    lines = [
        f"    map_hash_max_size {size};",
        "    map_hash_bucket_size 128;",
        "    map $server_addr $document {",
        '        default "";',
    ]
    for address, body in documents.items():
        text = body.decode("utf-8")
        if "$" in text:  # nginx would read it as a variable
            raise ValueError(f"the document of {address} has a $, which nginx cannot serve")
        quoted = text.replace("\\", "\\\\").replace("'", "\\'")
        lines.append(f"        {address} '{quoted}';")
    lines.append("    }")
    return "\n".join(lines) + "\n"


class Nginx(_Process):
    """nginx serving ``body`` at the Scheduled Events path; or, given ``documents`` (address:
    bytes), each address's own document to the connections that arrive at that address."""

    stop_signal = signal.SIGQUIT  # graceful: the master stops its worker and exits

    def __init__(
        self,
        binary: str,
        work: Path,
        body: bytes,
        host: str,
        port: int,
        *,
        documents: Mapping[str, bytes] | None = None,
        prefix: Sequence[str] = (),
    ) -> None:
        self.binary, self.work, self.body, self.host, self.port = binary, work, body, host, port
        self.documents, self.prefix = documents, prefix
        self.url = f"http://{host}:{port}{PATH}?{QUERY}"
        self.www = work / "www"

    def config(self) -> str:
        open_files = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        return _NGINX_CONF.format(
            work=self.work,
            www=self.www,
            host=self.host,
            port=self.port,
            path=PATH,
            missing=MISSING_HEADER_BODY,
            open_files=open_files,
            # Twice the descriptors: nginx closes idle kept connections once fewer than a
            # 16th of its connections are free, which the descriptors' limit never reaches.
            connections=2 * open_files,
            answer="try_files /document.json =404;" if self.documents is None else _BY_ADDRESS,
            documents="" if self.documents is None else _documents_map(self.documents),
        )

    def serving_pids(self) -> list[int]:
        """nginx's workers: the master only accepts signals."""
        if self.process is None:
            return []
        pids: list[int] = []
        try:
            for task in os.listdir(f"/proc/{self.process.pid}/task"):
                with open(f"/proc/{self.process.pid}/task/{task}/children", encoding="ascii") as f:
                    pids.extend(int(pid) for pid in f.read().split())
        except OSError:
            return []
        return pids

    def cleanup(self) -> None:
        if self.www.name.startswith("forewarn-bench-www-"):
            shutil.rmtree(self.www, ignore_errors=True)

    def __enter__(self) -> Nginx:
        self.work.mkdir(parents=True, exist_ok=True)
        (self.work / "nginx-tmp").mkdir(exist_ok=True)
        # As root, nginx's worker runs as nobody, which cannot enter a private temporary
        # folder: the document gets a folder of its own that anyone may read.
        self.www = Path(tempfile.mkdtemp(prefix="forewarn-bench-www-"))
        self.www.chmod(0o755)
        document = self.www / "document.json"
        document.write_bytes(self.body)
        document.chmod(0o644)
        conf = self.work / "nginx.conf"
        conf.write_text(self.config(), encoding="utf-8")
        log = (self.work / "nginx.out").open("wb")
        self.process = subprocess.Popen(
            [
                *self.prefix,
                self.binary,
                "-c",
                str(conf),
                "-p",
                str(self.work),
                "-e",
                str(self.work / "e.log"),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        try:
            wait_for_port(self.host, self.port, self.process, timeout=10)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self


class Forewarn(_Process):
    """``forewarn serve`` for a generated fleet, on a real socket, as users run it; its
    state in memory, or in ``store`` (several of them on one PostgreSQL namespace are one
    fleet)."""

    def __init__(
        self,
        work: Path,
        fleet_yaml: str,
        *,
        host: str,
        port: int,
        control_port: int,
        rate_limit: float = 5.0,
        clock: str = "system",
        start_timeout: float = 120,
        store: str | None = None,
        control_host: str | None = None,
        options: Sequence[str] = (),
        prefix: Sequence[str] = (),
    ) -> None:
        self.work, self.fleet_yaml = work, fleet_yaml
        self.host, self.port, self.control_port = host, port, control_port
        self.control_host = control_host or host
        self.rate_limit, self.clock, self.start_timeout = rate_limit, clock, start_timeout
        self.store, self.options, self.prefix = store, options, prefix
        self.url = f"http://{host}:{port}{PATH}?{QUERY}"
        self.control = f"http://{self.control_host}:{control_port}/api/v1"
        #: The control API's token, chosen here so that :meth:`call` can send it.
        self.token = secrets.token_urlsafe(24)

    def __enter__(self) -> Forewarn:
        self.work.mkdir(parents=True, exist_ok=True)
        fleet = self.work / "fleet.yaml"
        fleet.write_text(self.fleet_yaml, encoding="utf-8")
        log = (self.work / "forewarn.out").open("wb")
        self.process = subprocess.Popen(
            [
                *self.prefix,
                *serve_command(
                    f"{self.host}:{self.port}",
                    f"{self.control_host}:{self.control_port}",
                    fleet,
                    "--rate-limit",
                    f"{self.rate_limit:g}",
                    "--clock",
                    self.clock,
                    *(["--store", self.store] if self.store is not None else []),
                    *self.options,
                ),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={
                **os.environ,
                "PYTHONUNBUFFERED": "1",
                "FOREWARN_TOKEN": self.token,
                # The token file goes with the run's other files, not to the user's.
                "FOREWARN_RUNTIME_DIR": str(self.work),
            },
        )
        log.close()
        try:
            # The control API starts after every VM-facing listener is open.
            wait_for_port(self.control_host, self.control_port, self.process, self.start_timeout)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def call(self, method: str, path: str, payload: dict[str, Any] | None = None) -> Any:
        data = None if payload is None else json.dumps(payload).encode()
        request = urllib.request.Request(
            self.control + path,
            data=data,
            method=method,
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {self.token}"},
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            text = response.read()
        return json.loads(text) if text else None

    def log(self) -> str:
        return (self.work / "forewarn.out").read_text(encoding="utf-8", errors="replace")


def serve_command(bind: str, control: str, fleet: Path, *options: str) -> list[str]:
    """``forewarn serve`` as every scenario starts it: this interpreter, a fleet file, the
    same seed (so runs show the same EventIds), then the scenario's own ``options``."""
    return [
        sys.executable,
        "-m",
        "forewarn",
        "serve",
        "--bind",
        bind,
        "--control",
        control,
        "--fleet",
        str(fleet),
        "--seed",
        "2024",
        *options,
    ]


def fetch(url: str, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    """One request the way a VM makes it; errors come back as their status and body."""
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            status: int = response.status
            return status, response.read()
    except urllib.error.HTTPError as error:
        with error:
            return error.code, error.read()

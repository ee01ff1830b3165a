"""``GET /healthz`` of a real ``forewarn serve`` (docs/control.md, "Health"), with its store
cut under it: a SQLite file moved out of its data directory, and PostgreSQL reached through
a TCP relay (examples/scale-out/pg_relay.py) that is killed and started again.

The route is forewarn's own (no Azure page describes it): 200 when ready, 503 with a short
reason when not, no token needed, and nothing of the fleet in it. ``forewarn health``, what
the container image's HEALTHCHECK runs, turns it into an exit status.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
import psycopg
import pytest
from e2e_support import (
    REPO_ROOT,
    ForewarnServer,
    clean_environment,
    free_port,
    run,
    start_forewarn,
    stopped_at_exit,
    wait_for,
)
from postgres_support import require_postgres

pytestmark = pytest.mark.e2e

RELAY = REPO_ROOT / "examples" / "scale-out" / "pg_relay.py"


def _health(server: ForewarnServer) -> httpx.Response:
    """As a probe asks: no token, no cookie."""
    control = httpx.URL(server.control_url)
    return httpx.get(f"http://{control.netloc.decode()}/healthz", timeout=10, trust_env=False)


def _shows(server: ForewarnServer, status: int, body: dict[str, Any]) -> bool:
    response = _health(server)
    return response.status_code == status and response.json() == body


READY = {"status": "ready"}
STORE_DOWN = {"status": "unready", "reason": "the store cannot be reached"}


def _cli_health(server: ForewarnServer) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in clean_environment().items() if k != "FOREWARN_TOKEN"}
    argv = [sys.executable, "-m", "forewarn", "health", "--control", server.control_address]
    return run(argv, env=env)


def test_a_sqlite_store_moved_away_turns_healthz_to_503_and_back(tmp_path: Path) -> None:
    data = tmp_path / "data"
    server = start_forewarn(tmp_path, extra=["--data-dir", str(data)])
    with stopped_at_exit(server):
        assert _health(server).status_code == 200
        assert _health(server).json() == READY
        ready = _cli_health(server)
        assert (ready.returncode, ready.stdout.strip()) == (0, "ready"), ready.stderr

        journal = data / "forewarn.sqlite3"
        journal.rename(tmp_path / "moved.sqlite3")
        wait_for(
            lambda: _shows(server, 503, STORE_DOWN),
            what="/healthz to say the store cannot be reached",
            server=server.process,
        )
        down = _cli_health(server)
        assert down.returncode == 1
        assert "not ready: the store cannot be reached" in down.stderr
        # The VMs are still answered: readiness is for whoever routes new work here.
        assert server.document()["DocumentIncarnation"] == 1

        (tmp_path / "moved.sqlite3").rename(journal)
        wait_for(
            lambda: _shows(server, 200, READY), what="/healthz ready again", server=server.process
        )
    assert "not ready: the store cannot be reached" in server.process.output()
    assert "is gone" in server.process.output()  # the detail is in the log, not the answer


class Relay:
    """examples/scale-out/pg_relay.py on 127.0.0.1:``port``; killed, it is a network cut:
    its listener and every connection through it go at once."""

    def __init__(self, port: int, target: tuple[str, int], log: Path) -> None:
        self.argv = [sys.executable, str(RELAY), "--to", f"{target[0]}:{target[1]}"]
        self.argv += ["--listen", f"127.0.0.1:{port}"]
        self.port = port
        self.log = log
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log.open("ab") as output:
            self.process = subprocess.Popen(self.argv, stdout=output, stderr=subprocess.STDOUT)
        wait_for(self._listening, what=f"the relay on 127.0.0.1:{self.port}")

    def _listening(self) -> bool:
        with socket.create_connection(("127.0.0.1", self.port), timeout=1):
            return True

    def kill(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait(10)
            self.process = None


@pytest.fixture
def relay(tmp_path: Path) -> Iterator[Relay]:
    url = urlsplit(require_postgres())
    relay = Relay(
        free_port(["127.0.0.1"]),
        (url.hostname or "127.0.0.1", url.port or 5432),
        tmp_path / "relay.log",
    )
    try:
        yield relay
    finally:
        relay.kill()


@pytest.fixture
def namespace() -> Iterator[str]:
    name = f"health_{uuid.uuid4().hex[:12]}"
    try:
        yield name
    finally:
        with psycopg.connect(require_postgres(), autocommit=True) as conn:
            conn.execute("DELETE FROM public.forewarn_namespaces WHERE namespace = %s", [name])


def test_postgresql_cut_under_a_front_end_turns_healthz_to_503_and_back(
    tmp_path: Path, relay: Relay, namespace: str
) -> None:
    url = urlsplit(require_postgres())
    through_relay = urlunsplit(
        url._replace(
            netloc=f"{url.username or 'postgres'}@127.0.0.1:{relay.port}",
            query=f"namespace={namespace}",
        )
    )
    relay.start()
    server = start_forewarn(tmp_path, extra=["--store", through_relay])
    with stopped_at_exit(server):
        assert _health(server).json() == READY
        relay.kill()
        wait_for(
            lambda: _shows(server, 503, STORE_DOWN),
            what="/healthz to say PostgreSQL cannot be reached",
            server=server.process,
        )
        # Reads go on while PostgreSQL is away (docs/scale-out.md).
        assert server.document()["DocumentIncarnation"] == 1
        relay.start()
        wait_for(
            lambda: _shows(server, 200, READY), what="/healthz ready again", server=server.process
        )

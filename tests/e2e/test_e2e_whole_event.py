"""Real client processes through whole events on the system clock, impact included.

What must hold (docs/faithfulness.md): no client ever sees a reset, an exception or a
document out of order, from Scheduled through approval, impact and removal. The clients:
the documentation's Python sample (its functions unchanged but for the address,
learn.microsoft.com/azure/virtual-machines/windows/scheduled-events "Python Sample"), the
documentation's curl command in a loop, a poller with ``If-None-Match`` as Microsoft's sample
service polls (Azure/vm-scheduled-events, node/src/index.ts), and a client written as the
documentation shows, polling once a second with no error handling, which must exit cleanly after a
restart, a live migration and an eviction of its VM.

The impact lasts the documented 7 s ("Impact Duration: 7 seconds",
learn.microsoft.com/azure/virtual-machines/windows/scheduled-events "High level overview"); the
eviction notice is the documented 30 s, other notices the fast profile's. The run itself is
``clients/whole_event.py``, on loopback and, where network namespaces can be made, at
169.254.169.254:80 inside one.
"""

from __future__ import annotations

import secrets
import sys
from pathlib import Path
from typing import Any

import psycopg
import pytest
from e2e_documented import sample_pointing_at, write_sample
from e2e_support import (
    AZURE_ENDPOINT,
    clean_environment,
    free_port,
    json_lines,
    namespace_for_test,
    run,
)
from postgres_support import require_postgres

pytestmark = pytest.mark.e2e

DRIVER = Path(__file__).parent / "clients" / "whole_event.py"
CLIENTS = ("client", "sample", "curl", "etag")


def _json_lines(path: Path) -> list[dict[str, Any]]:
    return json_lines(path)


def _check_what_the_clients_saw(workdir: Path) -> None:
    logs = {name: workdir / f"{name}.log" for name in CLIENTS}
    for name, log in logs.items():
        assert "Traceback" not in log.read_text(), (name, log.read_text())

    # The documentation-style client: documents in order, and it was held through an impact
    # (its call "simply takes longer") rather than reset. Polling every second through a 7 s
    # impact, it makes some call during it: a poll, or its approval when another client
    # approved first and the event started before its own arrived.
    lines = _json_lines(logs["client"])
    client = [line for line in lines if "incarnation" in line]
    incarnations = [line["incarnation"] for line in client]
    assert incarnations == sorted(incarnations)
    assert max(line["waited"] for line in lines) > 3.0
    seen = {(kind, status) for line in client for kind, status in line["events"]}
    # Each event reached it (Scheduled may pass unseen when another client approves first).
    assert {("Reboot", "Started"), ("Freeze", "Started"), ("Preempt", "Scheduled")} <= seen

    # curl: every answer a whole document, in order.
    documents = _json_lines(logs["curl"])
    assert len(documents) >= 10
    curl_incarnations = [document["DocumentIncarnation"] for document in documents]
    assert curl_incarnations == sorted(curl_incarnations)

    # If-None-Match: a 200 for each new document with its incarnation as the tag, 304 between.
    answers = _json_lines(logs["etag"])
    assert {answer["status"] for answer in answers} == {200, 304}
    for answer in answers:
        if answer["status"] == 200:
            assert answer["etag"] == f'"{answer["incarnation"]}"'
        else:
            assert answer["length"] == 0
    new = [answer["incarnation"] for answer in answers if answer["status"] == 200]
    assert new == sorted(set(new))

    assert "eviction announced" in logs["sample"].read_text()


def _run_driver(argv: list[str], workdir: Path) -> None:
    finished = run(argv, timeout=150, env=clean_environment())
    logs = "\n".join(
        f"--- {name} ---\n{(workdir / f'{name}.log').read_text()}"
        for name in (*CLIENTS, "serve")
        if (workdir / f"{name}.log").exists()
    )
    assert finished.returncode == 0, finished.stderr + finished.stdout + logs


def test_clients_run_through_a_restart_a_live_migration_and_an_eviction(tmp_path: Path) -> None:
    address = "127.0.0.2"
    port = free_port([address])
    control_port = free_port(["127.0.0.1"])
    write_sample(tmp_path, sample_pointing_at(f"http://{address}:{port}"))
    argv = [sys.executable, str(DRIVER), str(tmp_path), address, str(port), str(control_port)]
    _run_driver(argv, tmp_path)
    _check_what_the_clients_saw(tmp_path)


def test_the_same_clients_against_a_front_end_sharing_its_fleet_on_postgresql(
    tmp_path: Path,
) -> None:
    """docs/scale-out.md: a front-end on a PostgreSQL journal moves time by its leader's
    records and journals each VM's first request; what the clients see must not change."""
    postgres = require_postgres()
    namespace = f"whole_event_{secrets.token_hex(6)}"
    address = "127.0.0.2"
    port = free_port([address])
    control_port = free_port(["127.0.0.1"])
    write_sample(tmp_path, sample_pointing_at(f"http://{address}:{port}"))
    store = f"{postgres}?namespace={namespace}"
    argv = [sys.executable, str(DRIVER), str(tmp_path), address, str(port), str(control_port)]
    try:
        _run_driver([*argv, store], tmp_path)
    finally:
        with psycopg.connect(postgres, autocommit=True) as conn:
            conn.execute("DELETE FROM public.forewarn_namespaces WHERE namespace = %s", [namespace])
    _check_what_the_clients_saw(tmp_path)


def test_the_same_clients_at_azures_address_inside_a_network_namespace(tmp_path: Path) -> None:
    """SPEC 1: "binding to 169.254.169.254:80 inside a network namespace lets
    unmodified clients run"; the sample needs no change at all there."""
    with namespace_for_test() as namespace:
        write_sample(tmp_path, sample_pointing_at(f"http://{AZURE_ENDPOINT}"))
        argv = [sys.executable, str(DRIVER), str(tmp_path), AZURE_ENDPOINT, "80", "16955"]
        _run_driver(namespace.argv(*argv), tmp_path)
    _check_what_the_clients_saw(tmp_path)

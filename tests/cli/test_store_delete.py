"""``forewarn store delete``: a PostgreSQL namespace removed with everything of it, so the
same name starts afresh (docs/scale-out.md, "Namespaces").

Seen by a newcomer: deleting the namespace's row by hand, as the scale-out example said,
left its Event Grid schema behind; a new fleet under the same name then found the old
subscriptions.
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import psycopg
from e2e_support import clean_environment, start_forewarn
from postgres_support import require_postgres

from forewarn.eventgrid.postgres import outbox_schema


def _forewarn(*args: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in clean_environment().items() if k != "FOREWARN_STORE"}
    return subprocess.run(
        [sys.executable, "-m", "forewarn", *args],
        capture_output=True, text=True, timeout=60, env=environ, check=False,
    )  # fmt: skip


def _exists(conninfo: str, namespace: str, grid: str) -> tuple[bool, bool]:
    """Whether the namespace's row and its Event Grid schema exist."""
    with psycopg.connect(conninfo, autocommit=True) as connection:
        row = connection.execute(
            "SELECT 1 FROM public.forewarn_namespaces WHERE namespace = %s", [namespace]
        ).fetchone()
        schema = connection.execute(
            "SELECT 1 FROM pg_namespace WHERE nspname = %s", [grid]
        ).fetchone()
    return row is not None, schema is not None


def test_a_namespace_is_deleted_with_its_event_grid_state_and_starts_afresh(
    tmp_path: Path,
) -> None:
    postgres = require_postgres()
    namespace = f"delete_{uuid.uuid4().hex[:12]}"
    url = f"{postgres}?namespace={namespace}"
    conninfo, grid = outbox_schema(url)
    server = start_forewarn(tmp_path, fleet="vms:\n  - name: a1\n", extra=["--store", url])
    try:
        made = server.control.post(
            "/eventgrid/subscriptions",
            json={"name": "ops", "endpoint": "http://127.0.0.1:9/hook"},
        )
        assert made.status_code == 201, made.text
        assert _exists(conninfo, namespace, grid) == (True, True)
        served = _forewarn("store", "delete", "--store", url, "--yes")
        assert served.returncode == 1, served.stderr
        assert served.stderr == (
            f"Error: a front-end is serving namespace {namespace!r} (it holds the leader "
            "lock): stop every forewarn serve on it first\n"
        )
        assert _exists(conninfo, namespace, grid) == (True, True)  # nothing touched
    finally:
        server.stop()
    deleted = _forewarn("store", "delete", "--store", url, "--yes")
    assert deleted.returncode == 0, deleted.stderr
    assert deleted.stdout.startswith(f"deleted namespace {namespace!r} of ")
    assert deleted.stdout.endswith("record(s) and its Event Grid state\n")
    assert _exists(conninfo, namespace, grid) == (False, False)
    # The same name takes another fleet now, and shows none of the old subscriptions.
    (tmp_path / "again").mkdir()
    again = start_forewarn(tmp_path / "again", fleet="vms:\n  - name: b1\n", extra=["--store", url])
    try:
        assert [vm["name"] for vm in again.control.get("/vms").json()["vms"]] == ["b1"]
        assert again.control.get("/eventgrid/subscriptions").json()["subscriptions"] == []
    finally:
        again.stop()
        _forewarn("store", "delete", "--store", url, "--yes")


def test_a_sqlite_store_is_not_deleted_by_the_command(tmp_path: Path) -> None:
    ran = _forewarn("store", "delete", "--store", f"sqlite:///{tmp_path}/x.sqlite3", "--yes")
    assert ran.returncode == 2
    assert "a SQLite store is its file" in ran.stderr
    assert "Traceback" not in ran.stderr


def test_it_asks_before_deleting_and_a_no_keeps_everything() -> None:
    postgres = require_postgres()
    url = f"{postgres}?namespace=delete_{uuid.uuid4().hex[:12]}"
    ran = subprocess.run(
        [sys.executable, "-m", "forewarn", "store", "delete", "--store", url],
        input="n\n", capture_output=True, text=True, timeout=60, check=False,
        env={k: v for k, v in clean_environment().items() if k != "FOREWARN_STORE"},
    )  # fmt: skip
    assert ran.returncode == 1
    assert "Aborted!" in ran.stderr

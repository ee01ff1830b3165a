"""``forewarn store check`` and start-up on a journal that cannot be replayed [ours].

Start-up failures are one clear line and exit status 1, never a traceback (docs/contributing:
the standards); a journal that a front-end cannot replay must say which record, and what to
do, rather than leave the fleet unstartable with no explanation.
"""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import psycopg
import pytest
from click.testing import CliRunner
from e2e_support import free_port

from forewarn.cli import main
from forewarn.commands import Approve, Restart
from forewarn.errors import ForewarnError
from forewarn.server.runner import ServeSettings
from forewarn.server.state import open_service, open_state
from forewarn.storage import open_journal

BAD = Approve("WestNO_0", ("NO-SUCH-EVENT",))


def _check(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["store", "check", *args])
    return result.exit_code, result.output


def test_a_good_sqlite_journal_is_summed_up_and_a_bad_record_is_named(
    tmp_path: Path, fleet_file: Path
) -> None:
    data = tmp_path / "data"
    service = open_service(ServeSettings(fleet=fleet_file, clock="manual", data_dir=data))
    service.execute(Restart("WestNO_0"))
    service.execute(Restart("WestNO_1"))
    assert service.journal is not None
    service.journal.close()
    status, output = _check("--data-dir", str(data))
    assert status == 0, output
    assert output.startswith("ok: 2 record(s) replayed, 2 live event(s), 3 VM(s)")
    journal = open_journal(f"sqlite:///{data / 'forewarn.sqlite3'}")
    journal.append(BAD.to_record(datetime.now(UTC)))
    journal.close()
    status, output = _check("--data-dir", str(data))
    assert status == 1
    assert "cannot replay journal record 3 (approve)" in output
    assert "Traceback" not in output


def test_a_shared_journal_is_checked_the_same_way(shared_store: str, fleet_file: Path) -> None:
    state = open_state(ServeSettings(fleet=fleet_file, clock="manual", store=shared_store))
    state.service.execute(Restart("WestNO_0"))
    assert state.replica is not None
    state.replica.journal.close()
    status, output = _check("--store", shared_store)
    assert status == 0, output
    assert "1 record(s) replayed, 1 live event(s)" in output
    assert "EventIds journal" in output
    with open_journal(shared_store) as journal:
        journal.append(BAD.to_record(datetime.now(UTC)))
    status, output = _check("--store", shared_store)
    assert status == 1
    assert "cannot replay journal record 2 (approve)" in output


def test_check_needs_exactly_one_store(tmp_path: Path) -> None:
    assert _check()[0] == 2
    assert _check("--data-dir", str(tmp_path), "--store", "memory:")[0] == 2


def test_a_front_end_on_a_journal_it_cannot_replay_stops_with_one_line(
    shared_store: str, fleet_file: Path
) -> None:
    state = open_state(ServeSettings(fleet=fleet_file, clock="manual", store=shared_store))
    assert state.replica is not None
    state.replica.journal.close()
    with open_journal(shared_store) as journal:
        journal.append(BAD.to_record(datetime.now(UTC)))
    argv = [sys.executable, "-m", "forewarn", "serve", "--store", shared_store]
    port, control = free_port(["127.0.0.1"]), free_port(["127.0.0.1"])
    argv += ["--bind", f"127.0.0.1:{port}", "--control", f"127.0.0.1:{control}"]
    argv += ["--clock", "manual"]
    finished = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert finished.returncode == 1, finished.stderr
    lines = finished.stderr.strip().splitlines()
    assert len(lines) == 1, finished.stderr
    assert "cannot replay journal record 1 (approve)" in lines[0]
    assert "forewarn store check" in lines[0]


def _damaged(shared_store: str, fleet_file: Path, statement: str) -> str:
    """A namespace of three records, damaged by ``statement`` (``%s``: the namespace)."""
    state = open_state(ServeSettings(fleet=fleet_file, clock="manual", store=shared_store))
    for vm in ("WestNO_0", "WestNO_1", "WestNO_2"):
        state.service.execute(Restart(vm))
    assert state.replica is not None
    state.replica.journal.close()
    namespace = shared_store.rpartition("namespace=")[2]
    with psycopg.connect(shared_store.partition("?")[0], autocommit=True) as conn:
        conn.execute(statement, [namespace])
    return shared_store


@pytest.mark.parametrize(
    ("statement", "says"),
    [
        (
            "DELETE FROM forewarn_records WHERE namespace = %s AND sequence = 2",
            "cannot replay journal record 2: it is missing (the next record is 3)",
        ),
        (
            "UPDATE forewarn_records SET body = json_build_object('op', 'restart', 'at', "
            "body->>'at', 'vm', 5) WHERE namespace = %s AND sequence = 2",
            "cannot replay journal record 2 (restart): 'vm' is 5, not a string",
        ),
        (
            "UPDATE forewarn_records SET body = '[]'::json WHERE namespace = %s AND sequence = 2",
            "cannot replay journal record 2: its body is a JSON array, not an object",
        ),
        (
            "UPDATE forewarn_metadata SET value = 'x' WHERE namespace = %s AND key = 'seed'",
            "holds damaged metadata: seed is 'x', not an integer",
        ),
        (
            "DELETE FROM forewarn_metadata WHERE namespace = %s AND key = 'seed'",
            "holds damaged metadata: seed is missing; keep the store for inspection",
        ),
    ],
)
def test_a_damaged_shared_journal_is_refused_alike_by_start_up_and_the_check(
    shared_store: str, fleet_file: Path, statement: str, says: str
) -> None:
    """Issue text: with a record deleted, the check named one record and start-up another;
    now both replay through one function and say the same line."""
    store = _damaged(shared_store, fleet_file, statement)
    status, output = _check("--store", store)
    assert status == 1
    (line,) = output.strip().splitlines()
    assert says in line, line
    with pytest.raises(ForewarnError) as refused:
        open_state(ServeSettings(fleet=fleet_file, clock="manual", store=store))
    assert line == f"Error: {refused.value}"


def test_checking_a_directory_without_a_journal_creates_none(tmp_path: Path) -> None:
    """``store check`` reads only: a data directory with no journal in it stays empty."""
    status, output = _check("--data-dir", str(tmp_path))
    assert status == 1
    assert "holds no fleet: there is no journal there" in output
    assert list(tmp_path.iterdir()) == []

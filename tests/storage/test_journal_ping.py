"""``Journal.ping``: whether the store can be used now, for ``GET /healthz`` [ours: the route
is forewarn's own, docs/control.md "Health"]. Every backend answers it without changing what
it holds; a closed journal refuses it as every other call; a SQLite file that its path no
longer names, or that its user can no longer read and write, is as unusable as a database
server gone away, since a restart could not open it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import warnings
from pathlib import Path

import pytest

from forewarn.storage import (
    Journal,
    JournalClosedError,
    SqliteJournal,
    StoreFullError,
    StoreUnavailableError,
    sqlite,
)

from .conftest import Store


def test_ping_changes_nothing(store: Store, journal: Journal) -> None:
    journal.append({"n": 1})
    journal.set_metadata("k", "v")
    journal.ping()
    journal.ping()
    assert list(journal.records()) == [(1, {"n": 1})]
    assert journal.metadata() == {"k": "v"}
    assert journal.last_sequence() == 1


def test_a_closed_journal_refuses_ping(journal: Journal) -> None:
    journal.close()
    with pytest.raises(JournalClosedError):
        journal.ping()


@pytest.fixture
def sqlite_journal(tmp_path: Path) -> SqliteJournal:
    journal = SqliteJournal(tmp_path / "forewarn.sqlite3")
    journal.append({"n": 1})
    return journal


def test_a_sqlite_file_moved_away_fails_ping_and_passes_once_back(
    sqlite_journal: SqliteJournal, tmp_path: Path
) -> None:
    path = Path(sqlite_journal.path)
    path.rename(tmp_path / "elsewhere.sqlite3")
    with pytest.raises(StoreUnavailableError, match="is gone"):
        sqlite_journal.ping()
    (tmp_path / "elsewhere.sqlite3").rename(path)
    sqlite_journal.ping()
    sqlite_journal.close()


def test_a_sqlite_file_replaced_by_another_fails_ping(
    sqlite_journal: SqliteJournal, tmp_path: Path
) -> None:
    """A data directory restored from a backup under a running server, say."""
    path = Path(sqlite_journal.path)
    shutil.copy(path, tmp_path / "copy.sqlite3")
    os.replace(tmp_path / "copy.sqlite3", path)
    with pytest.raises(StoreUnavailableError, match="replaced"):
        sqlite_journal.ping()
    sqlite_journal.close()


def _unreadable_file_fails_ping(scratch: Path) -> int:
    """In a child process made unprivileged: 0 when ping refuses the file it made unusable."""
    path = scratch / "forewarn.sqlite3"
    journal = SqliteJournal(path)
    journal.ping()
    path.chmod(0)
    try:
        journal.ping()
    except StoreUnavailableError as exc:
        return 0 if "no longer readable and writable" in str(exc) else 2
    return 1


def test_a_sqlite_file_made_unreadable_fails_ping() -> None:
    """As forewarn runs in its container: a user whom file modes bind (root is not bound, so
    a forked child drops to nobody first; forked, it needs nothing of the file system)."""
    scratch = Path(tempfile.mkdtemp(prefix="forewarn-ping-"))
    try:
        scratch.chmod(0o777)  # the unprivileged child makes its journal in it
        with SqliteJournal(scratch / "usable.sqlite3") as usable:
            usable.ping()  # the control: the same checks pass on a file its user can use
        with warnings.catch_warnings():
            # Python 3.12 warns of fork() beside other threads; the child only runs SQLite
            # and system calls of its own, then _exit()s.
            warnings.simplefilter("ignore", DeprecationWarning)
            child = os.fork()
        if child == 0:  # pragma: no cover - the child's outcome is its exit status
            status = 3
            try:
                if os.geteuid() == 0:
                    os.setgroups([])
                    os.setgid(65534)
                    os.setuid(65534)
                status = _unreadable_file_fails_ping(scratch)
            finally:
                os._exit(status)
        _, status = os.waitpid(child, 0)
    finally:
        shutil.rmtree(scratch)
    assert os.waitstatus_to_exitcode(status) == 0, "ping passed on a file it cannot use"


class _Room:
    """What ``os.statvfs`` says of a file system with ``free`` bytes left to a user."""

    def __init__(self, free: int) -> None:
        self.f_frsize = 512
        self.f_bavail = free // 512


@pytest.mark.parametrize(
    ("free", "refused"),
    [(sqlite.MIN_FREE_BYTES, False), (sqlite.MIN_FREE_BYTES - 512, True), (0, True)],
)
def test_a_sqlite_file_system_without_room_for_a_change_fails_ping(
    sqlite_journal: SqliteJournal, monkeypatch: pytest.MonkeyPatch, free: int, refused: bool
) -> None:
    """docs/control.md, "Health": readiness answers 503 when "a SQLite journal's file system
    is full", before a change is tried. Full means less than ``MIN_FREE_BYTES`` left (a few
    pages of the file and of its write-ahead log): exactly that much is still room. The
    refusal says where and how much is left, counted in fragments of ``f_frsize`` bytes."""
    folder = os.path.dirname(os.path.abspath(sqlite_journal.path))
    real = os.statvfs

    def statvfs(path: str) -> object:
        return _Room(free) if path == folder else real(path)

    monkeypatch.setattr(os, "statvfs", statvfs)
    if not refused:
        sqlite_journal.ping()
    else:
        with pytest.raises(StoreFullError) as raised:
            sqlite_journal.ping()
        assert str(raised.value) == (
            f"SQLite journal {sqlite_journal.path}: its file system has {free} bytes left, "
            "too few to append a change"
        )
    sqlite_journal.close()

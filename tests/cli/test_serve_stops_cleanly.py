"""``forewarn serve`` leaves nothing behind that it opened: a start that fails after its
journal opened closes the journal (no SQLite write-ahead log, no front-end listed in a shared
namespace) and is one line with exit status 1; a clean stop (SIGTERM, SIGINT) removes the
control API's token file while it holds this server's token, and never another server's
(docs/security.md: the token is written where the CLI finds it).

In process for speed (:func:`forewarn.server.runner.serve` entered and left), then through
real ``forewarn serve`` processes as users run it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import uuid
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import psycopg
import pytest
from e2e_support import free_port, namespace_for_test, start_up_lines
from postgres_support import require_postgres

from forewarn.control_token import token_file
from forewarn.server.runner import ServeSettings, serve

LOOPBACK = ["127.0.0.1"]


@pytest.fixture(autouse=True)
def _forewarn_logger_kept() -> Iterator[None]:
    """``serve`` routes the ``forewarn`` loggers to standard error; put them back after."""
    logger = logging.getLogger("forewarn")
    handlers, level, propagate = logger.handlers[:], logger.level, logger.propagate
    yield
    logger.handlers[:], logger.level, logger.propagate = handlers, level, propagate


@pytest.fixture
def runtime(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("FOREWARN_RUNTIME_DIR", str(tmp_path / "runtime"))
    return tmp_path / "runtime"


def _open_under(directory: Path) -> list[str]:
    """The files under ``directory`` this process holds open."""
    held = []
    for name in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            continue
        if target.startswith(str(directory)):
            held.append(target)
    return held


def _connections_to(port: int) -> set[int]:
    """The inodes of this process's TCP sockets connected to ``port`` (on any address)."""
    ours = set()
    for name in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            target = os.readlink(f"/proc/self/fd/{name}")
            if target.startswith("socket:["):
                ours.add(int(target[8:-1]))
    connected = set()
    for table in ("/proc/self/net/tcp", "/proc/self/net/tcp6"):
        with contextlib.suppress(OSError), open(table) as rows:
            for row in list(rows)[1:]:
                fields = row.split()
                if int(fields[2].rsplit(":", 1)[1], 16) == port and int(fields[9]) in ours:
                    connected.add(int(fields[9]))
    return connected


def _logs_behind(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(("-wal", "-shm")))


def _serve_until_up_then_stop(settings: ServeSettings) -> list[str]:
    """Run ``serve`` in this process until its start-up lines are out, then stop it as
    SIGTERM does (its stop event); the lines."""
    lines: list[str] = []

    async def main() -> None:
        stop = asyncio.Event()
        task = asyncio.create_task(serve(settings, announce=lines.append, stop=stop))
        for _ in range(400):
            if lines or task.done():
                break
            await asyncio.sleep(0.025)
        stop.set()
        await task

    asyncio.run(main())
    return lines


def _settings(**given: object) -> ServeSettings:
    port, control = free_port(LOOPBACK), free_port(LOOPBACK)
    return ServeSettings(**{"port": port, "control_port": control, "clock": "manual", **given})  # type: ignore[arg-type]


def test_a_start_refused_its_control_port_opens_nothing(tmp_path: Path, runtime: Path) -> None:
    """The control address is claimed before anything else: a second serve there (the usual
    mistake) stops before it opens a store or binds a VM's address."""
    data = tmp_path / "data"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        settings = _settings(data_dir=data, control_port=taken.getsockname()[1])
        with pytest.raises(OSError, match=r"the control API cannot listen on 127\.0\.0\.1"):
            _serve_until_up_then_stop(settings)
    assert not data.exists() or list(data.iterdir()) == [], "a store was opened"
    assert not runtime.exists() or list(runtime.iterdir()) == [], "no token was written"


def test_a_start_refused_after_the_journal_opened_closes_it(tmp_path: Path, runtime: Path) -> None:
    data = tmp_path / "data"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        settings = _settings(data_dir=data, port=taken.getsockname()[1])
        with pytest.raises(OSError, match="the VM-facing endpoint cannot listen"):
            _serve_until_up_then_stop(settings)
    assert (data / "forewarn.sqlite3").exists(), "the journal was opened before the refusal"
    assert _open_under(data) == []
    assert _logs_behind(data) == []
    # Event Grid's file, made by this start, is gone again: the directory as it was found
    assert sorted(p.name for p in data.iterdir()) == ["forewarn.sqlite3"]
    assert not runtime.exists() or list(runtime.iterdir()) == [], "no token was written"


def test_a_start_refused_its_vm_port_closes_the_journal_and_keeps_event_grid_s_state(
    tmp_path: Path, runtime: Path
) -> None:
    """A data directory that already served keeps its Event Grid file when a later start
    fails (only what the failed start made is removed)."""
    data = tmp_path / "data"
    _serve_until_up_then_stop(_settings(data_dir=data))
    assert sorted(p.name for p in data.iterdir()) == ["eventgrid.sqlite3", "forewarn.sqlite3"]
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        settings = _settings(data_dir=data, port=taken.getsockname()[1])
        with pytest.raises(OSError, match="the VM-facing endpoint cannot listen"):
            _serve_until_up_then_stop(settings)
    assert _open_under(data) == []
    assert _logs_behind(data) == []
    assert sorted(p.name for p in data.iterdir()) == ["eventgrid.sqlite3", "forewarn.sqlite3"]


def test_a_clean_stop_closes_everything_and_removes_its_token(
    tmp_path: Path, runtime: Path
) -> None:
    data = tmp_path / "data"
    settings = _settings(data_dir=data)
    lines = _serve_until_up_then_stop(settings)
    assert any(line.startswith("  control: http://127.0.0.1:") for line in lines), lines
    assert _open_under(data) == []
    assert _logs_behind(data) == []
    assert not token_file("127.0.0.1", settings.control_port).exists()


def test_a_start_refused_after_joining_a_shared_namespace_leaves_its_list(
    tmp_path: Path, runtime: Path
) -> None:
    """A front-end joins the namespace's list of front-ends before it listens (writers wait
    for those listed: docs/scale-out.md); one whose start then fails leaves the list at once
    and closes its connections."""
    server = require_postgres()
    namespace = f"failed_start_{uuid.uuid4().hex[:10]}"
    store = f"{server}?namespace={namespace}"
    try:
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            settings = _settings(store=store, control_port=taken.getsockname()[1])
            with pytest.raises(OSError, match="the control API cannot listen"):
                _serve_until_up_then_stop(settings)
        with psycopg.connect(server, autocommit=True) as conn:
            listed = conn.execute(
                "SELECT count(*) FROM public.forewarn_front_ends WHERE namespace = %s",
                [namespace],
            ).fetchone()
            assert listed == (0,)
        assert _connections_to(5432) == set(), "a connection of the failed start is open"
    finally:
        with psycopg.connect(server, autocommit=True) as conn:
            conn.execute("DELETE FROM public.forewarn_namespaces WHERE namespace = %s", [namespace])


# -- through real processes ----------------------------------------------------------------


def _environment(runtime: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("FOREWARN_TOKEN", "FOREWARN_CONTROL")}
    env["FOREWARN_RUNTIME_DIR"] = str(runtime)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _serve(*args: str) -> list[str]:
    return [sys.executable, "-m", "forewarn", "serve", "--clock", "manual", *args]


def test_a_refused_serve_process_leaves_no_write_ahead_log(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        argv = _serve("--data-dir", str(data), "--bind", f"127.0.0.1:{taken.getsockname()[1]}")
        argv += ["--control", f"127.0.0.1:{free_port(LOOPBACK)}"]
        finished = subprocess.run(
            argv, capture_output=True, text=True, timeout=60, env=_environment(tmp_path / "rt")
        )
    assert finished.returncode == 1, finished.stderr
    assert len(finished.stderr.strip().splitlines()) == 1, finished.stderr
    assert "the VM-facing endpoint cannot listen" in finished.stderr
    assert sorted(p.name for p in data.iterdir()) == ["forewarn.sqlite3"]


def test_a_damaged_event_grid_store_is_one_line_and_opens_no_journal(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "eventgrid.sqlite3").write_bytes(b"not a database, " * 64)
    argv = _serve("--data-dir", str(data), "--bind", f"127.0.0.1:{free_port(LOOPBACK)}")
    argv += ["--control", f"127.0.0.1:{free_port(LOOPBACK)}"]
    finished = subprocess.run(
        argv, capture_output=True, text=True, timeout=60, env=_environment(tmp_path / "rt")
    )
    assert finished.returncode == 1, finished.stderr
    lines = finished.stderr.strip().splitlines()
    assert len(lines) == 1, finished.stderr
    assert "Event Grid's state" in lines[0]
    assert str(data / "eventgrid.sqlite3") in lines[0]
    assert sorted(p.name for p in data.iterdir()) == ["eventgrid.sqlite3"]


@pytest.mark.parametrize(
    ("how", "removed"),
    [(signal.SIGTERM, True), (signal.SIGINT, True), (signal.SIGKILL, False)],
    ids=["SIGTERM", "SIGINT", "SIGKILL"],
)
def test_a_clean_stop_removes_the_token_file_a_killed_server_cannot(
    tmp_path: Path, how: signal.Signals, removed: bool
) -> None:
    runtime = tmp_path / "runtime"
    control = free_port(LOOPBACK)
    argv = _serve("--bind", f"127.0.0.1:{free_port(LOOPBACK)}", "--control", f"127.0.0.1:{control}")
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        process = subprocess.Popen(argv, stdout=out, stderr=out, env=_environment(runtime))
    try:
        start_up_lines(log, process, "control: http")
        path = runtime / f"control-127.0.0.1-{control}.token"
        assert path.exists()
        process.send_signal(how)
        status = process.wait(15)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)
    assert status == (0 if removed else -signal.SIGKILL), log.read_text()
    assert path.exists() is not removed


def test_the_first_serve_s_stop_keeps_the_second_serve_s_token(tmp_path: Path) -> None:
    """Two servers at the same control address in two network namespaces share the user's
    token file (one runtime directory): the one started last wrote it, and the other's stop
    leaves it for the CLI to reach the server still running."""
    runtime = tmp_path / "runtime"
    port, control = 18080, 18081  # in namespaces of this test's own: nothing else is there
    path = runtime / f"control-127.0.0.1-{control}.token"
    with namespace_for_test() as first_ns, namespace_for_test() as second_ns:
        processes = []
        try:
            for name, namespace in (("first", first_ns), ("second", second_ns)):
                log = tmp_path / f"{name}.log"
                argv = namespace.argv(
                    *_serve("--bind", f"127.0.0.1:{port}", "--control", f"127.0.0.1:{control}")
                )
                with log.open("wb") as out:
                    process = subprocess.Popen(
                        argv, stdout=out, stderr=out, env=_environment(runtime)
                    )
                processes.append(process)
                text = start_up_lines(log, process, "control: http")
                token = text.split("?token=")[1].split()[0]
                assert path.read_text().strip() == token
            first, second = processes
            first.send_signal(signal.SIGTERM)
            assert first.wait(15) == 0
            assert path.read_text().strip() == token, "the first's stop removed the second's token"
            second.send_signal(signal.SIGTERM)
            assert second.wait(15) == 0
            assert not path.exists()
        finally:
            for process in processes:
                if process.poll() is None:
                    process.kill()
                    process.wait(10)


def test_background_parts_all_stop_and_a_failed_one_is_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from forewarn.server.background import running

    ended: list[str] = []

    def part(name: str, *, fails: bool = False) -> Callable[[asyncio.Event], Awaitable[None]]:
        async def work(stop: asyncio.Event) -> None:
            await stop.wait()
            ended.append(name)
            if fails:
                raise RuntimeError("broken")

        return work

    async def main() -> None:
        stop = asyncio.Event()
        async with contextlib.AsyncExitStack() as stack:
            await stack.enter_async_context(running("first", part("first"), stop))
            await stack.enter_async_context(running("second", part("second", fails=True), stop))
            await stack.enter_async_context(running("third", part("third"), stop))
            await asyncio.sleep(0)
        assert stop.is_set()

    logging.getLogger("forewarn").propagate = True
    with caplog.at_level(logging.ERROR, logger="forewarn.server"):
        asyncio.run(main())
    assert sorted(ended) == ["first", "second", "third"]
    # This loop's records only: a thread another test left stopping may log meanwhile.
    here = threading.get_ident()
    # Each logged record once, should a handler have been left on a logger twice by another
    # test of this worker: once logged is one record, however many handlers saw it.
    records = {id(r): r for r in caplog.records}.values()
    failures = [r.getMessage() for r in records if r.name == "forewarn.server" and r.thread == here]
    assert failures == ["second failed: RuntimeError: broken"]

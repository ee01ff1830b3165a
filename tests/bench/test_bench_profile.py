"""Where a server's CPU goes (bench/profile.py): py-spy's raw samples put in layers, the
report's table of them, and a real py-spy run against a real server process."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from machine_support import require_py_spy, unavailable

from bench.profile import EVENT_LOOP, SYSTEM_CALLS, layer_of, parse_raw, summarise
from bench.realworkload import find_py_spy
from bench.report import profile_table

LOOP = "run_forever (loop.c:33397);uv_run (core.c:464)"
RAW = f"""\
_run_code (<frozen runpy>:88);{LOOP};epoll_pwait (libc.so.6) 50
_run_code (<frozen runpy>:88);{LOOP};ImdsProtocol.data_received (forewarn/server/http/_connection.py:130);write (libc.so.6) 20
_run_code (<frozen runpy>:88);{LOOP};uv__close_nocancel (core.c:619);syscall (libc.so.6) 10
{LOOP};ImdsProtocol._answer (forewarn/server/http/_connection.py:270);ImdsEndpoint.answer (forewarn/server/imds.py:266) 4
{LOOP};ImdsEndpoint.answer (forewarn/server/imds.py:276);ScheduledEventsService.request_from (forewarn/service.py:371);Py_DECREF (object.h:537) 3
{LOOP};ScheduledEventsService.request_from (forewarn/service.py:371);__init__ (<string>:2) 1
{LOOP};Platform.touch (forewarn/domain/platform.py:184) 2
{LOOP};UVBaseTransport__init_protocol (loop.c:100636);WeakValueDictionary.__setitem__ (weakref.py:167) 6
{LOOP};Loop__on_idle (loop.c:19387) 4
"""


def test_a_sample_belongs_to_the_layer_of_its_innermost_frames() -> None:
    stacks = parse_raw(RAW.splitlines())
    layers = [layer_of(frames) for frames, _ in stacks]
    assert layers == [
        "idle",  # the loop's wait: time asleep, not CPU
        SYSTEM_CALLS,  # a write made by forewarn's code is still the kernel's work
        SYSTEM_CALLS,
        "endpoint (server/imds.py)",
        "service (service.py)",  # C code called from a layer is that layer's
        "service (service.py)",  # a dataclass's generated __init__ is its caller's
        "domain (domain/)",
        EVENT_LOOP,  # the standard library, called by uvloop
        EVENT_LOOP,  # uvloop's own C code, no Python frame of anyone's above it
    ]


def test_shares_are_of_the_busy_samples_and_the_idle_ones_are_counted_apart() -> None:
    summary = summarise(parse_raw(RAW.splitlines()))
    assert (summary["samples"], summary["idle_samples"]) == (50, 50)
    assert summary["layers"][SYSTEM_CALLS] == pytest.approx(30 / 50)
    assert summary["layers"][EVENT_LOOP] == pytest.approx(10 / 50)
    assert summary["layers"]["service (service.py)"] == pytest.approx(4 / 50)
    assert sum(summary["layers"].values()) == pytest.approx(1.0)
    assert summary["top_frames"][0] == ["write (libc.so.6)", pytest.approx(20 / 50)]
    assert "epoll_pwait (libc.so.6)" not in [frame for frame, _ in summary["top_frames"]]


def test_a_line_that_is_not_py_spys_is_refused() -> None:
    with pytest.raises(ValueError, match="raw output"):
        parse_raw(["main (x.py:1);work (x.py:2)"])
    assert summarise(parse_raw(["", "wait (y.py:3);epoll_wait (libc.so.6) 7"])) == {
        "samples": 0,
        "idle_samples": 7,
        "layers": {},
        "top_frames": [],
    }


def _summary(server: str, mode: str, cpu: float) -> dict[str, object]:
    value = {"median": cpu, "min": cpu, "max": cpu}
    return {"server": server, "mode": mode, "server_cpu_us_per_poll": value}


def test_the_table_gives_each_layer_its_share_of_the_measured_cpu_per_poll() -> None:
    real = {
        "summary": [
            _summary("forewarn", "new-connection", 40.0),
            _summary("python-floor", "new-connection", 30.0),
        ],
        "profiles": {
            "forewarn": {
                "new-connection": {
                    "samples": 1000,
                    "idle_samples": 10,
                    "layers": {SYSTEM_CALLS: 0.75, "service (service.py)": 0.25},
                    "top_frames": [],
                }
            },
            "python-floor": {"new-connection": {"error": "py-spy exit 1: Permission denied"}},
        },
    }
    lines = profile_table(real)
    assert "  profile of python-floor, new-connection: py-spy exit 1: Permission denied" in lines
    assert any(line.split() == ["system", "calls", "30.0", "us"] for line in lines)
    assert any(line.split() == ["service", "(service.py)", "10.0", "us"] for line in lines)
    assert profile_table({"profiles": {"skipped": "py-spy is not installed"}}) == [
        "  profile skipped: py-spy is not installed"
    ]
    assert profile_table({"profiles": None}) == []


def test_py_spy_profiles_a_running_python_process_into_layers(tmp_path: Path) -> None:
    """The tool itself, on a real process: a loop in a file named like forewarn's service
    module, calling into the C library, is found in the service's layer and the system
    calls'. py-spy reads another process's memory, which needs ptrace rights."""
    py_spy = require_py_spy()
    module = tmp_path / "forewarn" / "service.py"
    module.parent.mkdir()
    (module.parent / "__init__.py").write_text("", encoding="utf-8")
    module.write_text(
        "import os, time\n"
        "def busy():\n"
        "    end = time.monotonic() + 20\n"
        "    while time.monotonic() < end:\n"
        "        sum(range(2000))\n"
        "        os.getppid()\n"
        "busy()\n",
        encoding="utf-8",
    )
    # run from its folder as a package, so py-spy names it by its package, as forewarn's
    target = subprocess.Popen([sys.executable, "-m", "forewarn.service"], cwd=tmp_path)
    try:
        time.sleep(0.3)
        out = tmp_path / "raw.txt"
        argv = [py_spy, "record", "--pid", str(target.pid), "--duration", "1", "--rate", "200"]
        argv += ["--native", "--format", "raw", "--output", str(out)]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
        if done.returncode != 0 and "ermission" in done.stderr:
            unavailable(f"py-spy may not read other processes here: {done.stderr.strip()}")
        assert done.returncode == 0, done.stderr
        with out.open(encoding="utf-8") as lines:
            summary = summarise(parse_raw(lines))
    finally:
        target.kill()
        target.wait()
    assert summary["samples"] > 50
    assert summary["layers"]["service (service.py)"] > 0.2
    assert set(summary["layers"]) <= {"service (service.py)", SYSTEM_CALLS, EVENT_LOOP}


def test_py_spy_is_found_beside_the_interpreter_when_not_on_the_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    beside = Path(sys.executable).parent / "py-spy"
    expected = str(beside) if os.access(beside, os.X_OK) else None
    if expected is None and shutil.which("py-spy", path="/usr/sbin:/usr/local/sbin:/sbin"):
        pytest.skip("py-spy is in a system folder the bench also looks in")
    assert find_py_spy() == expected

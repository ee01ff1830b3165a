"""The server-memory scenario, run small: one wildcard listener in a private namespace.

Its figure at a few hundred VMs is too small to quote (the target is read at 100,000 VMs by
``python -m bench --only memory``); what is asserted is that every VM was polled and answered,
that the figure is the documented difference, and that the namespace never outlives the run.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from bench_smoke import run_smoke
from machine_support import require, unavailable

from bench.memory import (
    NamespaceUnavailableError,
    namespace_problem,
    private_namespace,
    process_memory,
    run_memory,
)

ROOT = Path(__file__).resolve().parents[2]


def _needs_namespaces() -> None:
    require(namespace_problem())


def _namespaces() -> list[str]:
    listed = subprocess.run(
        ["ip", "netns", "list"], capture_output=True, text=True, timeout=10, check=True
    )
    return [line.split()[0] for line in listed.stdout.splitlines() if line.strip()]


def test_process_memory_reads_this_process() -> None:
    if not Path(f"/proc/{os.getpid()}/status").exists():
        pytest.skip("no /proc here")
    rss, hwm = process_memory(os.getpid())
    assert 0 < rss <= hwm


def test_a_fleet_of_one_tells_no_cost_per_vm(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="at least 2 VMs"):
        run_memory(tmp_path, 1)


@pytest.mark.netns
def test_the_namespace_is_removed_even_when_the_run_fails() -> None:
    _needs_namespaces()
    seen: list[str] = []

    def fail_inside() -> None:
        with private_namespace() as name:
            seen.append(name)
            assert name in _namespaces()
            raise RuntimeError("broke")

    with pytest.raises(RuntimeError, match="broke"):
        fail_inside()
    assert seen
    assert seen[0] not in _namespaces()


@pytest.mark.e2e
@pytest.mark.netns
def test_every_vm_polls_one_wildcard_listener_and_its_memory_is_read(tmp_path: Path) -> None:
    _needs_namespaces()
    try:
        result = run_memory(tmp_path, 300)
    except NamespaceUnavailableError as exc:
        unavailable(str(exc))
    assert (result.one.vms, result.one.polled_ok) == (1, 1)
    assert (result.fleet.vms, result.fleet.polled_ok) == (300, 300)
    for served in (result.one, result.fleet):
        assert 0 < served.rss_bytes <= served.hwm_bytes
        assert served.start_seconds > 0
    assert result.bytes_per_vm == (result.fleet.rss_bytes - result.one.rss_bytes) / 299
    ours = f"forewarn-bench-{os.getpid()}-"
    assert not [name for name in _namespaces() if name.startswith(ours)]


@pytest.mark.e2e
@pytest.mark.netns
def test_entry_command_reports_the_memory_target(tmp_path: Path) -> None:
    _needs_namespaces()
    out = tmp_path / "results.json"
    done = run_smoke("memory", out, "--memory-vms", "200")
    assert done.returncode == 0, done.stderr
    assert "Server memory after every VM polled once" in done.stdout
    results = json.loads(out.read_text(encoding="utf-8"))
    assert results["memory"]["fleet"]["polled_ok"] == 200
    names = [target["name"] for target in results["targets"]]
    assert "server RSS per polled VM at 200 VMs, one listener" in names

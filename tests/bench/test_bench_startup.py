"""The start-up scenario, run small: a fleet served, and a fleet file refused.

Its figures at a few thousand VMs are not quoted (the targets are read at 100,000 and
1,000,000 VMs by ``python -m bench --only startup``); what is asserted is that every sampled
VM, the last one included, was answered at its own address, and that a fleet the server
refuses is timed until the server exits, with its reason kept.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from bench_smoke import run_smoke
from machine_support import require

from bench.fleetgen import address, addresses
from bench.memory import namespace_problem, private_namespace
from bench.profile import parse_raw
from bench.startup import (
    SAMPLE,
    _frameless_named,
    measure_startup,
    module_of,
    sample_indexes,
    summarise_startup,
)

ROOT = Path(__file__).resolve().parents[2]


def test_the_sample_spans_the_fleet_from_its_first_vm_to_its_last() -> None:
    assert sample_indexes(3) == [0, 1, 2]
    spread = sample_indexes(100_000)
    assert len(spread) == SAMPLE
    assert (spread[0], spread[-1]) == (0, 99_999)
    assert spread == sorted(set(spread))


def test_a_vms_address_is_the_one_the_fleet_file_gives_it() -> None:
    """The prober asks each sampled VM at the address ``fleet_yaml`` wrote for it, made
    without listing the million before it."""
    listed = list(addresses(1000))
    assert [address(index) for index in range(1000)] == listed
    assert address(253) == "127.1.0.254"
    assert address(254) == "127.1.1.1"


def test_a_start_up_profile_counts_each_module_once_per_sample_it_is_in() -> None:
    """Inclusive shares: the fleet's parse (forewarn's loader calling YAML) counts for both
    the loader and the YAML library; a sample from before the first Python frame counts for
    no module."""
    raw = [
        "<module> (forewarn/__main__.py:1);load_fleet (forewarn/config/fleet.py:9);"
        "construct (yaml/constructor.py:4);construct (yaml/constructor.py:5) 6\n",
        "<module> (forewarn/__main__.py:1);_find_and_load (<frozen importlib._bootstrap>:1) 3\n",
        " 1\n",
    ]
    profile = summarise_startup(parse_raw(_frameless_named(raw)))
    assert profile["samples"] == 10
    assert dict(profile["inclusive"]) == {
        "forewarn/__main__.py": 0.9,
        "forewarn/config/fleet.py": 0.6,
        "yaml/": 0.6,
        "imports (importlib)": 0.3,
    }
    assert profile["top_frames"][0] == ["construct (yaml/constructor.py:5)", 0.6]
    assert module_of("write (libc.so.6)") is None
    assert module_of("ip_address (ipaddress.py:28)") == "ipaddress.py"


@pytest.mark.e2e
@pytest.mark.netns
def test_a_fleet_file_the_server_refuses_is_timed_until_it_exits_saying_why(
    tmp_path: Path,
) -> None:
    require(namespace_problem())
    with private_namespace() as namespace:
        result = measure_startup(
            namespace, tmp_path, 1, 30.0, fleet_text="vms:\n  - {name: 'not a name!'}\n"
        )
    assert result.outcome == "refused"
    assert result.answered_vms == 0
    assert "fleet.yaml" in result.message
    assert 0 < result.seconds < result.give_up_seconds


@pytest.mark.e2e
@pytest.mark.netns
def test_entry_command_times_both_start_ups(tmp_path: Path) -> None:
    require(namespace_problem())
    out = tmp_path / "results.json"
    done = run_smoke("startup", out, "--startup-vms", "100", "--startup-largest-vms", "600")
    assert done.returncode == 0, done.stderr
    assert "Start-up, one wildcard listener, from the process start: 100 VMs answered" in (
        done.stdout
    )
    results = json.loads(out.read_text(encoding="utf-8"))
    for key, vms in (("served", 100), ("largest", 600)):
        figure = results["startup"][key]
        assert (figure["vms"], figure["outcome"]) == (vms, "served")
        assert figure["answered_vms"] == figure["sampled_vms"] == min(vms, SAMPLE)
        assert 0 < figure["announced_seconds"] <= figure["seconds"] + 0.1
    profile = results["startup"]["profile"]
    assert profile.get("samples", 0) > 0 or "skipped" in profile, profile
    names = [target["name"] for target in results["targets"]]
    assert any(name.startswith("start-up, 100 VMs on one listener") for name in names)
    assert any(name.startswith("start-up, a 600-VM fleet file") for name in names)

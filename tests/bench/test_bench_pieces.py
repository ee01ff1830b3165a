"""The pure pieces of the benchmark suite: fleets, wrk's figures, percentiles, targets."""

from __future__ import annotations

import ipaddress

import pytest

from bench.fleetgen import addresses, fleet_vms, fleet_yaml
from bench.polling import percentile
from bench.report import Target, table, targets
from bench.wrk import parse_output
from forewarn.config.fleet import parse_fleet

WRK_OUTPUT = """\
Running 1s test @ http://127.0.0.1:1/metadata/scheduledevents?api-version=2020-07-01
  1 threads and 50 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency   485.27us  198.33us   3.85ms   78.80%
WRK_JSON {"requests":100000,"duration_us":2000000,"bytes":1,"connect_errors":0,"read_errors":0,"write_errors":0,"status_errors":0,"timeouts":0,"p50_us":466,"p90_us":708,"p99_us":1010,"max_us":3850}
Requests/sec:  50000.00
"""


def test_generated_fleet_is_a_valid_fleet_file_with_one_address_per_vm() -> None:
    """README.md, "Several VMs": "Each VM of a fleet file gets its own address; forewarn
    listens on each one". 600 VMs run past two .255 boundaries, which are skipped."""
    fleet = parse_fleet(fleet_yaml(600), "generated")
    assert len(fleet.vms) == 600
    found = [vm.address for vm in fleet.vms]
    assert len(set(found)) == 600
    for address in found:
        assert address is not None
        parsed = ipaddress.IPv4Address(address)
        assert parsed in ipaddress.ip_network("127.0.0.0/8")
        assert address.split(".")[-1] not in ("0", "255")
    assert [vm.address for vm in fleet_vms(600)] == found


def test_addresses_refuse_a_fleet_larger_than_loopback() -> None:
    with pytest.raises(ValueError, match="VMs"):
        list(addresses(-1))
    assert list(addresses(0)) == []


def test_wrk_figures_are_read_from_its_json_line() -> None:
    result = parse_output(WRK_OUTPUT)
    assert result.requests == 100_000
    assert result.requests_per_second == pytest.approx(50_000)
    assert result.p99_ms == pytest.approx(1.01)
    assert result.clean


def test_wrk_errors_make_a_run_unclean_and_missing_figures_are_an_error() -> None:
    failing = WRK_OUTPUT.replace('"status_errors":0', '"status_errors":3')
    assert not parse_output(failing).clean
    broken = WRK_OUTPUT.replace('"read_errors":0', '"read_errors":1')
    assert not parse_output(broken).clean
    with pytest.raises(ValueError, match="WRK_JSON"):
        parse_output("Requests/sec: 1\n")


def test_percentile_is_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 0.5) == 50.0
    assert percentile(values, 0.99) == 99.0
    assert percentile(values, 1.0) == 100.0
    assert percentile([], 0.99) == 0.0


CPU = {"forewarn_cpu_us": 10.0, "nginx_cpu_us": 5.0, "cpu_ratio": 0.5}


def test_targets_compare_each_figure_in_its_own_direction() -> None:
    results = {
        "throughput": {
            "document_bytes": 450,
            "rounds": 1,
            "duration_s": 1.0,
            "modes": [
                {"mode": "keep-alive", "ratio": 0.59, "forewarn_rps": 59.0, "nginx_rps": 100.0}
                | CPU,
                {
                    "mode": "new connection per request",
                    "ratio": 0.81,
                    "forewarn_rps": 81.0,
                    "nginx_rps": 100.0,
                }
                | CPU,
            ],
        }
    }
    found = {t.name: t for t in targets(results)}
    assert not found["throughput keep-alive, x nginx"].met
    assert found["throughput new connection per request, x nginx"].met
    assert Target("p99", 2.5, 2.0, "ms", higher_is_better=False).met is False
    assert Target("p99", 1.5, 2.0, "ms", higher_is_better=False).met is True
    text = table({**results, "targets": [t.as_dict() for t in found.values()]})
    assert "[MISS] throughput keep-alive, x nginx: 0.59x (target >= 0.60x)" in text

"""The Resource Graph benchmark runs: a VM polls while heavy queries are answered, and the
figures say how many were (never a ratio measured beside a query process that answered
none). Timing is the benchmark's to report, not this test's to assert."""

from __future__ import annotations

from bench.resourcegraph import run_resource_graph


def test_a_small_run_answers_queries_and_reports_the_p99_ratio() -> None:
    figures = run_resource_graph(events=60, vms=6, clients=1, seconds=1.0)
    assert figures["queries_answered"] >= 1
    assert figures["polls_quiet"] > 0
    assert figures["polls_loaded"] > 0
    assert figures["p99_ratio"] > 0

"""The Event Grid benchmark runs, and its campaign with a subscription delivers every change:
three per VM (Scheduled, Started, Completed), each counted by the receiver process."""

from __future__ import annotations

from bench.eventgrid import run_eventgrid


def test_a_small_run_delivers_every_change_and_reports_each_ratio() -> None:
    # 900 deliveries arrive within seconds: a minute is a stall, failed naming the count
    figures = run_eventgrid(300, rounds=1, drain_limit=60.0)
    (with_one,) = figures["with_subscription"]
    (without,) = figures["without"]
    assert with_one["delivered"] == 900
    assert without["delivered"] == 0
    assert with_one["requests"] == without["requests"] == 5 * 300
    for name in ("campaign_seconds", "campaign_loop_cpu_seconds", "cpu_per_request_us"):
        assert figures[f"{name}_ratio"] > 0

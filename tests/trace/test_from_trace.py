"""``forewarn scenario from-trace``: the scenario made from a trace, run on a fresh
platform, shows the recorded VM the same documents at the same times, EventIds aside (the
platform makes its own, and a scenario cannot name them); a trace it cannot express is one
message naming the line.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from forewarn.cli import main
from forewarn.config.fleet import parse_fleet
from forewarn.testing import MakePlatform
from forewarn.trace.format import TraceError, load_trace, parse_trace
from forewarn.trace.to_scenario import convert

from .trace_support import EXAMPLE, documents_shown, event, scenario_of, trace_bytes, without_ids

T0 = datetime(2026, 4, 20, 10, 0, 0, tzinfo=UTC)
MINUTE = timedelta(minutes=1)
NOT_BEFORE = "Mon, 20 Apr 2026 10:15:00 GMT"  # T0 + 15 min


def replayed_on_forewarn(
    data: bytes, make: MakePlatform, **options: Any
) -> tuple[list[tuple[datetime, int, list[dict[str, Any]]]], str]:
    """The trace ``data`` converted and run on a fresh platform: the documents its VM was
    shown, and the scenario's text."""
    trace = parse_trace(data, "t.trace")
    conversion = convert(trace, fleet_path="fleet.yaml", **options)
    # a serve started an hour before the trace (serve --start), which the scenario's first
    # step sets the clock from
    start = trace.documents[0].at - 60 * MINUTE
    platform = make(fleet=parse_fleet(conversion.fleet, "fleet.yaml"), start=start)
    return documents_shown(
        platform, scenario_of(conversion.scenario), conversion.vm
    ), conversion.scenario


def recorded(data: bytes) -> list[tuple[datetime, int, list[dict[str, Any]]]]:
    return [(d.at, *without_ids(d)) for d in parse_trace(data, "t.trace").documents]


def test_the_documentation_example_is_remade_exactly(make_forewarn_platform: MakePlatform) -> None:
    data = EXAMPLE.read_bytes()
    shown, text = replayed_on_forewarn(data, make_forewarn_platform)
    assert shown == recorded(data)
    assert "incarnation: 4" in text
    assert "startedFor: 5m" in text, "the live migration's recorded Started period"


def test_an_approval_the_trace_recorded_is_made_by_the_vm(
    make_forewarn_platform: MakePlatform,
) -> None:
    later = "Mon, 20 Apr 2026 10:20:00 GMT"  # T0 + 20 min
    data = trace_bytes(
        "vm0",
        [
            (T0, 1, []),
            (T0 + 2 * MINUTE, 2, [event("Scheduled", later)]),
            (T0 + 3 * MINUTE, 3, [event("Started", "")]),
            (T0 + 13 * MINUTE, 4, []),
        ],
        approvals=[
            (T0 + 3 * MINUTE - timedelta(seconds=1), ("5A1C6A9E-0A55-4D6B-9A8E-6B4B8C3B8E01",))
        ],
    )
    shown, text = replayed_on_forewarn(data, make_forewarn_platform)
    want = recorded(data)
    assert [s[1:] for s in shown] == [w[1:] for w in want]
    # started by the approval, a second before the trace's next poll saw it Started
    assert shown[2][0] == T0 + 3 * MINUTE - timedelta(seconds=1)
    assert "approved as the trace did" in text
    assert "notice: 18m" in text, "made when first shown, 18 minutes before its NotBefore"


def test_a_start_before_notbefore_with_no_recorded_approval_is_approved_then(
    make_forewarn_platform: MakePlatform,
) -> None:
    """A trace starting while an event is Scheduled: forewarn makes it before (its VM shown an
    empty document first, so the incarnations differ and are not checked)."""
    data = trace_bytes(
        "vm0",
        [
            (T0, 1, [event("Scheduled", NOT_BEFORE)]),
            (T0 + 5 * MINUTE, 2, [event("Started", "")]),
            (T0 + 15 * MINUTE, 3, []),
        ],
    )
    shown, text = replayed_on_forewarn(data, make_forewarn_platform)
    before: tuple[datetime, list[dict[str, Any]]] = (
        T0,
        [],
    )  # forewarn's VM, before the event is made at T0
    assert [(at, events) for at, _, events in shown] == [
        before,
        *[(at, e) for at, _, e in recorded(data)],
    ]
    assert "approved (by another VM, or the API)" in text
    assert "DocumentIncarnation is not checked" in text


def test_a_cancelled_event_is_cancelled(make_forewarn_platform: MakePlatform) -> None:
    """learn.microsoft.com .../scheduled-events-overview, "Canceled Events": "the scheduled
    event goes directly from EventStatus:Scheduled to being canceled"."""
    data = trace_bytes(
        "vm0",
        [
            (T0, 1, []),
            (T0 + MINUTE, 2, [event("Scheduled", "Mon, 20 Apr 2026 10:16:00 GMT")]),
            (T0 + 9 * MINUTE, 3, []),
        ],
    )
    shown, text = replayed_on_forewarn(data, make_forewarn_platform)
    assert shown == recorded(data)
    assert "the platform cancels it" in text


def test_an_event_first_seen_started_is_made_started(make_forewarn_platform: MakePlatform) -> None:
    """The overview, "Hardware Failure": an event "with EventType = Redeploy and EventStatus =
    Started"."""
    started = event("Started", "", EventType="Redeploy", EventSource="Platform",
                    Description="Virtual machine has encountered a failure.")  # fmt: skip
    data = trace_bytes("vm0", [(T0, 1, []), (T0 + MINUTE, 2, [started]), (T0 + 11 * MINUTE, 3, [])])
    shown, _ = replayed_on_forewarn(data, make_forewarn_platform)
    assert shown == recorded(data)


@pytest.mark.parametrize(
    ("documents", "message"),
    [
        (
            [(T0 + MINUTE, 1, []), (T0 + 2 * MINUTE, 2, [event("Scheduled", NOT_BEFORE)])],
            "t.trace:3: cannot be expressed on forewarn: Reboot 5A1C6A9E-0A55-4D6B-9A8E-6B4B8C3B8E01 "
            "is first shown 13m before its NotBefore, less than the 'documented' profile's minimum "
            "notice of 15m, and line 2 shows it was not there 15m before",
        ),
        (
            [(T0, 1, [event("Scheduled", NOT_BEFORE)]), (T0 + 16 * MINUTE, 1, [event("Scheduled", NOT_BEFORE)]),
             (T0 + 17 * MINUTE, 2, [event("Started", "")])],
            "t.trace:3: cannot be expressed on forewarn: event 5A1C6A9E-0A55-4D6B-9A8E-6B4B8C3B8E01 "
            "is still Scheduled at or after its NotBefore",
        ),
        (
            [(T0, 1, [event("Scheduled", NOT_BEFORE)]), (T0 + MINUTE, 2, [event("Scheduled", NOT_BEFORE, DurationInSeconds=9)])],
            "t.trace:3: cannot be expressed on forewarn: event 5A1C6A9E-0A55-4D6B-9A8E-6B4B8C3B8E01 changed in place",
        ),
        (
            [(T0, 1, [event("Started", "")]), (T0 + timedelta(seconds=3), 2, [])],
            "t.trace:3: cannot be expressed on forewarn: event 5A1C6A9E-0A55-4D6B-9A8E-6B4B8C3B8E01 "
            "was Started for 3s, less than its impact of 7s",
        ),
        (
            [(T0, 1, [event("Scheduled", NOT_BEFORE)]), (T0 + 16 * MINUTE, 2, [])],
            "t.trace:3: cannot be expressed on forewarn: event 5A1C6A9E-0A55-4D6B-9A8E-6B4B8C3B8E01 "
            "is gone, after its NotBefore, without having been shown Started",
        ),
        (
            [(T0, 1, [event("Started", ""), event("Scheduled", NOT_BEFORE, EventId="B")]),
             (T0 + MINUTE, 2, [event("Scheduled", NOT_BEFORE, EventId="B"), event("Started", "")])],
            "t.trace:3: cannot be expressed on forewarn: its events are in another order",
        ),
        (
            [(T0, 1, [event("Started", "", EventType="Reboot?")])],
            "t.trace:2: Events[0]: 'Reboot?' is not a valid EventType",
        ),
    ],
)  # fmt: skip
def test_what_forewarn_cannot_do_is_named_by_line(
    documents: list[tuple[datetime, int, list[dict[str, Any]]]], message: str
) -> None:
    with pytest.raises(TraceError) as caught:
        convert(parse_trace(trace_bytes("vm0", documents), "t.trace"))
    assert str(caught.value).startswith(message), str(caught.value)


def test_the_command_prints_the_scenario_and_writes_its_fleet(tmp_path: Path) -> None:
    fleet = tmp_path / "fleet.yaml"
    result = CliRunner().invoke(
        main, ["scenario", "from-trace", str(EXAMPLE), "--fleet-out", str(fleet)]
    )
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(f"# made by: forewarn scenario from-trace {EXAMPLE}\n")
    assert "--start 2026-04-20T22:11:57+00:00" in result.stdout
    assert "fleet: fleet.yaml" in result.stdout
    assert "WestNO_1" in fleet.read_text()
    assert result.stderr == f"wrote the fleet the scenario needs to {fleet}\n"
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(result.stdout)
    ran = CliRunner().invoke(main, ["scenario", "run", "--in-process", str(scenario)])
    assert ran.exit_code == 0, ran.output
    assert ran.stdout == f"{scenario}: all 9 steps passed\n"


def test_the_command_names_the_line_of_a_malformed_trace(tmp_path: Path) -> None:
    bad = tmp_path / "bad.trace"
    bad.write_bytes(EXAMPLE.read_bytes().replace(b'"status":200', b'"status":"200"', 1))
    result = CliRunner().invoke(main, ["scenario", "from-trace", str(bad)])
    assert result.exit_code == 1
    assert result.stderr == f"Error: {bad}:2: 'status' has the wrong type (str)\n"
    assert load_trace(EXAMPLE).vm_name == "WestNO_0"

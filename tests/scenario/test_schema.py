"""The scenario file's schema: every mistake names the file, the step and the field."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from forewarn.scenario import (
    ScenarioFileError,
    format_duration,
    load_scenario,
    parse_duration,
    parse_scenario,
    run_in_process,
)
from forewarn.scenario.schema import HostStep


def test_a_valid_scenario_is_parsed_into_numbered_steps(tmp_path: Path) -> None:
    """SPEC 6 [ours]: one action per step, numbered from 1 as people count."""
    scenario = parse_scenario(
        "name: demo\nfleet: f.yaml\nprofile: fast\nsteps:\n"
        "  - host: {live-migrate: h1}\n"
        "  - title: wait\n    advance: 90\n"
        "  - approve: {vm: a, events: all}\n",
        "demo.yaml",
        tmp_path,
    )
    assert (scenario.name, scenario.profile, scenario.fleet) == (
        "demo",
        "fast",
        tmp_path / "f.yaml",
    )
    assert [(s.number, s.kind) for s in scenario.steps] == [
        (1, "host"),
        (2, "advance"),
        (3, "approve"),
    ]
    assert isinstance(scenario.steps[0].value, HostStep)
    assert scenario.steps[0].value.action == ("live-migrate", "h1")
    assert scenario.steps[0].label == "host live-migrate: h1"
    assert (scenario.steps[1].value, scenario.steps[1].label) == (timedelta(seconds=90), "wait")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("steps: [", "x.yaml: not valid YAML"),
        ("- advance: 1s", "x.yaml: Input should be a valid dictionary"),
        ("steps: []", "x.yaml: steps: List should have at least 1 item"),
        ("name: a\nsteps: [{advance: 1s}]\nextra: 1", "x.yaml: unknown field 'extra'"),
        ("nmae: a\nsteps: [{advance: 1s}]", "x.yaml: unknown field 'nmae' (did you mean 'name'?)"),
        ("profile: slow\nsteps: [{advance: 1s}]", "x.yaml: profile: unknown timing profile; known: dev, documented, fast"),
        ("steps: [advance]", "x.yaml: step 1: a step is a mapping such as {advance: 10m}"),
        ("steps: [{advance: 1s}, {sleep: 1s}]", "x.yaml: step 2: unknown step 'sleep'; known: restart"),
        ("steps: [{advance: 1s, restart: a}]", "x.yaml: step 1: a step has exactly one action (found: advance, restart)"),
        ("steps: [{title: only}]", "x.yaml: step 1: a step has exactly one action (found: none)"),
        ("steps: [{advance: soon}]", "x.yaml: step 1 (advance): 'soon' is not a duration like 90s"),
        ("steps: [{advance: -5}]", "x.yaml: step 1 (advance): a duration cannot be negative"),
        ("steps: [{host: {reboot: h1}}]", "x.yaml: step 1 (host): unknown field 'reboot'"),
        ("steps: [{host: {fail: h1, maintain: h1}}]", "x.yaml: step 1 (host): name exactly one of live-migrate"),
        ("steps: [{expect: {vm: a}}]", "x.yaml: step 1 (expect): name at least one of incarnation"),
        ("steps: [{expect: {vm: a, exists: false, incarnation: 2}}]", "exists: false cannot be combined"),
        ("steps: [{expect: {vm: a, apiVersion: latest, incarnation: 1}}]", "(expect): apiVersion: 'latest' is not a Scheduled Events api-version"),
        ("steps: [{expect: {vm: a, events: [{EventStatus: Completed}]}}]", "(expect): events.0.EventStatus: Input should be 'Scheduled' or 'Started'"),
        ("steps: [{expect: {vm: a, events: [{NotBefore: '+soon'}]}}]", "(expect): events.0.NotBefore: 'soon' is not a duration"),
        ("steps: [{approve: {vm: a, events: some}}]", "x.yaml: step 1 (approve): events"),
        ("steps: [{approve: {vm: a, events: []}}]", "x.yaml: step 1 (approve): events"),
        ("steps: [{delete-instances: {scaleSet: w, instanceIds: [A-1]}}]", "(delete-instances): instanceIds.0: String should match pattern"),
        ("steps: [{set-clock: yesterday}]", "x.yaml: step 1 (set-clock): Input should be a valid datetime"),
        ("steps: [{set-clock: '2022-04-11T22:00:00'}]", "(set-clock): Input should have timezone info"),
        ("steps: [{event: {type: Reboot}}]", "(event): resources: Field required"),
    ],
)  # fmt: skip
def test_mistakes_are_named(text: str, message: str) -> None:
    """SPEC 6 [ours]: nothing runs until the whole file is valid."""
    with pytest.raises(ScenarioFileError) as caught:
        parse_scenario(text, "x.yaml")
    assert message in str(caught.value)


def test_files_are_read_with_limits(tmp_path: Path) -> None:
    with pytest.raises(ScenarioFileError, match="cannot be read"):
        load_scenario(tmp_path / "missing.yaml")
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(b"\xff\xfe")
    with pytest.raises(ScenarioFileError, match="not UTF-8"):
        load_scenario(binary)
    no_fleet = tmp_path / "nofleet.yaml"
    no_fleet.write_text("steps: [{advance: 1s}]", encoding="utf-8")
    with pytest.raises(ScenarioFileError, match="needs `fleet:`"):
        run_in_process(load_scenario(no_fleet))


@pytest.mark.parametrize(
    ("text", "seconds", "canonical"),
    [("90", 90, "1m30s"), ("90s", 90, "1m30s"), ("15m", 900, "15m"), ("1h30m", 5400, "1h30m"),
     ("7d", 604800, "7d"), ("2.5s", 2.5, "2.5s"), ("0", 0, "0s")],
)  # fmt: skip
def test_durations(text: str, seconds: float, canonical: str) -> None:
    """SPEC 4 [ours]: `forewarn clock advance 15m` and `advance: 15m` agree."""
    assert parse_duration(text).total_seconds() == seconds
    assert format_duration(parse_duration(text)) == canonical
    assert parse_duration(canonical) == parse_duration(text)


@pytest.mark.parametrize("text", ["", "m", "15 m", "-1s", "1m2h", "36500000d"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(ValueError, match=r"duration|longer than"):
        parse_duration(text)

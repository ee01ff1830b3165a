"""``forewarn events get`` and ``forewarn events approve``: one-shot reads and approvals
against the VM-facing endpoint, here a forewarn platform served on loopback by
:mod:`forewarn.testing`, so the commands go over a real socket as they would to Azure."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping

import pytest
from click.testing import CliRunner, Result

from forewarn.cli import main
from forewarn.testing import ForewarnPlatform


@pytest.fixture
def platform() -> Iterator[ForewarnPlatform]:
    with ForewarnPlatform(rate_limit=1000) as platform:
        yield platform


def run(*args: str, env: Mapping[str, str] | None = None) -> Result:
    return CliRunner().invoke(main, list(args), env=dict(env or {}))


def ok(*args: str, env: Mapping[str, str] | None = None) -> str:
    result = run(*args, env=env)
    assert result.exit_code == 0, (result.exit_code, result.output, result.exception)
    return result.output


def test_get_prints_the_document_as_the_endpoint_sent_it(platform: ForewarnPlatform) -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Query for events":
    ``curl -H Metadata:true
    http://169.254.169.254/metadata/scheduledevents?api-version=2020-07-01``."""
    (event,) = platform.restart("vm0")
    output = ok("events", "get", "--endpoint", platform.url, "-o", "json")

    assert json.loads(output) == {
        "DocumentIncarnation": 2,
        "Events": [
            {
                "EventId": event.event_id,
                "EventStatus": "Scheduled",
                "EventType": "Reboot",
                "ResourceType": "VirtualMachine",
                "Resources": ["vm0"],
                "NotBefore": "Mon, 11 Apr 2022 22:26:58 GMT",
                "Description": (
                    "Virtual machine is going to be restarted as requested by authorized user."
                ),
                "EventSource": "User",
                "DurationInSeconds": -1,
            }
        ],
    }
    (request,) = platform.requests()
    assert request.headers["metadata"] == "true"
    assert request.api_version == "2020-07-01"


def test_get_as_a_table(platform: ForewarnPlatform) -> None:
    (event,) = platform.restart("vm0")
    lines = ok("events", "get", "--endpoint", platform.url).splitlines()
    assert lines[0] == f"DocumentIncarnation 2 at {platform.url}"
    assert lines[1].split() == [
        "EVENT",
        "ID",
        "TYPE",
        "STATUS",
        "SOURCE",
        "RESOURCES",
        "NOT",
        "BEFORE",
    ]
    assert lines[2].split() == [
        event.event_id, "Reboot", "Scheduled", "User", "vm0", "Mon,", "11", "Apr", "2022", "22:26:58", "GMT",
    ]  # fmt: skip


def test_get_with_an_older_api_version_shows_what_that_version_shows(
    platform: ForewarnPlatform,
) -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Version and region
    availability": 2017-08-01 "Removed prepended underscore from resource names for IaaS VMs", so
    2017-03-01 has it; and EventSource arrived with 2019-08-01."""
    platform.restart("vm0")
    output = ok("events", "get", "--endpoint", platform.url, "--api-version", "2017-03-01")
    assert output.splitlines()[2].split()[3:5] == ["-", "_vm0"]
    assert platform.requests()[-1].api_version == "2017-03-01"


def test_approve_starts_the_event(platform: ForewarnPlatform) -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Start an event": "you
    can approve the outstanding event by making a POST call to Metadata Service with EventId"; "The
    service always returns a 200 success code if it's passed a valid event ID"."""
    (event,) = platform.restart("vm0")
    output = ok("events", "approve", event.event_id.lower(), "--endpoint", platform.url)

    assert output == f"approved {event.event_id.lower()} at {platform.url}\n"
    approval = platform.assert_approved(event, by="vm0", within=0)
    assert json.loads(approval.request.body) == {
        "StartRequests": [{"EventId": event.event_id.lower()}]
    }
    view = platform.event(event)
    assert view is not None
    assert view.event.status.value == "Started"


def test_approve_several_at_once_with_json_output(platform: ForewarnPlatform) -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Python Sample": "You
    can confirm multiple events in a single request if needed"."""
    first = platform.schedule("Freeze", "vm0", duration_seconds=5)
    second = platform.schedule("Reboot", "vm0")
    output = ok(
        "events",
        "approve",
        first.event_id,
        second.event_id,
        "--endpoint",
        platform.url,
        "-o",
        "json",
    )
    assert json.loads(output) == {
        "approved": [first.event_id, second.event_id],
        "endpoint": platform.url,
    }
    (approval,) = platform.approvals()
    assert approval.event_ids == (first.event_id, second.event_id)


def test_an_unknown_event_id_is_a_one_line_error(platform: ForewarnPlatform) -> None:
    """SPEC 3 [ours]: an id that is not an event this VM can see is a 400."""
    result = run(
        "events", "approve", "F020BA2E-3BC0-4C40-A10B-86575A9EABD5", "--endpoint", platform.url
    )
    assert result.exit_code == 1
    assert result.output.startswith(f"Error: {platform.url}: ")
    assert "400" in result.output
    assert platform.approvals() == []


def test_an_unknown_event_id_is_named_as_it_was_given(platform: ForewarnPlatform) -> None:
    """Seen by a newcomer: an unknown id was echoed upper-cased. GUIDs are "case insensitive
    on input" (RFC 4122, section 3), so ids are compared in upper case, but an error names
    the id as the user wrote it; a known id in lower case is approved (the documentation's
    own "Start an event" example is lower case,
    learn.microsoft.com/azure/virtual-machines/windows/scheduled-events)."""
    result = run("events", "approve", "not-an-event", "--endpoint", platform.url)
    assert result.exit_code == 1
    assert result.output.rstrip().endswith("400: Bad request. unknown event id(s): not-an-event")
    (event,) = platform.restart("vm0")
    ok("events", "approve", event.event_id.lower(), "--endpoint", platform.url)
    platform.assert_approved(event, by="vm0")


def test_an_invalid_api_version_is_reported_with_the_newest_ones(
    platform: ForewarnPlatform,
) -> None:
    """SPEC 1 [doc]: `latest` is not accepted; the 400 names the newest versions."""
    result = run("events", "get", "--endpoint", platform.url, "--api-version", "latest")
    assert result.exit_code == 1
    assert "(newest versions: 2020-07-01, 2019-08-01, 2019-04-01)" in result.output


def test_the_endpoint_is_discovered_as_the_sdk_does(platform: ForewarnPlatform) -> None:
    """The SDK's discovery order (docs/client.md): an explicit endpoint, then
    FOREWARN_IMDS_ENDPOINT, then DHCP option 245 leases, then 169.254.169.254."""
    (event,) = platform.restart("vm0")
    output = ok("events", "get", "-o", "json", env=platform.environ())
    assert json.loads(output)["Events"][0]["EventId"] == event.event_id

    unreachable = {"FOREWARN_IMDS_ENDPOINT": "http://127.0.0.1:9"}
    output = ok("events", "get", "--endpoint", platform.scheduled_events_url(), env=unreachable)
    assert output.startswith(f"DocumentIncarnation 2 at {platform.url}")


def test_an_endpoint_that_does_not_answer_fails_after_the_retries() -> None:
    result = run("events", "get", "--endpoint", "127.0.0.1:9", "--retries", "0")
    assert result.exit_code == 1
    assert result.output.startswith("Error: http://127.0.0.1:9: ")


def test_a_malformed_endpoint_is_a_usage_error() -> None:
    result = run("events", "get", "--endpoint", "ftp://example")
    assert result.exit_code == 2
    assert "--endpoint" in result.output


def test_without_an_endpoint_a_failure_says_how_to_reach_forewarn(
    monkeypatch: pytest.MonkeyPatch, platform: ForewarnPlatform
) -> None:
    """Seen by a newcomer: ``events approve`` with no endpoint failed with the answer of
    whatever was at 169.254.169.254 and no hint of ``--endpoint``. When discovery chose the
    endpoint (the default, or a DHCP lease), the error names the way to forewarn serve;
    when the user gave it, it does not second-guess them."""
    from forewarn.client import _discovery

    monkeypatch.setattr(_discovery, "IMDS_BASE_URL", "http://127.0.0.1:9")  # no one there
    monkeypatch.setattr(_discovery, "DEFAULT_LEASE_PATHS", ())
    monkeypatch.delenv("FOREWARN_IMDS_ENDPOINT", raising=False)
    result = run("events", "approve", "F020BA2E-3BC0-4C40-A10B-86575A9EABD5", "--retries", "0")
    assert result.exit_code == 1
    (line,) = result.output.strip().splitlines()
    assert line.startswith("Error: http://127.0.0.1:9: ")
    assert line.endswith(
        "(no endpoint was given, so default chose this one; to reach forewarn serve pass "
        "--endpoint http://127.0.0.1:16954 or set FOREWARN_IMDS_ENDPOINT)"
    )
    given = run("events", "get", "--endpoint", "127.0.0.1:9", "--retries", "0")
    assert "--endpoint" not in given.output

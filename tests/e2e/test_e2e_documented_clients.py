"""The documented clients, unmodified but for the address, against ``forewarn serve``.

curl exactly as the documents write it, and the Python sample of
learn.microsoft.com/azure/virtual-machines/windows/scheduled-events run with ``requests`` in a
process of its own.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from email.utils import parsedate_to_datetime
from pathlib import Path

import pytest
from e2e_documented import (
    DOCUMENTED_COMMANDS,
    DOCUMENTED_EVENT_ID,
    QUERY_2017,
    QUERY_2020,
    SAMPLE_FILE,
    START_2017,
    START_2020,
    InteractiveProcess,
    curl_argv,
    documented_sample,
    drive_advanced_sample,
    sample_from_reference,
    sample_pointing_at,
    write_sample,
)
from e2e_support import (
    LIVE_MIGRATION,
    PAIR_HOSTS,
    REFERENCE_DIR,
    TENANT,
    USER_REBOOT,
    ForewarnServer,
    clean_environment,
    run,
)
from machine_support import require_tool, unavailable

pytestmark = pytest.mark.e2e

PAIR = PAIR_HOSTS


def _curl() -> str:
    return require_tool("curl", "the documented commands are curl command lines")


def _cli(server: ForewarnServer, *args: str) -> str:
    """``forewarn`` CLI against this server's control API."""
    control = server.control_url.removeprefix("http://").removesuffix("/api/v1")
    result = run([sys.executable, "-m", "forewarn", *args, "--control", control])
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_commands_and_sample_are_the_documents_own() -> None:
    """What this tier runs is what the documents print, character for character, read from
    the saved pages beside the checkout: on a developer's machine without them this skips, and
    under CI (which has them) their absence fails."""
    if not REFERENCE_DIR.is_dir():
        unavailable(f"the saved documentation pages are not at {REFERENCE_DIR}")
    for name, commands in DOCUMENTED_COMMANDS.items():
        lines = (REFERENCE_DIR / name).read_text(encoding="utf-8").splitlines()
        for command in commands:
            assert command in lines, f"{command!r} is not a line of {name}"
    reference = (REFERENCE_DIR / "scheduled-events-windows-2024.txt").read_text(encoding="utf-8")
    assert documented_sample() == sample_from_reference(reference)


def test_committed_sample_has_only_a_header_added() -> None:
    """The copy under samples/ is the documented text below a comment header naming it."""
    text = SAMPLE_FILE.read_text(encoding="utf-8")
    sample = documented_sample()
    assert text.endswith(sample)
    assert all(line.startswith("#") for line in text[: -len(sample)].splitlines())
    assert sample.startswith("#!/usr/bin/python\nimport json\nimport requests\n")
    assert sample.endswith("if __name__ == '__main__':\n    main()\n")


def test_curl_reads_approves_and_sees_the_event_start(pair: ForewarnServer) -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Query for events" and
    "Start an event", with the address changed: a user restart is Scheduled; "The service always
    returns a 200 success code if it's passed a valid event ID"; "A 400 error code indicates that
    the request header or payload was malformed" (an id the VM cannot see: SPEC 3 [ours]).
    Once started, "NotBefore" is "" (SPEC 2) and the DocumentIncarnation "is
    changing every time there's new information in Events" ("Example responses").
    """
    _curl()
    server = pair
    address = f"{PAIR[0]}:{server.port}"
    created = json.loads(
        _cli(
            server,
            "events",
            "create",
            "--type",
            "Reboot",
            "--vm",
            "WestNO_0",
            "--source",
            "User",
            "--description",
            USER_REBOOT,
            "-o",
            "json",
        )
    )
    event_id = created["EventId"]

    query = run(curl_argv(QUERY_2020, address))
    assert query.returncode == 0, query.stderr
    scheduled = json.loads(query.stdout)
    (event,) = scheduled["Events"]
    assert event["EventId"] == event_id
    assert event["EventStatus"] == "Scheduled"
    assert (event["EventType"], event["EventSource"]) == ("Reboot", "User")
    assert event["Resources"] == ["WestNO_0"]
    assert event["Description"] == USER_REBOOT
    assert parsedate_to_datetime(event["NotBefore"]).tzname() == "UTC"

    # The documents' own example id names no event here: 400, and nothing changes.
    refused = run(curl_argv(START_2020, address))
    assert refused.returncode == 0, refused.stderr
    assert "error" in json.loads(refused.stdout)
    assert run(curl_argv(QUERY_2020, address)).stdout == query.stdout

    approve = run(curl_argv(START_2020, address, event_id=event_id))
    assert approve.returncode == 0, approve.stderr
    assert approve.stdout == ""  # 200 with an empty body

    # Rebooting: the VM is paused, so its own call simply takes longer (the default "hold"
    # policy, docs/faithfulness.md): curl waits, and is answered once the impact is over.
    during = subprocess.Popen(
        curl_argv(QUERY_2020, address), stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            during.wait(1.0)
        # "Impact Duration: 7 seconds"
        # (learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "High level
        # overview").
        server.advance(7)
        held_out, held_err = during.communicate(timeout=20)
    finally:
        during.kill()
    assert during.returncode == 0, held_err
    after = json.loads(run(curl_argv(QUERY_2020, address)).stdout)
    assert json.loads(held_out) == after
    assert after["DocumentIncarnation"] > scheduled["DocumentIncarnation"]
    (started,) = after["Events"]
    assert started["EventId"] == event_id
    assert started["EventStatus"] == "Started"
    assert started["NotBefore"] == ""
    assert server.events()[event_id]["approvedBy"] == [TENANT]


def test_preview_curl_approves_with_a_string_document_incarnation(pair: ForewarnServer) -> None:
    """docs.microsoft.com/azure/virtual-machines/virtual-machines-scheduled-events (2017), "Query
    for events" and "Starting an event (expedite)": the POST also carries
    ``"DocumentIncarnation":"5"`` (a string), which is accepted and ignored (SPEC 3); api-version
    2017-03-01 shows IaaS names with a leading underscore and no Description (SPEC 2, "What each
    api-version shows").
    """
    _curl()
    server = pair
    address = f"{PAIR[0]}:{server.port}"
    event_id = server.create_event(
        "Freeze", ["WestNO_1"], description=LIVE_MIGRATION, durationInSeconds=5
    )

    before = json.loads(run(curl_argv(QUERY_2017, address)).stdout)
    (event,) = before["Events"]
    assert list(event) == [
        "EventId",
        "EventStatus",
        "EventType",
        "ResourceType",
        "Resources",
        "NotBefore",
    ]
    assert (event["EventId"], event["EventStatus"]) == (event_id, "Scheduled")
    assert event["Resources"] == ["_WestNO_1"]

    approve = run(curl_argv(START_2017, address, event_id=event_id))
    assert (approve.returncode, approve.stdout) == (0, ""), approve.stderr

    after = json.loads(run(curl_argv(QUERY_2017, address)).stdout)
    assert after["DocumentIncarnation"] > before["DocumentIncarnation"]
    (started,) = after["Events"]
    assert (started["EventId"], started["EventStatus"], started["NotBefore"]) == (
        event_id,
        "Started",
        "",
    )
    assert server.events()[event_id]["approvedBy"] == [TENANT]


_SAMPLE_CALLS = """
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("sample", sys.argv[1])
sample = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sample)
document = sample.get_scheduled_events()
print(json.dumps({
    "document": document,
    "confirm": [sample.confirm_scheduled_event(event_id) for event_id in sys.argv[2:]],
}))
"""


def _sample_calls(path: Path, *event_ids: str) -> dict[str, object]:
    result = run([sys.executable, "-c", _SAMPLE_CALLS, str(path), *event_ids])
    assert result.returncode == 0, result.stderr
    parsed: dict[str, object] = json.loads(result.stdout)
    return parsed


def test_sample_functions_read_and_confirm(pair: ForewarnServer, tmp_path: Path) -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Python Sample":
    ``get_scheduled_events`` and ``confirm_scheduled_event``; "Start an event": "The service always
    returns a 200 success code if it's passed a valid event ID, even if another VM already approved
    the event."; "0: The event won't interrupt the VM" ("Event properties"), so both VMs stay up.
    """
    server = pair
    event_id = server.create_event("Freeze", ["WestNO_1"], durationInSeconds=0)
    leader = write_sample(tmp_path, sample_pointing_at(server.base_url(PAIR[0])))
    partner_dir = tmp_path / "partner"
    partner_dir.mkdir()
    partner = write_sample(partner_dir, sample_pointing_at(server.base_url(PAIR[1])))

    first = _sample_calls(leader, event_id)
    document = first["document"]
    assert isinstance(document, dict)
    assert [e["EventId"] for e in document["Events"]] == [event_id]
    assert first["confirm"] == [200]

    again = _sample_calls(partner, event_id, DOCUMENTED_EVENT_ID)
    assert again["confirm"] == [200, 400]
    document = again["document"]
    assert isinstance(document, dict)
    assert document["Events"][0]["EventStatus"] == "Started"


def test_advanced_sample_approves_what_it_documents(pair: ForewarnServer, tmp_path: Path) -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Python Sample", run
    through its own ``main()``; only ``metadata_url`` differs from the document."""
    server = pair
    path = write_sample(tmp_path, sample_pointing_at(server.base_url(PAIR[0])))
    sample = InteractiveProcess([sys.executable, str(path)], clean_environment())
    drive_advanced_sample(sample, server)
    prompt = re.escape("        Press 1 to poll for new events \n        Press 2 to exit \n ")
    assert len(re.findall(prompt, sample.stdout)) == 4  # before each line read

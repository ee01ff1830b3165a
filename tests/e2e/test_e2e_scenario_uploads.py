"""Scenario uploads to a real ``forewarn serve`` (``POST /api/v1/scenarios``, the dashboard's
form) [ours]: a hostile file is refused with 422 naming the step and the field, never 500; a
file is checked whole before any step runs, as docs/control.md says, and the refusal is the
very line ``forewarn scenario validate`` prints; and while a file is parsed, off the loop that
answers the VMs, another VM's polls go on being answered.
"""

from __future__ import annotations

import json
import os
import select
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from e2e_support import ForewarnServer, run, start_forewarn, stopped_at_exit

pytestmark = pytest.mark.e2e

#: Each refused for its value alone, with what the refusal must name.
HOSTILE = {
    "nested": ("[" * 65_000, "not valid YAML: exceeded maximum nesting depth"),
    "nested-in-a-step": (
        "steps:\n  - advance: 1s\n  - expect: " + "[" * 40 + "]" * 40,
        "step 2 (expect): 0: nested deeper than 32 levels, line 3",
    ),
    "huge-float": ("steps:\n  - advance: 1.0e+308\n", "step 1 (advance): a duration must be"),
    "infinity": ("steps:\n  - advance: .inf\n", "step 1 (advance): a duration must be"),
    "4000-digits": (
        "steps:\n  - advance: " + "9" * 4000 + "\n",
        "step 1 (advance): an integer of 4,000 characters (at most 32)",
    ),
    "5000-digits-in-text": (
        "steps:\n  - advance: " + "9" * 5000 + "s\n",
        "step 1 (advance): '99999",
    ),
    "key-twice": (
        "steps:\n  - event: {type: Reboot, resources: [vm0], type: Freeze}\n",
        "step 1 (event): key 'type' is given twice, on lines 2 and 2",
    ),
}
#: A first step that changes the platform, then one whose body the API would refuse: the
#: whole file must be refused before the first runs.
LATE_MISTAKES = {
    "200-years": ("advance: 6311520000", "step 2 (advance): a duration must be from 0 to"),
    "past-the-bound": (
        "set-clock: 9500-01-01T00:00:00Z",
        "step 2 (set-clock): the clock cannot be set to 9500-01-01T00:00:00+00:00: it is past "
        "9000-01-01T00:00:00+00:00",
    ),
    "latency-without-delay": (
        "fault: {kind: latency}",
        "step 2 (fault): a latency fault needs a delay (seconds)",
    ),
    "long-description": (
        "event: {type: Freeze, resources: [vm0], description: " + "x" * 1100 + "}",
        "step 2 (event): description: String should have at most 1024 characters",
    ),
    "huge-duration": (
        "event: {type: Freeze, resources: [vm0], durationInSeconds: 9999999999999}",
        "step 2 (event): durationInSeconds: Input should be less than or equal to 3153600000",
    ),
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ForewarnServer]:
    """One server for every upload here: none of them may change anything on it."""
    started = start_forewarn(tmp_path_factory.mktemp("uploads"), rate_limit=1000)
    with stopped_at_exit(started) as served:
        yield served


def _upload(server: ForewarnServer, text: str) -> tuple[int, str]:
    answer = server.control.post("/scenarios", json={"scenario": text})
    body = answer.json()
    return answer.status_code, str(body.get("error", body))


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_hostile_upload_is_422_naming_the_step_and_the_server_goes_on(
    server: ForewarnServer, name: str
) -> None:
    text, named = HOSTILE[name]
    status, message = _upload(server, text)
    assert status == 422, message
    assert message.startswith(f"<dashboard>: {named}"), message
    assert "\n" not in message
    assert server.document_response().status == 200
    server.process.assert_healthy()


@pytest.mark.parametrize("name", sorted(LATE_MISTAKES))
def test_no_step_runs_unless_every_step_is_valid_and_validate_says_the_same(
    server: ForewarnServer, tmp_path: Path, name: str
) -> None:
    mistake, named = LATE_MISTAKES[name]
    text = f"steps:\n  - restart: vm0\n  - {mistake}\n"
    before = server.clock()
    status, message = _upload(server, text)
    assert status == 422, message
    assert message.startswith(f"<dashboard>: {named}"), message
    assert server.events() == {}, "the first step ran"
    assert server.clock() == before

    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(text)
    validated = run([sys.executable, "-m", "forewarn", "scenario", "validate", str(scenario)])
    assert validated.returncode == 1
    assert validated.stderr.strip() == "Error: " + message.replace("<dashboard>", str(scenario))


def test_polls_are_answered_while_an_upload_is_parsed(server: ForewarnServer) -> None:
    """About 3,500 steps, the last one invalid: parsed whole, then refused. It is the largest
    file the control API's 64 KiB body takes, and its parsing is the longest an upload can
    take; another VM's polls must not wait for it (ordering, not timing: each poll's answer
    is read before looking whether the upload's has come)."""
    steps = "  - advance: 1s\n" * 3_500 + "  - advance: .inf\n"
    body = json.dumps({"scenario": "steps:\n" + steps}).encode()
    assert len(body) < 64 * 1024
    host, port = server.control_address.split(":")
    token = os.environ["FOREWARN_TOKEN"]
    head = (
        f"POST /api/v1/scenarios HTTP/1.1\r\nHost: {host}:{port}\r\n"
        f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode()
    with socket.create_connection((host, int(port)), timeout=30) as upload:
        upload.sendall(head + body)
        answered_first = 0
        while not select.select([upload], [], [], 0)[0]:
            assert server.document_response().status == 200
            answered_first += 1
            assert answered_first < 100_000
        reply = b""
        while chunk := upload.recv(65536):
            reply += chunk
    assert reply.startswith(b"HTTP/1.1 422"), reply[:200]
    assert b"step 3501 (advance)" in reply
    print(f"{answered_first} polls answered before the upload's answer")
    assert answered_first >= 5, f"only {answered_first} poll(s) answered during the upload"

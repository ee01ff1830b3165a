"""``forewarn_verify``: ``forewarn verify`` inside a user's test, failing it by trial name.

Issue text, "In tests and CI": "the pytest plugin gets it (``forewarn_platform.verify(...)`` or
a fixture that runs a suite against a handler object or command and fails the test naming the
trials)". docs/verify.md, "In a pytest suite", documents the fixture.

A run is real (the relay, a platform per trial, the handler's requests over sockets), so each
test asks for the one or two trials it needs: ``headers`` (a few seconds) and ``own-vm-only``
(an availability set where the other VM's event is shown to this one).
"""

from __future__ import annotations

import json
import threading
import urllib.request
from pathlib import Path

import pytest

from forewarn.testing import VerifyFailed, verify_handler
from forewarn.verify.model import Verdict, VerifyError

pytest_plugins = ["pytester"]
pytestmark = pytest.mark.e2e

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "handlers"
_ALREADY_IMPORTED = ("-W", "ignore::pytest.PytestAssertRewriteWarning")
EVENTS = "/metadata/scheduledevents?api-version=2020-07-01"


class Worker:
    """A handler object of the kind an application has: its loop is ``run(endpoint, stop)``.
    ``mine_only=False`` is the defect of approving every event in the document."""

    def __init__(self, *, mine_only: bool = True) -> None:
        self.mine_only = mine_only
        self.approved: list[str] = []

    def _call(self, url: str, body: bytes | None = None) -> bytes:
        request = urllib.request.Request(url, data=body, headers={"Metadata": "true"})
        with urllib.request.urlopen(request, timeout=3) as answer:
            return bytes(answer.read())

    def run(self, endpoint: str, stop: threading.Event) -> None:
        name = None
        while not stop.is_set():
            try:
                if name is None:
                    name_url = "/metadata/instance/compute/name?api-version=2021-02-01&format=text"
                    name = self._call(endpoint + name_url).decode()
                document = json.loads(self._call(endpoint + EVENTS))
                for event in document["Events"]:
                    if event["EventStatus"] != "Scheduled" or event["EventId"] in self.approved:
                        continue
                    if name in event["Resources"] or not self.mine_only:
                        body = json.dumps({"StartRequests": [{"EventId": event["EventId"]}]})
                        self._call(endpoint + EVENTS, body.encode())
                        self.approved.append(event["EventId"])
            except (OSError, ValueError, KeyError):
                pass  # the next poll tries again
            stop.wait(1.0)


def test_a_handler_object_on_a_thread_passes_and_gets_the_report() -> None:
    worker = Worker()
    report = verify_handler(worker.run, trials=["headers", "own-vm-only"])
    assert report.verdicts() == {"headers": Verdict.PASS, "own-vm-only": Verdict.PASS}
    assert report.suite == "custom"
    assert len(worker.approved) == 1  # its own event; the other VM's was left alone


def test_a_failed_trial_raises_naming_it_with_its_evidence() -> None:
    worker = Worker(mine_only=False)
    with pytest.raises(VerifyFailed) as failed:
        verify_handler(worker.run, trials=["own-vm-only"])
    message = str(failed.value)
    assert message.startswith("forewarn verify: 1 trial(s) failed: own-vm-only\n")
    assert f"  own-vm-only: {failed.value.report.result('own-vm-only').reason}" in message
    assert "POST /metadata/scheduledevents?api-version=2020-07-01" in message  # the evidence
    # check=False hands the same verdicts back instead.
    report = verify_handler(Worker(mine_only=False).run, trials=["own-vm-only"], check=False)
    assert report.verdicts() == {"own-vm-only": Verdict.FAIL}


def test_bad_input_is_a_verify_error_before_anything_runs() -> None:
    with pytest.raises(VerifyError, match="unknown trial no-such-trial"):
        verify_handler(Worker().run, trials=["no-such-trial"])
    with pytest.raises(VerifyError, match="handler command not found: no-such-handler-command"):
        verify_handler(["no-such-handler-command"], trials=["headers"])


def test_the_fixture_fails_a_users_test_naming_the_trial(pytester: pytest.Pytester) -> None:
    """A command handler (examples/handlers/flawed_approves_everyone.py) graded from a user's
    own test: the test fails, and pytest's report names the trial and why."""
    pytester.makepyfile(
        f"""
        import sys

        def test_my_handler(forewarn_verify):
            forewarn_verify(
                [sys.executable, {str(EXAMPLES / "flawed_approves_everyone.py")!r}],
                trials=["own-vm-only"],
            )

        def test_the_good_one(forewarn_verify):
            report = forewarn_verify(
                [sys.executable, {str(EXAMPLES / "good_stdlib.py")!r}], trials=["headers"]
            )
            assert report.passed
        """
    )
    result = pytester.runpytest_inprocess(*_ALREADY_IMPORTED)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*VerifyFailed: forewarn verify: 1 trial(s) failed: own-vm-only",
            "*  own-vm-only: it approved event *, whose Resources name only vm1, *",
        ]
    )

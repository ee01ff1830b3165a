"""The pytest plugin as a user's test suite meets it: fixtures, the marker, teardown; and the
worked example in ``examples/app_under_test``, run as its own test suite."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "app_under_test"


#: The nested run happens in this process, where the plugin's modules are imported already:
#: pytest's notice that it cannot rewrite their asserts again is no warning about the plugin.
_ALREADY_IMPORTED = ("-W", "ignore::pytest.PytestAssertRewriteWarning")


def run_suite(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """A user's suite run with ``args``, in this process (a process of its own costs seconds;
    the worked example below is run so)."""
    return pytester.runpytest_inprocess(*args, *_ALREADY_IMPORTED)


def test_the_fixture_serves_one_vm_and_the_marker_configures_it(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        """
        import pytest
        import requests

        def test_default(forewarn_platform):
            assert forewarn_platform.vm_names == ("vm0",)
            assert forewarn_platform.service.clock_status().profile == "documented"
            response = requests.get(
                forewarn_platform.scheduled_events_url(),
                params={"api-version": "2020-07-01"},
                headers={"Metadata": "true"},
                timeout=5,
            )
            assert response.json() == {"DocumentIncarnation": 1, "Events": []}

        @pytest.mark.forewarn(vms=["a", "b"], profile="fast", seed=7)
        def test_marked(forewarn_platform):
            assert forewarn_platform.vm_names == ("a", "b")
            assert forewarn_platform.service.clock_status().profile == "fast"
        """
    )
    pytester.makepyfile(
        test_module_marker="""
        import pytest

        pytestmark = pytest.mark.forewarn(vms=["m"])

        def test_module_marker(forewarn_platform):
            assert forewarn_platform.vm_names == ("m",)
        """
    )
    result = run_suite(pytester, "--strict-markers", "-W", "error")
    result.assert_outcomes(passed=3)


def test_the_factory_makes_several_platforms_and_closes_each(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import socket

        import pytest

        PORTS = []

        def test_two(make_forewarn_platform):
            blue = make_forewarn_platform(vms=["blue"])
            green = make_forewarn_platform(vms=["green"], seed=7)
            assert blue.url != green.url
            (event,) = green.restart("green")
            assert blue.events() == ()
            PORTS.extend([blue.port, green.port])

        def test_closed_after_the_test():
            assert len(PORTS) == 2
            for port in PORTS:
                with pytest.raises(ConnectionRefusedError):
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
        """
    )
    result = run_suite(pytester, "-W", "error")
    result.assert_outcomes(passed=2)


def test_a_test_that_does_not_approve_fails_with_what_was_seen(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import requests

        def test_forgets_to_approve(forewarn_platform):
            (event,) = forewarn_platform.restart("vm0")
            requests.get(
                forewarn_platform.scheduled_events_url(),
                params={"api-version": "2020-07-01"},
                headers={"Metadata": "true"},
                timeout=5,
            )
            forewarn_platform.assert_approved(event)
        """
    )
    result = run_suite(pytester, "-W", "error")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*was not approved; no approvals at all (1 GET request(s) seen)*"])


def test_the_marker_is_registered_and_refuses_positional_arguments(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.forewarn("fast")
        def test_positional(forewarn_platform):
            pass
        """
    )
    markers = run_suite(pytester, "--markers")
    markers.stdout.fnmatch_lines(["@pytest.mark.forewarn(**options):*"])
    result = run_suite(pytester, "--strict-markers")
    result.stdout.fnmatch_lines(["*the forewarn marker takes keyword arguments only*"])
    assert result.ret != 0


def test_the_plugin_can_be_turned_off(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        def test_uses_it(forewarn_platform):
            pass
        """
    )
    result = run_suite(pytester, "-p", "no:forewarn")
    result.stdout.fnmatch_lines(["*fixture 'forewarn_platform' not found*"])


def test_the_worked_example_passes_as_docs_testing_md_says() -> None:
    """The example application's own suite, with its own pytest settings (warnings are
    errors there too), in a process of its own as its developers would run it; and what
    docs/testing.md says of a run: its 6 tests, all on the manual clock but the one whose
    worker waits out its 2 s request timeout while its VM reboots."""
    completed = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "--durations=0", "--durations-min=0"],
        cwd=EXAMPLE,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert "6 passed" in completed.stdout, completed.stdout
    assert "failed" not in completed.stdout
    page = (EXAMPLE.parents[1] / "docs" / "testing.md").read_text()
    assert "runs its 6 tests in a few seconds" in page
    assert "waits out its 2 s request timeout" in page
    worker = (EXAMPLE / "drainer" / "worker.py").read_text()
    assert "    timeout: float = 2.0\n" in worker
    found = re.findall(r"^([\d.]+)s call\s+(\S+)$", completed.stdout, re.M)
    calls = {name: float(seconds) for seconds, name in found}
    waited = [name for name, seconds in calls.items() if seconds >= 2.0]
    restart = (
        "tests/test_worker.py::test_a_restart_drains_approves_at_once_and_recovers_after_the_reboot"
    )
    assert restart in waited, calls

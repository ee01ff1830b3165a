"""`forewarn verify --namespace`: a handler that hard-codes Azure's address runs unchanged.

SPEC 1.1: Azure serves Scheduled Events at ``http://169.254.169.254/metadata/scheduledevents``;
"binding to 169.254.169.254:80 inside a network namespace lets unmodified clients run" (the
mechanism of README "On Azure's address, 169.254.169.254"). Needs root and iproute2: skipped with
the reason elsewhere, a failure under CI (tests/support/machine_support.py).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from machine_support import require_namespaces, require_tool

from forewarn.verify.model import RunReport, Verdict

HANDLERS = Path(__file__).parent / "handlers"
pytestmark = [pytest.mark.e2e, pytest.mark.netns]


def test_a_handler_hard_coding_169_254_169_254_is_graded_and_the_namespace_goes(
    tmp_path: Path,
) -> None:
    require_namespaces()
    report_path = tmp_path / "report.json"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "forewarn",
            "verify",
            "--namespace",
            "--trial",
            "headers",
            "--trial",
            "survives-500",
            "--timing",
            "notice.Reboot=4",
            "--json",
            str(report_path),
            "--",
            sys.executable,
            str(HANDLERS / "hard_coded.py"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0, (out, err)
    report = RunReport.from_json(report_path.read_text())
    assert report.verdicts() == {"headers": Verdict.PASS, "survives-500": Verdict.PASS}
    assert report.handler.endswith("hard_coded.py")
    listed = subprocess.run(
        ["ip", "netns", "list"], capture_output=True, text=True, timeout=10, check=True
    )
    assert f"forewarn-verify-{process.pid}-" not in listed.stdout


def test_namespace_without_root_is_one_line_and_exit_2() -> None:
    """As a user who is not root (setpriv drops to nobody), nothing is made."""
    require_namespaces()
    require_tool("setpriv", "to run forewarn verify as a user who is not root")
    done = subprocess.run(
        [
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            sys.executable,
            "-m",
            "forewarn",
            "verify",
            "--namespace",
            "--",
            "true",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        "forewarn verify: --namespace needs root (it makes a network namespace)"
    )

"""`forewarn verify` as users run it: a subprocess grading real handler processes.

The handlers (tests/verify/handlers/) are one good loop and copies with one defect each; each
must get exactly the verdict of the trial that catches its defect, and the exit code says
whether any trial failed (0/1) or the run could not happen (2). The runs start together (a
module fixture) to keep the folder quick; notices are shortened with ``--timing``, which the
report states.
"""

from __future__ import annotations

import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import xmlschema

from forewarn.verify.model import RunReport, Verdict
from forewarn.verify.timing import TIMING_KEYS

HANDLERS = Path(__file__).parent / "handlers"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "handlers"
SHORT = ["--timing", "notice.Reboot=4", "--timing", "held=5", "--start-timeout", "20"]
pytestmark = pytest.mark.e2e


@dataclass(frozen=True)
class Finished:
    code: int
    out: str
    err: str
    report: RunReport | None

    def verdicts(self) -> dict[str, Verdict]:
        assert self.report is not None, (self.code, self.out, self.err)
        return self.report.verdicts()


@dataclass
class Run:
    process: subprocess.Popen[str]
    json_path: Path

    def finish(self) -> Finished:
        out, err = self.process.communicate(timeout=120)
        report = None
        if self.json_path.exists():
            report = RunReport.from_json(self.json_path.read_text())
        return Finished(self.process.returncode, out, err, report)


@dataclass(frozen=True)
class Runs:
    done: dict[str, Finished]
    tmp: Path


def start(tmp: Path, name: str, *arguments: str, env: dict[str, str] | None = None) -> Run:
    json_path = tmp / f"{name}.json"
    argv = [sys.executable, "-m", "forewarn", "verify", *SHORT, "--json", str(json_path)]
    process = subprocess.Popen(
        [*argv, *arguments],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )
    return Run(process, json_path)


def handler(name: str) -> list[str]:
    return ["--", sys.executable, str(HANDLERS / name)]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runs]:
    tmp = tmp_path_factory.mktemp("verify")
    pid_file = tmp / "spawned.pid"
    started = {
        # the good handler's trials in two runs at once: each run's trials go one by one
        "good": start(
            tmp,
            "good",
            *("--trial", "headers", "--trial", "own-vm-only"),
            *("--junit", str(tmp / "good.xml")),
            *handler("good.py"),
        ),
        "good-faults": start(
            tmp,
            "good-faults",
            *("--trial", "survives-500", "--trial", "held-request"),
            *handler("good.py"),
        ),
        "good-503": start(tmp, "good-503", "--trial", "survives-503", *handler("good.py")),
        "good-400": start(tmp, "good-400", "--trial", "survives-400", *handler("good.py")),
        # Started period no longer than the impact (3 s each; SHORT's held=5 is no matter)
        "impact-again": start(
            tmp,
            "impact-again",
            *("--timing", "impact=3", "--timing", "started_period=3"),
            *("--trial", "impact-again", *handler("good.py")),
        ),
        # a 10 s timeout, within the patience of 12 s
        "deleted-timeout": start(
            tmp,
            "deleted-timeout",
            *("--timing", "held=12", "--trial", "deleted-vm"),
            *("--", sys.executable, str(EXAMPLES / "good_stdlib.py")),
        ),
        "deleted-none": start(
            tmp,
            "deleted-none",
            *("--trial", "deleted-vm", "--trial", "deleted-by-terminate"),
            *handler("no_timeout.py"),
        ),
        "approves-others": start(
            tmp, "approves-others", "--trial", "own-vm-only", *handler("approves_others.py")
        ),
        "dies-on-500": start(
            tmp,
            "dies-on-500",
            *("--trial", "survives-500", "--trial", "headers"),
            *handler("dies_on_500.py"),
        ),
        "no-timeout": start(
            tmp, "no-timeout", "--trial", "held-request", *handler("no_timeout.py")
        ),
        "checks": start(
            tmp,
            "checks",
            *("--trial", "drained-before-approval", "--trial", "recovers-after"),
            *("--drained-check", "test -e not-drained-yet", "--recovered-check", "true"),
            *handler("good.py"),
        ),
        # a handler reading its address from a variable of its own
        "endpoint-env": start(
            tmp,
            "endpoint-env",
            *("--endpoint-env", "IMDS_URL", "--trial", "headers"),
            "--",
            "sh",
            "-c",
            f'FOREWARN_IMDS_ENDPOINT="$IMDS_URL" exec "{sys.executable}" "{HANDLERS / "good.py"}"',
        ),
        "spawner": start(
            tmp,
            "spawner",
            *("--trial", "headers", "--trial", "reboot-notice", "--restart-per-trial"),
            *handler("spawner.py"),
            env={"SPAWNED_PID_FILE": str(pid_file)},
        ),
    }
    try:
        yield Runs({name: run.finish() for name, run in started.items()}, tmp)
    finally:
        for run in started.values():
            if run.process.poll() is None:
                run.process.kill()
                run.process.wait()


def test_a_good_handler_passes_and_exits_0(runs: Runs) -> None:
    good = runs.done["good"]
    assert good.verdicts() == {"headers": Verdict.PASS, "own-vm-only": Verdict.PASS}
    assert good.code == 0
    faults = runs.done["good-faults"]
    assert faults.verdicts() == {"survives-500": Verdict.PASS, "held-request": Verdict.PASS}
    assert faults.code == 0


def test_the_requests_a_fault_answered_are_in_the_evidence_with_the_fault(runs: Runs) -> None:
    """The evidence is "the requests the handler sent around the decision, with times" (the
    feature's own terms): those an injected 500 answered too (docs/faults.md; learn.microsoft.
    com/azure/virtual-machines/instance-metadata-service, "Errors and debugging"), each with
    its method, path, time and the fault it met."""
    report = runs.done["good-faults"].report
    assert report is not None
    met = [r for r in report.result("survives-500").evidence.requests if r.fault]
    assert [(r.method, r.path, r.status, r.fault) for r in met] == [
        ("GET", "/metadata/scheduledevents", 500, "error")
    ] * 3
    assert all(r.t > 0 and r.at for r in met)
    states = report.result("survives-500").evidence.states
    fault_t = next(s.t for s in states if s.state == "Fault")
    cleared_t = next(s.t for s in states if s.state == "FaultCleared")
    assert all(fault_t <= r.t <= cleared_t for r in met)


def test_a_handler_that_retries_a_503_passes_survives_503(runs: Runs) -> None:
    """Issue text, "Trials": "it keeps working through faults: 429, 500, 503, ...". 503 is
    the IMDS family's "Internal service unavailable. Retry later" (learn.microsoft.com/azure/
    load-balancer/troubleshoot-load-balancer-imds, "Error codes"; docs/spec.md SPEC 1.2),
    injected as the ``unavailable`` fault (docs/faults.md)."""
    run = runs.done["good-503"]
    assert run.verdicts() == {"survives-503": Verdict.PASS}, run.out + run.err
    assert run.report is not None
    met = [r for r in run.report.result("survives-503").evidence.requests if r.fault]
    assert [(r.status, r.fault) for r in met] == [(503, "unavailable")] * 3


def test_a_handler_that_waits_out_a_spell_of_400s_passes_survives_400(runs: Runs) -> None:
    """learn.microsoft.com/azure/virtual-machines/instance-metadata-service, "Errors and
    debugging": "400 Bad Request | Missing Metadata: true header or missing parameter";
    docs/spec.md SPEC 1.2, SPEC 1.3 (5 requests a second). The relay answers them: each is in
    the evidence with its fault, and none reached the platform."""
    run = runs.done["good-400"]
    assert run.verdicts() == {"survives-400": Verdict.PASS}, run.out + run.err
    assert run.report is not None
    requests = run.report.result("survives-400").evidence.requests
    met = [r for r in requests if r.fault == "bad-request"]
    assert len(met) >= 3
    assert all(r.status == 400 and r.path == "/metadata/scheduledevents" for r in met)
    assert any(r.method == "POST" and r.status == 200 for r in requests)  # the event, caught


def test_a_progress_line_per_trial_goes_to_standard_error(runs: Runs) -> None:
    """Issue text, "Reports people use": "a table in the terminal with a progress line while
    trials run"; docs/verify.md: "a progress line per trial on standard error"."""
    good = runs.done["good"]
    progress = [line for line in good.err.splitlines() if line.startswith("[")]
    assert [re.sub(r"\(\d+\.\d s\)", "(N s)", line) for line in progress] == [
        "[1/2] headers: PASS (N s)",
        "[2/2] own-vm-only: PASS (N s)",
    ]
    assert "[1/2]" not in good.out


def test_the_junit_file_has_a_passing_testcase_per_trial(runs: Runs) -> None:
    """The file ``--junit`` wrote, valid against the JUnit schema CI servers read
    (tests/verify/junit.xsd)."""
    xmlschema.XMLSchema(str(Path(__file__).parent / "junit.xsd")).validate(
        str(runs.tmp / "good.xml")
    )
    root = ET.parse(runs.tmp / "good.xml").getroot()
    cases = root.findall("testsuite/testcase")
    assert [case.get("name") for case in cases] == ["headers", "own-vm-only"]
    assert all(case.find("failure") is None for case in cases)


def test_approving_another_vms_event_fails_own_vm_only(runs: Runs) -> None:
    """SPEC 8: "Handlers find their own name in Resources"; SPEC 5: an availability set's
    events are shown to every member."""
    run = runs.done["approves-others"]
    assert run.verdicts() == {"own-vm-only": Verdict.FAIL}
    assert run.code == 1
    assert "whose Resources name only vm1" in run.out


def test_dying_on_a_500_fails_that_trial_and_the_next_one_starts_it_again(
    runs: Runs,
) -> None:
    """learn.microsoft.com/azure/virtual-machines/instance-metadata-service, "Errors and
    debugging": "500 Service Error | Retry after some time"."""
    run = runs.done["dies-on-500"]
    assert run.verdicts() == {"survives-500": Verdict.FAIL, "headers": Verdict.PASS}
    assert run.code == 1
    assert run.report is not None
    report = run.report
    assert "exited (status 3)" in report.result("survives-500").reason
    assert "giving up" in report.result("survives-500").evidence.describe()


def test_a_handler_without_a_timeout_fails_the_held_request(runs: Runs) -> None:
    """SPEC 4.3: a request may get its answer late, or never (a deleted VM)."""
    run = runs.done["no-timeout"]
    assert run.verdicts() == {"held-request": Verdict.FAIL}
    assert run.code == 1


def test_the_users_checks_grade_draining_and_recovering(runs: Runs) -> None:
    """--drained-check runs when the handler approves: a handler that approves before the
    application is drained fails (Windows page, "High level overview": prepare, then
    approve); --recovered-check after the event."""
    run = runs.done["checks"]
    assert run.verdicts() == {
        "drained-before-approval": Verdict.FAIL,
        "recovers-after": Verdict.PASS,
    }
    assert run.code == 1
    assert run.report is not None
    reason = run.report.result("drained-before-approval").reason
    assert reason == "not drained when it approved: `test -e not-drained-yet` exited 1"


def test_restart_per_trial_starts_the_handler_for_each_trial(runs: Runs) -> None:
    report = runs.done["spawner"].report
    assert report is not None
    for result in report.results:
        assert [s.state for s in result.evidence.states][:1] == ["HandlerStarted"], result.name


def test_endpoint_env_names_the_variable_the_handler_reads(runs: Runs) -> None:
    """Issue text, "Any handler, any language": "a ``--endpoint-env NAME`` for handlers that
    read another variable". The handler here finds its VM only through ``IMDS_URL``."""
    run = runs.done["endpoint-env"]
    assert run.code == 0, (run.out, run.err)
    assert run.verdicts() == {"headers": Verdict.PASS}


def test_the_handlers_whole_process_group_is_stopped(runs: Runs) -> None:
    run = runs.done["spawner"]
    assert run.verdicts() == {"headers": Verdict.PASS, "reboot-notice": Verdict.PASS}
    assert run.code == 0
    pid = int((runs.tmp / "spawned.pid").read_text())
    assert not _running(pid)


def _running(pid: int) -> bool:
    """Whether ``pid`` runs: a zombie left to an init that does not reap has stopped."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


# -- a run that cannot happen: one line, exit 2 -----------------------------------------------


def _cannot(*arguments: str) -> tuple[int, str]:
    done = subprocess.run(
        [sys.executable, "-m", "forewarn", "verify", *arguments],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.stdout == ""
    assert "Traceback" not in done.stderr
    return done.returncode, done.stderr.strip().splitlines()[-1]


def test_an_unknown_trial_is_exit_2() -> None:
    code, line = _cannot("--trial", "nope", "--", "true")
    assert (code, line) == (
        2,
        "forewarn verify: unknown trial nope; forewarn verify --list shows them",
    )


def test_no_handler_at_all_is_exit_2() -> None:
    code, line = _cannot("--trial", "headers")
    assert (code, line) == (2, "forewarn verify: give the handler's command after --, or --attach")


def test_a_command_not_found_is_exit_2() -> None:
    code, line = _cannot("--", "no-such-handler-anywhere")
    assert (code, line) == (
        2,
        "forewarn verify: handler command not found: no-such-handler-anywhere",
    )


def test_a_handler_that_exits_at_once_is_exit_2() -> None:
    code, line = _cannot("--", sys.executable, "-c", "print('bye'); raise SystemExit(4)")
    assert (code, line) == (2, "forewarn verify: the handler exited at once (status 4): bye")


def _sleeping(seconds: str) -> list[int]:
    """The processes running ``sleep SECONDS`` (a value no other test uses)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            argv = cmdline.read_bytes().split(b"\0")
        except OSError:  # gone meanwhile
            continue
        if argv[:2] == [b"sleep", seconds.encode()] and _running(int(cmdline.parent.name)):
            found.append(int(cmdline.parent.name))
    return found


def test_a_handler_that_never_polls_is_exit_2_and_is_stopped() -> None:
    """docs/verify.md, "Reports and exit status": a handler that "never polls" is a run that
    could not happen: one line, exit 2, nothing left running."""
    seconds = f"300.{os.getpid()}{secrets.randbelow(10**6)}"
    code, line = _cannot("--start-timeout", "2", "--", "sleep", seconds)
    assert (code, line) == (2, "forewarn verify: the handler sent no request for events within 2 s")
    assert _sleeping(seconds) == []


def test_a_handler_that_exits_at_once_leaves_no_child_running() -> None:
    """Issue text, "Done means": "a handler that exits at once: one clear line, exit 2,
    nothing left running", a child it started in the background included."""
    seconds = f"300.{os.getpid()}{secrets.randbelow(10**6)}"
    code, line = _cannot("--", "sh", "-c", f"sleep {seconds} & exit 0")
    assert (code, line) == (2, "forewarn verify: the handler exited at once (status 0)")
    assert _sleeping(seconds) == []


#: Polls without ``Metadata: true``: each is refused with 400 (SPEC 1.1, "Headers").
NO_HEADER = """
import os, time, urllib.request
url = os.environ["FOREWARN_IMDS_ENDPOINT"] + "/metadata/scheduledevents?api-version=2020-07-01"
while True:
    try:
        urllib.request.urlopen(url, timeout=2)
    except OSError:
        pass
    time.sleep(0.5)
"""


def test_a_handler_whose_polls_are_all_refused_is_told_their_status() -> None:
    """A handler that polls without the Metadata header never gets a document: the one line
    says it did send requests, and what they were answered, not that it sent none."""
    code, line = _cannot("--start-timeout", "2", "--", sys.executable, "-c", NO_HEADER)
    assert code == 2
    assert line.startswith("forewarn verify: the handler sent ")
    assert line.endswith(" request(s) for events within 2 s, none answered 200 (status 400)")


def test_a_port_in_use_is_exit_2() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code, line = _cannot("--bind", f"127.0.0.1:{port}", "--", sys.executable, "-c", "0")
    assert code == 2
    assert line.startswith(f"forewarn verify: cannot listen on 127.0.0.1:{port}: ")


def test_a_report_with_no_folder_to_go_to_is_exit_2_before_the_handler_starts(
    tmp_path: Path,
) -> None:
    """Issue text, "Reports people use": exit 2 "when the run itself could not happen"; a
    report it could not write is found before minutes of trials, not as a traceback after
    them (whose exit status 1 would read as a failed trial)."""
    started = tmp_path / "started"
    missing = tmp_path / "no-such-folder" / "report.xml"
    code, line = _cannot("--junit", str(missing), "--", "touch", str(started))
    assert (code, line) == (
        2,
        f"forewarn verify: --junit {missing}: no folder {missing.parent} to write it in",
    )
    assert not started.exists()


def test_a_report_that_cannot_be_written_after_the_run_is_one_line_and_exit_2() -> None:
    """/dev/full takes the open and refuses the write (ENOSPC), as a disk that filled during
    the run does: the table is printed, then one line, exit 2."""
    argv = ["--trial", "headers", "--json", "/dev/full", *handler("good.py")]
    done = subprocess.run(
        [sys.executable, "-m", "forewarn", "verify", *SHORT, *argv],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "headers  PASS" in done.stdout
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        "forewarn verify: could not write the report: [Errno 28] No space left on device"
    )


def test_help_names_every_duration_timing_sets() -> None:
    """docs/verify.md, "Suites, timing and duration": ``--timing KEY=SECONDS`` sets any
    duration; ``--help`` is where a user looks for the keys, so it names each one."""
    done = subprocess.run(
        [sys.executable, "-m", "forewarn", "verify", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    words = set(done.stdout.replace(",", " ").replace("(", " ").replace(")", " ").split())
    assert set(TIMING_KEYS) <= words
    assert "notice.TYPE" in words


def test_list_names_every_trial_with_its_source() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "forewarn", "verify", "--list"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "own-vm-only  [quick, full]  Approves only events naming its own VM" in done.stdout
    assert "source:   learn.microsoft.com/" in done.stdout


def test_attach_prints_the_vms_address_and_grades_the_handler_started_there(
    tmp_path: Path,
) -> None:
    """--attach: the user runs the handler (a container, another machine) against the
    address forewarn prints; forewarn starts nothing and drives the trials."""
    report_path = tmp_path / "attached.json"
    verify = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "forewarn",
            "verify",
            "--attach",
            "--trial",
            "headers",
            "--json",
            str(report_path),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert verify.stderr is not None
    line = verify.stderr.readline()
    assert line.startswith("the handler's VM answers at http://127.0.0.1:"), line
    endpoint = line.split()[5]
    attached = subprocess.Popen(
        [sys.executable, str(HANDLERS / "good.py")],
        env={**os.environ, "FOREWARN_IMDS_ENDPOINT": endpoint},
    )
    try:
        out, _ = verify.communicate(timeout=60)
    finally:
        attached.kill()
        attached.wait()
    assert verify.returncode == 0, out
    report = RunReport.from_json(report_path.read_text())
    assert report.verdicts() == {"headers": Verdict.PASS}
    assert report.handler == f"a handler attached at {endpoint}"


@pytest.mark.parametrize(
    ("sent", "code", "said"),
    [
        (signal.SIGINT, 130, "forewarn verify: interrupted"),
        # a service manager's stop, a closed terminal: as Ctrl-C, not a handler left running
        (signal.SIGTERM, 143, "forewarn verify: stopped by SIGTERM; the handler was stopped"),
        (signal.SIGHUP, 129, "forewarn verify: stopped by SIGHUP; the handler was stopped"),
    ],
)
def test_an_interrupted_run_stops_the_handler_and_says_so(
    tmp_path: Path, sent: signal.Signals, code: int, said: str
) -> None:
    pid_file = tmp_path / "spawned.pid"
    verify = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "forewarn",
            "verify",
            "--trial",
            "own-vm-only",
            *handler("spawner.py"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "SPAWNED_PID_FILE": str(pid_file)},
    )
    try:
        deadline = time.monotonic() + 30
        while not pid_file.exists() or not pid_file.read_text():  # the handler is up
            assert time.monotonic() < deadline
            assert verify.poll() is None
            time.sleep(0.05)
        verify.send_signal(sent)
        _, err = verify.communicate(timeout=30)
    finally:
        if verify.poll() is None:
            verify.kill()
            verify.wait()
    assert verify.returncode == code, err
    assert err.strip().splitlines()[-1] == said
    assert "Traceback" not in err
    assert not _running(int(pid_file.read_text()))


# -- the engine's own faults: never a traceback ----------------------------------------------


def test_impact_again_happens_while_started_whatever_the_started_period(runs: Runs) -> None:
    """The second impact comes "while the event is still in EventStatus:"Started"" (learn.
    microsoft.com/azure/virtual-machines/windows/scheduled-events, "Event properties"; docs/
    spec.md SPEC 4.1). With a Started period no longer than the impact (3 s each here), the
    event completed with its first impact and the trial ended in a traceback; the trial keeps
    the event Started long enough on its own platform."""
    done = runs.done["impact-again"]
    assert "Traceback" not in done.err, done.err
    assert done.code == 0, done.err
    assert done.report is not None
    result = done.report.result("impact-again")
    assert result.verdict is Verdict.PASS, result.reason
    states = [s.state for s in result.evidence.states]
    assert "ImpactAgain" in states
    assert states.count("ImpactEnd") == 2, states


def test_a_trial_that_breaks_is_one_line_naming_it_and_the_handler_is_stopped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An error inside a trial is forewarn's, not the handler's: exit 2 with one line naming
    the trial (docs/verify.md, "Reports and exit status"), the handler stopped all the same."""
    from click.testing import CliRunner

    from forewarn.cli.verify import verify
    from forewarn.verify import trials
    from forewarn.verify.grading import Grade
    from forewarn.verify.model import TrialInfo
    from forewarn.verify.stage import Stage, Trial

    def drive(stage: Stage) -> None:
        stage.wait_polls(1)
        raise RuntimeError("a bug in the trial")

    broken = Trial(
        TrialInfo("broken", "A trial with a bug", "nowhere", "nothing", ("quick",)),
        drive,
        lambda observation: Grade(Verdict.PASS, "never reached"),
    )
    monkeypatch.setattr(trials, "select", lambda suite, names=(): [broken])
    pid_file = tmp_path / "spawned.pid"
    monkeypatch.setenv("SPAWNED_PID_FILE", str(pid_file))
    result = CliRunner().invoke(verify, ["--start-timeout", "20", *handler("spawner.py")])
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    last = result.output.strip().splitlines()[-1]
    assert last.startswith("forewarn verify: trial broken could not run: an internal error"), last
    assert "RuntimeError: a bug in the trial" in last
    assert "Traceback" not in result.output
    assert not _running(int(pid_file.read_text()))


def test_deleted_vm_waits_out_a_timeout_within_the_patience_and_warns_without_one(
    runs: Runs,
) -> None:
    """After its VM is deleted the handler's requests are never answered (docs/spec.md SPEC
    4.3). examples/handlers/good_stdlib.py gives up on each after its 10 s timeout, within the
    run's patience (``held``): that is a pass, not the "no timeout?" warning a window shorter
    than its timeout gave it. A handler with no timeout still gets the warning."""
    given_up = runs.done["deleted-timeout"].report
    assert given_up is not None, runs.done["deleted-timeout"].err
    result = given_up.result("deleted-vm")
    assert result.verdict is Verdict.PASS, result.reason
    assert "gave up on each and tried again" in result.reason
    waits = runs.done["deleted-none"].report
    assert waits is not None, runs.done["deleted-none"].err
    result = waits.result("deleted-vm")
    assert result.verdict is Verdict.WARN, result.reason
    assert "no timeout or one longer than 5 s" in result.reason


def test_a_scale_in_deletes_the_vm_as_an_eviction_does(runs: Runs) -> None:
    """Issue text, "Trials": "after its own VM is deleted (Preempt/Terminate) its requests are
    never answered". A scale set's Terminate deletes the VM when its impact ends (docs/spec.md
    SPEC 4.3; learn.microsoft.com/azure/virtual-machine-scale-sets/virtual-machine-scale-sets-
    terminate-notification): a handler with no timeout gets the same warning there."""
    waits = runs.done["deleted-none"].report
    assert waits is not None, runs.done["deleted-none"].err
    result = waits.result("deleted-by-terminate")
    assert result.verdict is Verdict.WARN, result.reason
    assert "after its VM was deleted" in result.reason
    assert "no timeout or one longer than 5 s" in result.reason
    assert any(s.state == "Deleted" for s in result.evidence.states)

"""``forewarn serve`` explains itself (docs/serve.md, "`forewarn serve` options"): where every VM
answers and a curl line that works for the fleet; a start-up failure is one line and exit
status 1, never a traceback."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import httpx
from e2e_support import free_port, start_up_lines

from forewarn.commands import Approve
from forewarn.storage import open_journal

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
LOOPBACK = ["127.0.0.1"]
METADATA = {"Metadata": "true"}


def _serve(*args: str) -> list[str]:
    return [sys.executable, "-m", "forewarn", "serve", *args]


def _refusal(argv: list[str]) -> str:
    finished = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    assert finished.returncode == 1, (finished.returncode, finished.stderr)
    lines = finished.stderr.strip().splitlines()
    assert len(lines) == 1, finished.stderr
    assert "Traceback" not in finished.stderr
    return lines[0]


def test_the_start_up_lines_name_every_vm_and_the_curl_line_works(tmp_path: Path) -> None:
    port, control = free_port(LOOPBACK), free_port(LOOPBACK)
    argv = _serve("--fleet", str(EXAMPLES / "fleet.yaml"), "--bind", f"127.0.0.1:{port}")
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        process = subprocess.Popen([*argv, "--control", f"127.0.0.1:{control}"], stdout=out)
    try:
        start_up_lines(log, process, "try: curl")
        text = log.read_text()
        assert "VMs: WestNO_0 at 127.0.0.2, WestNO_1 at 127.0.0.3" in text
        match = re.search(r'try: curl -H Metadata:true "(\S+)"', text)
        assert match is not None, text
        answer = httpx.get(match.group(1), headers={"Metadata": "true"})
        assert answer.status_code == 200, answer.text
        assert answer.json()["Events"] == []
        # The headline's URL is one a VM answers at (the bind address is no VM's here).
        headline = re.search(r"VM\(s\) \(.*?\) at (\S+/metadata/scheduledevents)", text)
        assert headline is not None, text
        assert headline.group(1) == f"http://127.0.0.2:{port}/metadata/scheduledevents"
        polled = httpx.get(headline.group(1) + "?api-version=2020-07-01", headers=METADATA)
        assert polled.status_code == 200, polled.text
        assert "(WestNO_0's; each VM at its own address)" in text
    finally:
        process.terminate()
        process.wait(10)


def test_a_port_alone_is_a_port_on_loopback(tmp_path: Path) -> None:
    """Seen by a newcomer: ``--bind 18960`` was taken as a host named 18960 ("cannot listen
    on 18960:16954"). A number alone is the port, on the default host."""
    port, control = free_port(LOOPBACK), free_port(LOOPBACK)
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        process = subprocess.Popen(_serve("--bind", str(port), "--control", str(control)),
                                   stdout=out)  # fmt: skip
    try:
        start_up_lines(log, process, "control: http")
        text = log.read_text()
        assert f"at http://127.0.0.1:{port}/metadata/scheduledevents;" in text
        assert f"control API at http://127.0.0.1:{control}/api/v1" in text
        url = f"http://127.0.0.1:{port}/metadata/scheduledevents?api-version=2020-07-01"
        assert httpx.get(url, headers=METADATA).status_code == 200
    finally:
        process.terminate()
        process.wait(10)
    wrong = subprocess.run(_serve("--bind", "99999"), capture_output=True, text=True, timeout=30)
    assert wrong.returncode == 2  # a usage error, as click reports a bad value
    assert "'99999': the port must be a number from 1 to 65535" in wrong.stderr


def test_a_control_address_in_use_is_one_line(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        line = _refusal(
            _serve("--bind", f"127.0.0.1:{free_port(LOOPBACK)}", "--control", f"127.0.0.1:{port}")
        )
    assert f"the control API cannot listen on 127.0.0.1:{port}" in line


def test_bind_equal_to_control_is_one_line() -> None:
    line = _refusal(_serve("--bind", "127.0.0.1:17600", "--control", "127.0.0.1:17600"))
    assert "--bind and --control are both 127.0.0.1:17600" in line


def test_a_journal_record_that_cannot_be_replayed_is_one_line(tmp_path: Path) -> None:
    data = tmp_path / "data"
    port, control = free_port(LOOPBACK), free_port(LOOPBACK)
    argv = _serve("--data-dir", str(data), "--bind", f"127.0.0.1:{port}")
    argv += ["--control", f"127.0.0.1:{control}", "--clock", "manual"]
    with subprocess.Popen(argv, stdout=subprocess.PIPE, text=True) as started:
        assert started.stdout is not None
        started.stdout.readline()  # up: its journal exists
        started.terminate()
    journal = open_journal(f"sqlite:///{data / 'forewarn.sqlite3'}")
    try:
        journal.append(Approve("vm0", ("NO-SUCH-EVENT",)).to_record(datetime.now(UTC)))
    finally:
        journal.close()
    line = _refusal(argv)
    assert "cannot replay journal record" in line
    assert "approve" in line

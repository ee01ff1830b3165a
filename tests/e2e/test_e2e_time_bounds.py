"""A clock pushed as far as it goes: every move past the platform's latest time is refused with
422 naming the bound, the server goes on answering with printable dates, and a journal
holding an impossible time is refused alike by start-up and ``forewarn store check`` [ours].

The bound is ``forewarn.domain.clock.LATEST`` (9000-01-01T00:00:00Z) with every duration at
most ``LONGEST`` (100 years), so the latest date the platform prints (a NotBefore 7 days ahead
for a predicted failure, RFC 1123 as
learn.microsoft.com/azure/virtual-machines/linux/scheduled-events shows it, "Mon, 19 Sep 2016
18:29:47 GMT") stays far from the year 9999, where ``datetime`` stops.
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any

import pytest
from e2e_support import ForewarnServer, StartServer, free_port, run

from forewarn.commands import ClockMoved
from forewarn.domain.clock import LATEST, LONGEST
from forewarn.server.runner import ServeSettings
from forewarn.server.state import open_service

pytestmark = pytest.mark.e2e

BOUND = "9000-01-01T00:00:00+00:00"
#: The VM's first request must not wait for a clock that can no longer move.
NO_FIRST_CALL_DELAY = ("--timing", "first_call_delay=0")


def _poll(server: ForewarnServer) -> tuple[datetime, dict[str, Any]]:
    answer = server.document_response()
    assert answer.status == 200, answer
    date = answer.header("Date")
    assert date is not None
    return parsedate_to_datetime(date), answer.json()


def test_the_clock_stops_at_the_bound_and_every_date_stays_printable(
    start_server: StartServer, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    server = start_server(extra=["--data-dir", str(data), *NO_FIRST_CALL_DELAY])
    _poll(server)
    assert server.control.post("/clock/set", json={"now": "8900-01-01T00:00:00Z"}).is_success
    statuses = []
    for _ in range(12):  # 100 years a step, past the bound and on to the year 9999
        moved = server.control.post("/clock/advance", json={"seconds": LONGEST.total_seconds()})
        statuses.append(moved.status_code)
        if moved.status_code != 200:
            break
    assert set(statuses) == {200, 422}, statuses
    refusal = moved.json()["error"]
    assert BOUND in refusal
    assert "latest time the platform can show" in refusal
    assert server.clock() < BOUND

    at_the_bound = server.control.post("/clock/set", json={"now": BOUND})
    assert at_the_bound.status_code == 200, at_the_bound.text
    for path, body in (
        ("/clock/advance", {"seconds": 1}),
        ("/clock/set", {"now": "9000-01-01T00:00:01Z"}),
        ("/clock/set", {"now": "9999-12-31T23:59:59Z"}),
    ):
        refused = server.control.post(path, json=body)
        assert refused.status_code == 422, refused.text
        assert BOUND in refused.json()["error"]
    assert server.clock() == BOUND

    # The longest documented notice, from the latest time: 7 days of predicted failure to a
    # VM that asks again (idle for centuries, it was no longer receiving).
    _poll(server)
    predicted = server.control.post("/hosts/host-vm0/predict-failure")
    assert predicted.status_code == 200, predicted.text
    date, document = _poll(server)
    assert date == LATEST
    (event,) = document["Events"]
    assert parsedate_to_datetime(event["NotBefore"]) == LATEST + timedelta(days=7)
    server.process.assert_healthy()

    # The same data directory starts again, and the store check agrees that it is sound.
    server.stop()
    checked = run([sys.executable, "-m", "forewarn", "store", "check", "--data-dir", str(data)])
    assert checked.returncode == 0, checked.stderr
    assert f"last record at {BOUND}" in checked.stdout
    again = start_server(extra=["--data-dir", str(data), *NO_FIRST_CALL_DELAY])
    assert again.clock() == BOUND
    date, document = _poll(again)
    assert date == LATEST
    assert len(document["Events"]) == 1


def test_a_journal_past_the_bound_is_refused_by_start_up_and_store_check_alike(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    journal = open_service(ServeSettings(clock="manual", data_dir=data)).journal
    assert journal is not None
    try:  # what a clock advanced step by step to the last day datetime knows leaves
        journal.append(ClockMoved().to_record(datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)))
    finally:
        journal.close()
    port, control = free_port(["127.0.0.1"]), free_port(["127.0.0.1"])
    serve = [sys.executable, "-m", "forewarn", "serve", "--data-dir", str(data), "--clock"]
    serve += ["manual", "--bind", f"127.0.0.1:{port}", "--control", f"127.0.0.1:{control}"]

    started_up = run(serve)
    checked = run([sys.executable, "-m", "forewarn", "store", "check", "--data-dir", str(data)])
    lines = []
    for finished in (started_up, checked):
        assert finished.returncode == 1, (finished.returncode, finished.stdout, finished.stderr)
        assert "Traceback" not in finished.stderr
        (line,) = finished.stderr.strip().splitlines()
        lines.append(line)
    assert lines[0] == lines[1]
    assert "cannot replay journal record 1 (clock)" in lines[0]
    assert f"9999-12-31T23:59:59+00:00: it is past {BOUND}" in lines[0]

"""A full disk under a real ``forewarn serve --data-dir`` in the middle of a campaign.

Issue text ("A full disk loses acknowledged state"): with ``--data-dir`` on a 2 MB tmpfs,
after the disk filled, restarts answered 503 yet were listed and shown (vmB at incarnation
4); a VM's approval answered 500 (``KeyError: 503``: the socket server had no reason phrase
for it) yet started its event; after a restart of forewarn an acknowledged event was gone,
an incarnation went back from 3 to 2, and a VM was shown an EventId another VM had been
shown for another event.

The rule (docs/serve.md, "State that survives restarts"): a change is shown to nobody until the
journal holds it; one the journal cannot hold answers 503 (IMDS's own text to a VM, SPEC 1:
"503 `Internal service unavailable. Retry later`") and changes nothing; reads go on, and
changes are taken again once the disk has room. Then ``kill -9`` and a restart: nothing
acknowledged lost, nothing refused shown, no DocumentIncarnation back, no EventId twice
(the run and its checks: tests/support/fault_tier.py).
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from e2e_support import ForewarnServer, start_forewarn, stopped_at_exit, wait_for
from fault_tier import SmallDisk, StoreFault, campaign_through_a_fault

from forewarn.storage import SqliteJournal
from forewarn.storage.errors import StoreUnavailableError


@pytest.mark.e2e
def test_a_full_disk_refuses_changes_shows_none_of_them_and_a_restart_loses_nothing(
    tmp_path: Path, small_disk: SmallDisk
) -> None:
    fault = StoreFault(small_disk.fill, small_disk.free, says="database or disk is full")
    data_dir = small_disk.root / "data"
    campaign_through_a_fault(tmp_path, ("--data-dir", str(data_dir)), fault)


def test_a_first_start_on_a_full_disk_leaves_no_empty_journal_behind(
    small_disk: SmallDisk,
) -> None:
    """A journal file that is empty is refused (it lost what it held: see
    test_corrupt_journals.py), so the open that creates one and cannot write its header
    removes it: the start on a full disk says so, and the next, with room, starts."""
    path = small_disk.root / "data" / "forewarn.sqlite3"
    path.parent.mkdir()
    small_disk.fill()
    with pytest.raises(StoreUnavailableError, match="disk is full"):
        SqliteJournal(path)
    assert list(path.parent.iterdir()) == []
    small_disk.free()
    with SqliteJournal(path) as journal:
        assert journal.last_sequence() == 0


def _probe(server: ForewarnServer, path: str) -> tuple[int, dict[str, object]]:
    """``GET path`` on the control port as a probe asks: no token."""
    control = httpx.URL(server.control_url)
    response = httpx.get(f"http://{control.netloc.decode()}{path}", timeout=10, trust_env=False)
    return response.status_code, response.json()


@pytest.mark.e2e
def test_a_full_disk_makes_readiness_503_saying_so_while_liveness_stays_200(
    tmp_path: Path, small_disk: SmallDisk
) -> None:
    """docs/control.md, "Health". Issue text: ``/healthz`` said ready while every write
    answered 503. With the data directory's file system full, ``/readyz`` (and ``/healthz``)
    say why before any change is tried, ``/livez`` stays 200 (a restart would not make
    room), and once there is room again it is ready again."""
    server = start_forewarn(tmp_path, extra=["--data-dir", str(small_disk.root / "data")])
    with stopped_at_exit(server):
        assert _probe(server, "/readyz") == (200, {"status": "ready"})
        small_disk.fill()
        full = (503, {"status": "unready", "reason": "the store's file system is full"})
        wait_for(lambda: _probe(server, "/readyz") == full, what="/readyz to say the disk is full")
        assert _probe(server, "/healthz") == full
        assert _probe(server, "/livez") == (200, {"status": "alive"})
        small_disk.free()
        wait_for(
            lambda: _probe(server, "/readyz") == (200, {"status": "ready"}),
            what="/readyz ready again",
        )

"""PostgreSQL cut away under a real ``forewarn serve --store`` in the middle of a campaign.

The same rule and the same run as a full disk under SQLite (tests/durability/test_full_disk.py,
the run and its checks in tests/support/fault_tier.py), for the front-ends of a PostgreSQL store:
docs/scale-out.md, "What a VM sees when PostgreSQL restarts": reads go on from the last state
applied; "operations through the control API, and a VM's approval, are refused with `503`
until PostgreSQL is back, and nothing is half applied"; a VM's first request too, as it is a
change. Issue text: during a PostgreSQL outage a VM's approval got ``500`` where IMDS's own
503 was promised (SPEC 1: "503 `Internal service unavailable. Retry later`").

PostgreSQL goes away through a TCP proxy between forewarn and the real server
(tests/support/tcp_proxy.py): every connection reset, new ones refused, until it is restored.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

import pytest
from fault_tier import StoreFault, campaign_through_a_fault
from tcp_proxy import TcpProxy


@pytest.mark.e2e
def test_a_cut_postgresql_refuses_changes_shows_none_of_them_and_a_restart_loses_nothing(
    tmp_path: Path, shared_store: str
) -> None:
    parts = urlsplit(shared_store)
    assert parts.hostname is not None
    with TcpProxy((parts.hostname, parts.port or 5432)) as proxy:
        user = f"{parts.username}@" if parts.username else ""
        store = parts._replace(netloc=f"{user}127.0.0.1:{proxy.port}").geturl()
        fault = StoreFault(proxy.cut, proxy.restore, says="cannot write now")
        campaign_through_a_fault(tmp_path, ("--store", store), fault)

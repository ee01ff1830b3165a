"""Front-ends sharing one PostgreSQL namespace: each test gets a namespace of its own.

PostgreSQL is the one the storage tests use (``FOREWARN_TEST_POSTGRES_URL``, default the local
trust-auth server's database ``test``): skipped with the reason when it cannot be reached,
failed under ``CI``, where its absence must not pass quietly.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from postgres_support import require_postgres

from forewarn.server.state import OpenedState

#: Two fault domains on hosts of their own, so a campaign has two steps, and a third VM in
#: the set so approvals have more than one party to come from.
FLEET = """
availabilitySets: [{name: west, faultDomains: 2}]
vms:
  - {name: WestNO_0, address: 127.0.0.2, availabilitySet: west, faultDomain: 0, host: h1}
  - {name: WestNO_1, address: 127.0.0.3, availabilitySet: west, faultDomain: 1, host: h2}
  - {name: WestNO_2, address: 127.0.0.4, availabilitySet: west, faultDomain: 1, host: h2}
"""


@pytest.fixture(scope="session")
def cluster_postgres() -> str:
    return require_postgres()


@pytest.fixture
def shared_store(cluster_postgres: str) -> Iterator[str]:
    """A store URL naming a namespace of this test's own, removed afterwards."""
    namespace = f"cluster_{uuid.uuid4().hex[:12]}"
    try:
        yield f"{cluster_postgres}?namespace={namespace}"
    finally:
        with psycopg.connect(cluster_postgres, autocommit=True) as conn:
            conn.execute("DELETE FROM public.forewarn_namespaces WHERE namespace = %s", [namespace])


@pytest.fixture
def fleet_file(tmp_path: Path) -> Path:
    path = tmp_path / "fleet.yaml"
    path.write_text(FLEET)
    return path


@pytest.fixture
def pair(shared_store: str, fleet_file: Path) -> Iterator[list[OpenedState]]:
    """Two front-ends on this test's namespace, opened in process."""
    from .test_front_ends_in_process import opened_front_ends

    yield from opened_front_ends(shared_store, fleet_file, 2)

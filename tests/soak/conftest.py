"""The soak's PostgreSQL namespace: one of its own per run, removed afterwards with the schema
Event Grid keeps beside it.

PostgreSQL is the suite's (``FOREWARN_TEST_POSTGRES_URL``, default the local trust-auth
server's database ``test``): the soak skips with the reason when it cannot be reached, and
fails under ``CI``, where its absence must not pass quietly (tests/support/machine_support.py).
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterator

import psycopg
import pytest
from postgres_support import require_postgres
from psycopg import sql


@pytest.fixture
def soak_store() -> Iterator[str]:
    """A store URL naming a namespace of this run's own; the namespace's journal and its
    Event Grid schema (named as ``forewarn.eventgrid.postgres`` names it) are removed after."""
    server = require_postgres()
    namespace = f"soak_{uuid.uuid4().hex[:12]}"
    try:
        yield f"{server}?namespace={namespace}"
    finally:
        scope = f"public\x00{namespace}"
        schema = "forewarn_eventgrid_" + hashlib.sha256(scope.encode()).hexdigest()[:16]
        with psycopg.connect(server, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
            conn.execute("DELETE FROM public.forewarn_namespaces WHERE namespace = %s", [namespace])

"""The PostgreSQL the suite uses, named once for every test folder.

``FOREWARN_TEST_POSTGRES_URL`` names the server (default: the local trust-auth server's database
``test``). Without it a test that needs it skips and says why, except under ``CI``, where
PostgreSQL is part of the machine and its absence must fail the run rather than pass quietly.
"""

from __future__ import annotations

import functools
import os

import pytest

POSTGRES_URL = os.environ.get(
    "FOREWARN_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)


@functools.cache
def postgres_problem() -> str | None:
    """Why PostgreSQL cannot be used here, or None when it can (asked once a run)."""
    try:
        import psycopg
    except ImportError:
        return "psycopg is not installed (pip install -e '.[dev]')"
    try:
        with psycopg.connect(POSTGRES_URL, connect_timeout=2) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        return f"PostgreSQL at {POSTGRES_URL} is unreachable: {' '.join(str(exc).split())}"
    return None


def require_postgres() -> str:
    """The server's URL, or a skip (a failure under CI) saying why it cannot be used."""
    problem = postgres_problem()
    if problem is not None:
        if os.environ.get("CI"):
            pytest.fail(f"CI has PostgreSQL, but: {problem}")
        pytest.skip(problem)
    return POSTGRES_URL

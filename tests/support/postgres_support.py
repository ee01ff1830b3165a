"""The PostgreSQL the suite uses, named once for every test folder.

``FOREWARN_TEST_POSTGRES_URL`` names the server (default: the local trust-auth server's database
``test``). Without it a test that needs it skips and says why, except under ``CI``, where
PostgreSQL is part of the machine and its absence fails the run: the rule of every test that
needs the machine, in :mod:`machine_support`.
"""

from __future__ import annotations

from machine_support import POSTGRES_URL, postgres_problem, require_postgres

__all__ = ["POSTGRES_URL", "postgres_problem", "require_postgres"]

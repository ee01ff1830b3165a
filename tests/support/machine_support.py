"""What a test needs from the machine, and what its absence means: one rule for the suite.

``.ci/run`` installs or expects everything the tiers beyond the unit tests drive: curl, iproute2
and root (network namespaces), Debian's chromium (driven by Playwright, from the ``dev``
extra), wrk, nginx and gcc (the benchmarks' smoke mode), py-spy (``dev`` extra, allowed to read
other processes), setpriv (util-linux) and a PostgreSQL server on 127.0.0.1:5432. Under ``CI``
a test that needs one of them and cannot have it **fails, naming it**: a CI machine that lost a
tool must not pass without the tier that needs it. On a developer's machine it **skips with
the reason**. Every such check goes through :func:`require`, so a new test that needs the
machine writes ``require(problem)`` (or one of the ``require_*`` helpers below), never a bare
``pytest.skip``. A skip that is part of the design (a documentation block marked as not
runnable) is a plain ``pytest.skip`` and is listed in docs/contributing.md.

This module is on ``sys.path`` for every test folder (pytest's ``pythonpath``).
"""

from __future__ import annotations

import functools
import importlib.util
import os
import shutil
import sys
from pathlib import Path
from typing import NoReturn

import pytest

__all__ = [
    "CHROMIUM",
    "POSTGRES_URL",
    "namespace_problem",
    "postgres_problem",
    "require",
    "require_chromium",
    "require_module",
    "require_namespaces",
    "require_postgres",
    "require_py_spy",
    "require_tool",
    "unavailable",
    "under_ci",
]

POSTGRES_URL = os.environ.get(
    "FOREWARN_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)
#: Debian's chromium, which Playwright drives (``executablePath``): no browser is downloaded.
CHROMIUM = "/usr/bin/chromium"


def under_ci() -> bool:
    """Whether this run is CI's (``CI`` set to anything but empty, ``0`` or ``false``)."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def unavailable(problem: str) -> NoReturn:
    """End the test for want of ``problem``: a failure under CI, a skip elsewhere."""
    if under_ci():
        pytest.fail(f"CI provides this, but: {problem}", pytrace=False)
    pytest.skip(problem)


def require(problem: str | None) -> None:
    """Go on when ``problem`` is None; otherwise :func:`unavailable`."""
    if problem is not None:
        unavailable(problem)


def require_tool(name: str, why: str, *, package: str | None = None) -> str:
    """The path of the command ``name`` (also looked for in /usr/sbin, which a non-root PATH
    may lack), or :func:`unavailable` saying ``why`` it is needed and how to install it."""
    found = shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin")
    if found is None:
        unavailable(f"{name} is not installed ({why}; apt-get install -y {package or name})")
    return found


def require_module(name: str) -> None:
    """The Python package ``name`` (of the ``dev`` extra) is importable."""
    if importlib.util.find_spec(name) is None:
        unavailable(f"{name} is not installed (pip install -e '.[dev]')")


def namespace_problem() -> str | None:
    """Why no network namespace can be made here, or None when one can."""
    if not sys.platform.startswith("linux"):
        return f"network namespaces are Linux-only (this is {sys.platform})"
    if os.geteuid() != 0:
        return f"creating a network namespace needs root (running as uid {os.geteuid()})"
    if shutil.which("ip") is None and shutil.which("ip", path="/usr/sbin:/sbin") is None:
        return "iproute2's `ip` is not installed (apt-get install -y iproute2)"
    return None


def require_namespaces() -> None:
    require(namespace_problem())


@functools.cache
def postgres_problem() -> str | None:
    """Why PostgreSQL cannot be used here, or None when it can (asked once a run). The
    benchmarks have a check of their own (``bench.propagation``): ``bench`` is not importable
    from every test folder (tests/bench/conftest.py loads it by path)."""
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
    """The server's URL, or :func:`unavailable` saying why it cannot be used."""
    require(postgres_problem())
    return POSTGRES_URL


def require_chromium() -> str:
    """Debian's chromium, with Playwright importable to drive it."""
    if not Path(CHROMIUM).exists():
        unavailable(f"Debian's chromium is not at {CHROMIUM} (apt-get install -y chromium)")
    require_module("playwright")
    return CHROMIUM


def require_py_spy() -> str:
    """py-spy on the PATH or beside this interpreter (the ``dev`` extra installs it there)."""
    beside = Path(sys.executable).parent / "py-spy"
    found = shutil.which("py-spy") or (str(beside) if os.access(beside, os.X_OK) else None)
    if found is None:
        unavailable("py-spy is not installed (pip install -e '.[dev]')")
    return found

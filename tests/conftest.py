"""Settings every test process and every server it starts share.

The control API requires its token (``forewarn.control_token``): the whole run uses one,
through ``FOREWARN_TOKEN``, which ``forewarn serve``, the CLI and the scenario runner all read,
and keeps token files in a directory of its own rather than the user's.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from interrupts import ctrl_c_as_in_a_terminal
from suite_order import longest_first, recorded_costs, workers_for
from tls_context import share_the_default_tls_context
from warm_bytecode import warm

ctrl_c_as_in_a_terminal()
share_the_default_tls_context()
# The processes the tests start (servers, the CLI, handlers, probes) run as an installed
# package does, from compiled bytecode: with writing it off (PYTHONDONTWRITEBYTECODE, set in
# some environments) each of them compiled forewarn's modules again, about a tenth of a second
# of CPU a start, hundreds of starts a run.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
os.environ["FOREWARN_TOKEN"] = "forewarn-test-suite-token"
os.environ["FOREWARN_RUNTIME_DIR"] = tempfile.mkdtemp(prefix="forewarn-runtime-")
# Each test process (the controller and every worker) makes its own: gone when it ends.
atexit.register(shutil.rmtree, os.environ["FOREWARN_RUNTIME_DIR"], ignore_errors=True)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The longest tests first on every worker (``suite_order``), so none is left with one
    at the end."""
    workers = getattr(config, "workerinput", {}).get("workercount", 1)
    items[:] = longest_first(items, recorded_costs(), workers)


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n auto``: ``workers_for`` the cores this process may use, unless
    ``PYTEST_XDIST_AUTO_NUM_WORKERS`` says (pytest-xdist's own setting)."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None  # pytest-xdist reads it
    return workers_for(len(os.sched_getaffinity(0)))


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    """Before pytest-xdist starts its workers (its own ``pytest_sessionstart``), the test
    modules it will collect rewritten and forewarn compiled, once (``warm_bytecode``)."""
    config = session.config
    if hasattr(config, "workerinput") or not config.getoption("numprocesses", None):
        return
    root = Path(__file__).resolve().parents[1]
    asked = [Path(arg.split("::")[0]).resolve() for arg in config.args] or [root / "tests"]
    tests = [path for path in asked if path.exists() and path.is_relative_to(root / "tests")]
    warm(config, tests, [root / "src" / "forewarn", root / "tests" / "support"])

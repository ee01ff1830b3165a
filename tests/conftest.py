"""Settings every test process and every server it starts share.

The control API requires its token (``forewarn.control_token``): the whole run uses one,
through ``FOREWARN_TOKEN``, which ``forewarn serve``, the CLI and the scenario runner all read,
and keeps token files in a directory of its own rather than the user's.
"""

from __future__ import annotations

import os
import tempfile

import pytest
from suite_order import longest_first, recorded_costs

os.environ["FOREWARN_TOKEN"] = "forewarn-test-suite-token"
os.environ["FOREWARN_RUNTIME_DIR"] = tempfile.mkdtemp(prefix="forewarn-runtime-")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The longest tests first (``suite_order``), so no worker is left with one at the end."""
    items[:] = longest_first(items, recorded_costs())

"""Each public module says what it exports, and exports only what it has.

A module whose name, or whose package's, starts with ``_`` is internal; every other module
under the packages below lists its public names in ``__all__``, so ``from module import *``
and documentation tools see a surface chosen on purpose (httpx and structlog do the same).
"""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"
#: Held to the rule: the top-level modules and every package, whole.
PACKAGES = (
    "agent",
    "cli",
    "client",
    "cluster",
    "config",
    "domain",
    "scenario",
    "server",
    "storage",
    "testing",
    "verify",
    "wire",
)


def public_modules() -> list[str]:
    root = SRC / "forewarn"
    paths = [path for path in root.glob("*.py") if path.name != "__main__.py"]
    paths += [path for package in PACKAGES for path in (root / package).rglob("*.py")]
    names = []
    for path in sorted(set(paths)):
        parts = path.relative_to(SRC).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        name = ".".join(parts)
        if not any(part.startswith("_") for part in parts):
            names.append(name)
    return names


MODULES = public_modules()


def test_the_modules_were_found() -> None:
    assert {"forewarn.service", "forewarn.server.imds", "forewarn.testing"} <= set(MODULES)
    assert "forewarn.server._control_models" not in MODULES


@pytest.mark.parametrize("name", MODULES)
def test_a_public_module_lists_what_it_exports(name: str) -> None:
    module = importlib.import_module(name)
    exported = getattr(module, "__all__", None)
    assert isinstance(exported, list), f"{name} has no __all__"
    assert len(set(exported)) == len(exported), f"{name}: a name listed twice"
    missing = [item for item in exported if not hasattr(module, item)]
    assert missing == [], f"{name} lists names it does not have"

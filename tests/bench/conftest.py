"""The benchmark suite's smoke tier.

``bench`` is a top-level package beside ``src``. pytest's importlib mode neither puts the
repository root on ``sys.path`` nor keeps the name free: it may register this very folder
(``tests/bench``) as an empty module called ``bench``. So the real package is loaded here,
by its path, under its own name, before any test module imports it.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "bench"


def _load_bench() -> None:
    loaded = sys.modules.get("bench")
    if (
        loaded is not None
        and Path(getattr(loaded, "__file__", "") or "") == PACKAGE / "__init__.py"
    ):
        return
    for name in [name for name in sys.modules if name == "bench" or name.startswith("bench.")]:
        if name != __name__:
            del sys.modules[name]
    spec = importlib.util.spec_from_file_location(
        "bench", PACKAGE / "__init__.py", submodule_search_locations=[str(PACKAGE)]
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench"] = module
    spec.loader.exec_module(module)
    if str(ROOT) not in sys.path:
        sys.path.append(str(ROOT))  # for ``python -m bench`` subprocesses' imports too


_load_bench()

"""Compiled code made once, before pytest-xdist starts its workers.

Each worker imports every test module it collects, and pytest rewrites a test module's
asserts before compiling it (about 7 s of CPU for the whole suite), caching the result beside
it; forewarn's own modules are compiled by whoever imports them first. On a fresh checkout
(``.ci/run`` clones one) nothing is cached yet, so every worker did all of it at once, four
times over, on two cores. Here the process that starts the workers does it once, on every
core, and the workers (and the processes the tests start) find it made.

What is made is what the workers would have made: pytest's rewritten modules through its own
functions, checked against their source's hash when read, and CPython's ``__pycache__`` files
through :mod:`compileall`. Should pytest's internals change, nothing is made and the workers
do it as before.
"""

from __future__ import annotations

import compileall
import importlib.util
import multiprocessing
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

#: The pytest configuration the forked rewriting processes use (set before they fork).
_CONFIG: Any = None


def warm(config: Any, tests: Iterable[Path], sources: Iterable[Path]) -> None:
    """Rewrite the test modules under ``tests`` as pytest would, and compile the modules
    under ``sources``, on every core this process may use."""
    try:
        from _pytest.assertion import rewrite
    except ImportError:
        return
    if not all(hasattr(rewrite, name) for name in ("_rewrite_test", "_write_pyc", "PYC_TAIL")):
        return
    cores = len(os.sched_getaffinity(0))
    for source in sources:
        compileall.compile_dir(str(source), quiet=1, workers=cores)
    stale = [path for path in _test_modules(tests) if not _cached(path, rewrite.PYC_TAIL)]
    if not stale:
        return
    global _CONFIG
    _CONFIG = config
    try:
        with multiprocessing.get_context("fork").Pool(min(cores, len(stale))) as pool:
            pool.map(_rewrite, stale, chunksize=8)
    finally:
        _CONFIG = None


def _test_modules(roots: Iterable[Path]) -> list[Path]:
    found: list[Path] = []
    for root in roots:
        candidates = [root] if root.is_file() else root.rglob("*.py")
        found += [
            path
            for path in candidates
            if path.name == "conftest.py"
            or (path.name.startswith("test_") and path.suffix == ".py")
        ]
    return sorted(set(found))


def _cached(path: Path, tail: str) -> bool:
    """Whether pytest's cached rewrite of ``path`` is of its source as it is now."""
    pyc = path.parent / "__pycache__" / (path.name[:-3] + tail)
    try:
        with pyc.open("rb") as cached:
            header = cached.read(16)
    except OSError:
        return False
    return header[8:16] == importlib.util.source_hash(path.read_bytes())[:8]


def _rewrite(path: Path) -> None:
    from _pytest.assertion import rewrite
    from _pytest.assertion.rewrite import assertstate_key

    cache = path.parent / "__pycache__"
    cache.mkdir(exist_ok=True)
    source_hash, code = rewrite._rewrite_test(path, _CONFIG)
    rewrite._write_pyc(
        _CONFIG.stash[assertstate_key],
        code,
        source_hash,
        cache / (path.name[:-3] + rewrite.PYC_TAIL),
    )


__all__ = ["warm"]

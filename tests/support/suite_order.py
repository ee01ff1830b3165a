"""The order the suite's tests start in: the longest first.

The README's test command runs a worker per core, each taking the next test; a test of tens of
seconds that starts last keeps its worker busy while the others have nothing left. Started
first, the short tests fill in around it. The costs come from a recorded run
(``tests/durations.txt``); a test not listed there keeps its place.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

#: Seconds each long test took in a recorded run (``seconds node-id`` a line; how to refresh
#: it: docs/contributing.md, "Suite time").
RECORDED_COSTS = Path(__file__).resolve().parents[1] / "durations.txt"
#: Fixtures set up once for a module or class: the tests sharing one stay together.
_SHARED_SCOPES = {"module", "class", "package"}


def recorded_costs() -> dict[str, float]:
    costs: dict[str, float] = {}
    if RECORDED_COSTS.exists():
        for line in RECORDED_COSTS.read_text(encoding="utf-8").splitlines():
            if line.strip() and not line.startswith("#"):
                seconds, node_id = line.split(maxsplit=1)
                costs[node_id] = float(seconds)
    return costs


def _shares_fixtures(item: pytest.Item) -> bool:
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return False
    return any(
        definitions[-1].scope in _SHARED_SCOPES
        for definitions in info.name2fixturedefs.values()
        if definitions
    )


def longest_first(
    items: list[pytest.Item], costs: dict[str, float], workers: int = 1
) -> list[pytest.Item]:
    """``items`` with the longest tests first, the others in their order after them; the
    tests of a module sharing a module- or class-wide fixture stay together, the module
    counted as long as its longest test.

    With ``workers``, pytest-xdist's ``worksteal`` hands each worker a contiguous share of
    the list, of an equal count, and the idle ones then take from the others' tails. So the
    list is dealt as that many shares, each beginning with its part of the long modules (the
    next longest to the share with the fewest seconds so far) and filled up with short tests:
    every worker starts on long tests, and what is left to share at the end is short."""
    modules: dict[str, list[pytest.Item]] = {}
    for item in items:
        modules.setdefault(item.nodeid.split("::", 1)[0], []).append(item)

    def cost(item: pytest.Item) -> float:
        return costs.get(item.nodeid, 0.0)

    # What is dealt: a module whose tests share a fixture as a whole, else each long test.
    long_modules: list[list[pytest.Item]] = []
    short: list[pytest.Item] = []
    for module in modules.values():
        if max(map(cost, module)) == 0.0:
            short += module
        elif any(map(_shares_fixtures, module)):
            long_modules.append(module)
        else:
            long_modules += [[item] for item in module if cost(item) > 0.0]
            short += [item for item in module if cost(item) == 0.0]
    long_modules.sort(key=lambda module: -max(map(cost, module)))

    sizes: list[int] = []
    left = len(items)
    for dealt in range(workers):  # as worksteal's first hand-out counts them
        sizes.append(left // (workers - dealt))
        left -= sizes[-1]
    shares: list[list[pytest.Item]] = [[] for _ in sizes]
    seconds = [0.0 for _ in sizes]
    for module in long_modules:
        room = [
            index for index, size in enumerate(sizes) if size - len(shares[index]) >= len(module)
        ]
        if room:
            index = min(room, key=lambda i: seconds[i])
        else:
            index = max(range(len(sizes)), key=lambda i: sizes[i] - len(shares[i]))
        shares[index] += module
        seconds[index] += sum(map(cost, module))
    ordered: list[pytest.Item] = []
    for index, share in enumerate(shares):
        fill = max(0, sizes[index] - len(share))
        ordered += share + short[:fill]
        del short[:fill]
    return ordered + short


def workers_for(cores: int) -> int:
    """Workers for ``-n auto``: two a core, at most four more than the cores. Most of the
    suite's long tests wait on real clocks (a documented 7 s impact, a 30 s eviction notice,
    the first-call delay, servers starting) rather than compute; a worker per core leaves the
    cores idle through those waits, a second one a core fills them."""
    return min(2 * cores, cores + 4)


#: A line of pytest's ``--durations`` listing: seconds, phase, test.
_DURATION = re.compile(r"^([0-9.]+)s (?:setup|call|teardown)\s+(\S.*)$")
#: The tests recorded: those of at least this many seconds.
RECORDED_FROM = 3.0


def recorded(listing: str) -> str:
    """``tests/durations.txt`` from the output of ``pytest --durations=0``: each test's
    setup, call and teardown added, the tests of ``RECORDED_FROM`` seconds and more, longest
    first."""
    seconds: dict[str, float] = {}
    for line in listing.splitlines():
        if found := _DURATION.match(line.rstrip()):
            node_id = found.group(2)
            seconds[node_id] = seconds.get(node_id, 0.0) + float(found.group(1))
    kept = sorted((s, n) for n, s in seconds.items() if s >= RECORDED_FROM)
    lines = [f"{s:.1f} {n}" for s, n in sorted(kept, key=lambda pair: -pair[0])]
    return _HEADER + "".join(line + "\n" for line in lines)


_HEADER = """\
# Seconds each test took in a recorded run (setup, call and teardown added), the tests of at
# least 3 s, longest first: what tests/support/suite_order.py starts first. Refresh it as
# docs/contributing.md, "Suite time", says; a test missing from it keeps its place.
"""

if __name__ == "__main__":  # python tests/support/suite_order.py LISTING > tests/durations.txt
    sys.stdout.write(recorded(Path(sys.argv[1]).read_text(encoding="utf-8")))

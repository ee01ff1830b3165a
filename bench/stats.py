"""Percentiles, of sorted values and of the load generator's histograms, by one rule.

Nearest rank: the p-th percentile is the smallest value with at least p of all values at or
below it. The generator (``bench/loadgen/poller.c``) reports each value as the upper bound of
its histogram bucket (exact below 1,024 us, within 0.2% above), never above the largest value
seen; merging several generator processes' histograms and taking a percentile here gives what
one process would have reported for all their polls.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence

#: One histogram bucket as the generator prints it: (upper bound in microseconds, count).
Bucket = tuple[int, int]


def percentile(sorted_values: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile of already sorted values (0.0 when there are none)."""
    if not sorted_values:
        return 0.0
    rank = max(0, min(len(sorted_values) - 1, math.ceil(fraction * len(sorted_values)) - 1))
    return sorted_values[rank]


def merge_histograms(histograms: Iterable[Iterable[Sequence[int]]]) -> list[Bucket]:
    """One histogram of several, bucket by bucket (the buckets are the same everywhere)."""
    counts: Counter[int] = Counter()
    for histogram in histograms:
        for value, count in histogram:
            counts[int(value)] += int(count)
    return sorted(counts.items())


def histogram_percentile_ms(buckets: Sequence[Bucket], fraction: float, max_us: float) -> float:
    """Nearest-rank percentile of a histogram, in milliseconds, never above ``max_us``."""
    total = sum(count for _, count in buckets)
    if total == 0:
        return 0.0
    rank = max(1, math.ceil(fraction * total))
    seen = 0
    for value, count in buckets:
        seen += count
        if seen >= rank:
            return min(value, max_us) / 1000
    return max_us / 1000

"""Where a server's CPU goes, from py-spy's samples: the profile that explains a figure.

``py-spy record --native --format raw`` writes one line per distinct stack, its frames from
the outermost to the innermost separated by ``;``, then the number of samples that caught it.
Each sample is put in one *layer* by its innermost frames:

- **idle**, left out of the shares: the innermost frame is the loop's wait for events
  (``epoll_wait``), where a server sleeps; py-spy cannot tell a sleeping thread from a busy
  one once it reads native stacks, so these samples are time, not CPU;
- **system calls**: the innermost frame is in the C library (``write``, ``read``,
  ``accept4``, ``close``, ``epoll_ctl``): the kernel's TCP work, which every server pays;
- otherwise the innermost Python frame (a file ending ``.py``) says whose work it is, C
  callees included: forewarn's own modules by layer, the Python floor's protocol, or the
  event loop (uvloop, asyncio, the standard library it calls).

Only shares of one profile are read from it; CPU per poll comes from the measured rounds,
which no profiler slowed.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from typing import Any

IDLE = "idle"
SYSTEM_CALLS = "system calls"
EVENT_LOOP = "event loop (uvloop, asyncio)"
#: Python files and the layer their frames belong to, the first match deciding.
LAYERS = (
    ("forewarn/server/http/", "connection (server/http/)"),
    ("forewarn/server/imds.py", "endpoint (server/imds.py)"),
    ("forewarn/server/_activity.py", "dashboard's record (server/_activity.py)"),
    ("forewarn/service.py", "service (service.py)"),
    ("forewarn/domain/", "domain (domain/)"),
    ("forewarn/", "forewarn, other"),
    ("bench/floor.py", "the floor's protocol (bench/floor.py)"),
)
#: ``name (file:line)`` for a Python frame; native ones name a C file or a shared library.
_PYTHON_FRAME = re.compile(r"\((?P<file>[^():]+\.py):\d+\)$")
_LIBC = "(libc.so"
#: The C library's calls where the event loop sleeps until something happens.
_WAITS = ("epoll_wait ", "epoll_pwait ", "epoll_pwait2 ")
#: Frames to look through to their caller: code made at run time (a dataclass's __init__).
_GENERATED = "(<string>:"


def layer_of(frames: list[str]) -> str:
    """The layer of one sample, ``frames`` from the outermost to the innermost."""
    if frames and _LIBC in frames[-1]:
        return IDLE if frames[-1].startswith(_WAITS) else SYSTEM_CALLS
    for frame in reversed(frames):
        if _GENERATED in frame:
            continue
        match = _PYTHON_FRAME.search(frame)
        if match is None:
            continue
        path = match.group("file")
        for prefix, layer in LAYERS:
            if path.startswith(prefix):
                return layer
        return EVENT_LOOP
    return EVENT_LOOP


def parse_raw(lines: Iterable[str]) -> list[tuple[list[str], int]]:
    """py-spy's raw lines as (frames, samples); a line without a count is refused."""
    stacks = []
    for line in lines:
        text = line.rstrip("\n")
        if not text:
            continue
        stack, _, count = text.rpartition(" ")
        if not stack or not count.isdigit():
            raise ValueError(f"not a line of py-spy's raw output: {text[:80]!r}")
        stacks.append((stack.split(";"), int(count)))
    return stacks


def summarise(stacks: list[tuple[list[str], int]], top: int = 12) -> dict[str, Any]:
    """Each layer's share of the busy samples (all but :data:`IDLE`), and the innermost
    frames most often sampled busy."""
    layers: Counter[str] = Counter()
    leaves: Counter[str] = Counter()
    idle = 0
    for frames, count in stacks:
        layer = layer_of(frames)
        if layer == IDLE:
            idle += count
            continue
        layers[layer] += count
        leaves[frames[-1]] += count
    total = sum(layers.values())
    if total == 0:
        return {"samples": 0, "idle_samples": idle, "layers": {}, "top_frames": []}
    return {
        "samples": total,
        "idle_samples": idle,
        "layers": {layer: count / total for layer, count in layers.most_common()},
        "top_frames": [[frame, count / total] for frame, count in leaves.most_common(top)],
    }


__all__ = ["EVENT_LOOP", "IDLE", "LAYERS", "SYSTEM_CALLS", "layer_of", "parse_raw", "summarise"]

"""One of several processes appending to one journal with ``append_if``: read the end,
append right after it, and on a conflict read again.

Its first append is made in step with the others': it reads the end, says ``ready`` and
waits for a line on its standard input before appending, so that every writer's first
append is made on the same read. It prints whether that first append met a conflict, then
how many conflicts it met in all. Bounded in time so a stuck run cannot linger.
"""

from __future__ import annotations

import sys
import time

from forewarn.storage import AppendConflictError, open_journal

MAX_SECONDS = 60.0


def main(url: str, writer: int, count: int) -> None:
    deadline = time.monotonic() + MAX_SECONDS
    conflicts = 0
    first_conflicted = False
    with open_journal(url) as journal:
        for n in range(count):
            while time.monotonic() < deadline:
                last = journal.last_sequence()
                if n == 0 and conflicts == 0:
                    print("ready", flush=True)
                    sys.stdin.readline()
                try:
                    journal.append_if(last, [{"writer": writer, "n": n, "after": last}])
                    break
                except AppendConflictError:
                    first_conflicted = first_conflicted or (n == 0 and conflicts == 0)
                    conflicts += 1
    print(int(first_conflicted), conflicts, flush=True)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))

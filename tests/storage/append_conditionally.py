"""One of several processes appending to one journal with ``append_if``: read the end,
append right after it, and on a conflict read again. Prints how many conflicts it met.

Run by the contract's multi-process case; bounded in time so a stuck run cannot linger.
"""

from __future__ import annotations

import sys
import time

from forewarn.storage import AppendConflictError, open_journal

MAX_SECONDS = 60.0


def main(url: str, writer: int, count: int) -> None:
    deadline = time.monotonic() + MAX_SECONDS
    conflicts = 0
    with open_journal(url) as journal:
        for n in range(count):
            while time.monotonic() < deadline:
                last = journal.last_sequence()
                try:
                    journal.append_if(last, [{"writer": writer, "n": n, "after": last}])
                    break
                except AppendConflictError:
                    conflicts += 1
    print(conflicts, flush=True)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))

"""Appends records as fast as it can and prints each acknowledged sequence, until killed.

Run by the crash test, which SIGKILLs it mid-run: every sequence printed here was returned by
``append``/``append_many``, so it must be in the journal after the kill. Each record carries
its own sequence and a digest of it, so the test can tell a record that is intact and in its
place from one that is torn or shifted. Bounded in count and time so a failed kill cannot leave
it running.
"""

from __future__ import annotations

import hashlib
import sys
import time

from forewarn.storage import open_journal

MAX_RECORDS = 200_000
MAX_SECONDS = 30.0


def record_for(sequence: int) -> dict[str, object]:
    body = f"record {sequence} " * (1 + sequence % 37)
    return {
        "sequence": sequence,
        "body": body,
        "digest": hashlib.sha256(body.encode()).hexdigest(),
    }


def main(url: str) -> None:
    deadline = time.monotonic() + MAX_SECONDS
    with open_journal(url) as journal:
        next_sequence = journal.last_sequence() + 1
        print("ready", flush=True)
        while next_sequence <= MAX_RECORDS and time.monotonic() < deadline:
            if next_sequence % 5 == 0:
                batch = [record_for(next_sequence + offset) for offset in range(3)]
                acknowledged = journal.append_many(batch)
                first = acknowledged - len(batch) + 1
            else:
                first = acknowledged = journal.append(record_for(next_sequence))
            for sequence in range(first, acknowledged + 1):
                print(sequence, flush=True)
            next_sequence = acknowledged + 1


if __name__ == "__main__":
    main(sys.argv[1])

"""A journal that lives as long as the process: for tests, and for ``forewarn serve`` without a
data directory.

It stores the encoded text, not the objects, so it refuses and returns exactly what the durable
backends do and a caller mutating a record after appending it cannot rewrite history.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Self

from forewarn.storage.errors import AppendConflictError, JournalClosedError
from forewarn.storage.journal import (
    check_after,
    check_metadata,
    encode_batch,
    encode_record,
)


class MemoryJournal:
    """Records in a list; thread-safe, so a follower thread can wait for appends."""

    def __init__(self) -> None:
        self._texts: list[str] = []
        self._metadata: dict[str, str] = {}
        self._changed = threading.Condition()
        self._closed = threading.Event()  # set once, by close()

    def _open(self) -> None:
        if self._closed.is_set():
            raise JournalClosedError("memory journal is closed")

    def metadata(self) -> dict[str, str]:
        with self._changed:
            self._open()
            return dict(self._metadata)

    def set_metadata(self, key: str, value: str) -> None:
        check_metadata(key, value)
        with self._changed:
            self._open()
            self._metadata[key] = value

    def append(self, record: Mapping[str, Any]) -> int:
        return self._extend([encode_record(record)])

    def append_many(self, records: Sequence[Mapping[str, Any]]) -> int:
        return self._extend(encode_batch(records))

    def append_if(self, expected_last: int, records: Sequence[Mapping[str, Any]]) -> int:
        return self._extend(encode_batch(records), expected=check_after(expected_last))

    def _extend(self, texts: list[str], expected: int | None = None) -> int:
        with self._changed:
            self._open()
            if expected is not None and expected != len(self._texts):
                raise AppendConflictError("memory journal", expected, len(self._texts))
            self._texts.extend(texts)
            if texts:
                self._changed.notify_all()
            return len(self._texts)

    def records(self, after: int = 0) -> Iterator[tuple[int, dict[str, Any]]]:
        check_after(after)
        with self._changed:
            self._open()
        return self._iterate(after)

    def _iterate(self, sequence: int) -> Iterator[tuple[int, dict[str, Any]]]:
        while True:
            with self._changed:
                if sequence >= len(self._texts):
                    return
                text = self._texts[sequence]
            sequence += 1
            # Only its own appends' encoding is here: nothing to refuse, as a file may need.
            yield sequence, json.loads(text)

    def last_sequence(self) -> int:
        with self._changed:
            self._open()
            return len(self._texts)

    def wait_for_append(self, after: int, timeout: float) -> int:
        check_after(after)
        deadline = time.monotonic() + max(timeout, 0.0)
        with self._changed:
            while True:
                self._open()
                if len(self._texts) > after:
                    return len(self._texts)
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return len(self._texts)
                self._changed.wait(remaining)

    def ping(self) -> None:
        with self._changed:
            self._open()

    def close(self) -> None:
        with self._changed:
            self._closed.set()
            self._changed.notify_all()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


__all__ = [
    "MemoryJournal",
]

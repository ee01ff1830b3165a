"""The one interface every store offers, and the record encoding they all share.

A journal is an append-only sequence of JSON objects numbered 1, 2, 3... with no gaps, plus a
small key/value metadata table. It knows nothing of the domain: replay gives meaning to the
records. Every backend encodes records here, so a record reads back identically from memory,
SQLite and PostgreSQL, and a record one backend refuses is refused by all.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Protocol, Self

from forewarn.nesting import MAX_NESTING, load_json
from forewarn.storage.errors import CorruptRecordError, NotSerializableError, ValueTooLargeError

#: A command record is a few hundred bytes; a megabyte is a bug or an abuse.
MAX_RECORD_BYTES = 1024 * 1024
#: One transaction's worth of records; bounds the memory a single append_many can pin.
MAX_BATCH_BYTES = 64 * 1024 * 1024
#: Metadata holds the fleet file's text, which can be long for large fleets.
MAX_METADATA_VALUE_BYTES = 16 * 1024 * 1024
MAX_METADATA_KEY_CHARS = 256


class Journal(Protocol):
    """A durable, ordered history of records plus the metadata replay depends on."""

    def metadata(self) -> dict[str, str]:
        """Every metadata key and value."""
        ...

    def set_metadata(self, key: str, value: str) -> None:
        """Set one key; durable when this returns."""
        ...

    def append(self, record: Mapping[str, Any]) -> int:
        """Add one record; durable when this returns. Returns its sequence number."""
        ...

    def append_many(self, records: Sequence[Mapping[str, Any]]) -> int:
        """Add records in one transaction (all or none); returns the last sequence number.

        An empty batch writes nothing and returns :meth:`last_sequence`.
        """
        ...

    def append_if(self, expected_last: int, records: Sequence[Mapping[str, Any]]) -> int:
        """Add records in one transaction only if the journal still ends at ``expected_last``,
        so they take exactly the sequences after it; returns the last sequence.

        Raises :class:`~forewarn.storage.errors.AppendConflictError`, writing nothing, when
        another writer appended first: writers that each read, decide, then append this way
        never interleave unseen records into what they decided on.
        """
        ...

    def records(self, after: int = 0) -> Iterator[tuple[int, dict[str, Any]]]:
        """Records with a sequence above ``after``, in sequence order, as fresh objects."""
        ...

    def last_sequence(self) -> int:
        """The highest sequence number written (0 when empty)."""
        ...

    def wait_for_append(self, after: int, timeout: float) -> int:
        """Block until :meth:`last_sequence` exceeds ``after`` or ``timeout`` seconds pass.

        Returns the last sequence either way, so a follower that read up to ``after`` can never
        miss an append made between its read and its wait.
        """
        ...

    def ping(self) -> None:
        """Raise :class:`~forewarn.storage.errors.StoreUnavailableError` unless the store can be
        used now; changes nothing. Safe beside the writer's own calls, from any thread: a
        health check runs it while the server works.
        """
        ...

    def close(self) -> None:
        """Release the connection; idempotent. Any later call raises JournalClosedError."""
        ...

    def __enter__(self) -> Self: ...

    def __exit__(self, *exc_info: object) -> None: ...


def _check_json(value: object, depth: int) -> None:
    """Refuse what :func:`json.dumps` would accept but not give back unchanged.

    ``json.dumps`` turns int keys into strings and accepts NaN; both would make a replayed
    record differ from the one written. Records are flat command fields: nesting is held to
    the bound every untrusted input shares (:data:`~forewarn.nesting.MAX_NESTING`), so a
    record written is one that reads back (``depth`` counts the containers around ``value``).
    """
    if isinstance(value, dict | list | tuple) and depth >= MAX_NESTING:
        raise NotSerializableError(f"record nested deeper than {MAX_NESTING} levels")
    if value is None or isinstance(value, str | int):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise NotSerializableError(f"record holds {value!r}, which JSON cannot represent")
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise NotSerializableError(f"record key {key!r} is not a string")
            _check_json(item, depth + 1)
        return
    if isinstance(value, list | tuple):
        for item in value:
            _check_json(item, depth + 1)
        return
    raise NotSerializableError(f"record holds a {type(value).__name__}, which is not JSON")


def encode_record(record: Mapping[str, Any]) -> str:
    """The stored text of ``record``: compact JSON, refused if not exact or too large."""
    if not isinstance(record, Mapping):
        raise NotSerializableError(f"a record is a JSON object, not a {type(record).__name__}")
    as_dict = dict(record)
    _check_json(as_dict, 0)
    # _check_json refused NaN and the infinities already: json.dumps is never given one.
    text = json.dumps(as_dict, ensure_ascii=False, separators=(",", ":"))
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise NotSerializableError("record holds a string that is not valid Unicode") from exc
    if size > MAX_RECORD_BYTES:
        raise ValueTooLargeError("record", size, MAX_RECORD_BYTES)
    return text


def encode_batch(records: Sequence[Mapping[str, Any]]) -> list[str]:
    """Encode every record before writing any, so a bad one leaves the journal untouched."""
    texts = [encode_record(record) for record in records]
    total = sum(len(text.encode("utf-8")) for text in texts)
    if total > MAX_BATCH_BYTES:
        raise ValueTooLargeError("batch", total, MAX_BATCH_BYTES)
    return texts


def decode_record(text: object, position: int, where: str) -> dict[str, Any]:
    """Record ``position`` of the journal ``where`` from its stored body, read as untrusted
    input (a file or a row anyone with access can edit): text within
    :data:`MAX_RECORD_BYTES` holding one JSON object, or :class:`CorruptRecordError`. What the
    object says is checked by whoever gives it meaning (:func:`forewarn.commands.from_record`).
    """
    if not isinstance(text, str):
        kind = _STORED_KINDS.get(type(text), f"a {type(text).__name__}")
        raise CorruptRecordError(where, position, f"its body is {kind}, not JSON text")
    if len(text) > MAX_RECORD_BYTES:  # a character is at least a byte: never one we wrote
        raise CorruptRecordError(
            where,
            position,
            f"its body is {len(text)} characters long, over {MAX_RECORD_BYTES} bytes",
        )
    try:
        decoded = load_json(text, parse_constant=_no_constant)
    except ValueError as exc:
        raise CorruptRecordError(where, position, f"its body is not JSON ({exc})") from None
    if not isinstance(decoded, dict):
        raise CorruptRecordError(
            where,
            position,
            f"its body is a JSON {_JSON_NAMES.get(type(decoded), 'null')}, not an object",
        )
    return decoded


#: What a SQLite column may hold instead of text, as an error names it.
_STORED_KINDS = {bytes: "binary data", int: "a number", float: "a number"}
_JSON_NAMES = {list: "array", str: "string", int: "number", float: "number", bool: "boolean"}


def _no_constant(name: str) -> object:
    """``NaN`` and ``Infinity`` are no JSON: :func:`encode_record` never writes them."""
    raise ValueError(f"{name} is not a JSON value")


def check_metadata(key: str, value: str) -> None:
    """Refuse metadata every backend could not keep as given (PostgreSQL text has no NUL)."""
    for name, item in (("key", key), ("value", value)):
        if not isinstance(item, str):
            raise NotSerializableError(f"metadata {name} must be a string, not {type(item)}")
        if "\x00" in item:
            raise NotSerializableError(f"metadata {name} holds a NUL character")
        try:
            item.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise NotSerializableError(f"metadata {name} is not valid Unicode") from exc
    if not key or len(key) > MAX_METADATA_KEY_CHARS:
        raise NotSerializableError(f"metadata keys are 1 to {MAX_METADATA_KEY_CHARS} characters")
    size = len(value.encode("utf-8"))
    if size > MAX_METADATA_VALUE_BYTES:
        raise ValueTooLargeError(f"metadata value {key!r}", size, MAX_METADATA_VALUE_BYTES)


def check_after(after: int) -> int:
    if isinstance(after, bool) or not isinstance(after, int) or after < 0:
        raise ValueError(f"after must be a sequence number >= 0, not {after!r}")
    return after


__all__ = [
    "MAX_BATCH_BYTES",
    "MAX_METADATA_KEY_CHARS",
    "MAX_METADATA_VALUE_BYTES",
    "MAX_RECORD_BYTES",
    "Journal",
    "check_after",
    "check_metadata",
    "decode_record",
    "encode_batch",
    "encode_record",
]

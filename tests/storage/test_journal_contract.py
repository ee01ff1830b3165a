"""The journal contract, run against every backend (memory, SQLite, PostgreSQL).

The journal exists for SPEC 2 [ours: restart]: "It never goes backwards, not even
across a service restart." State survives a restart only if the journal gives back every
record exactly as written, in order, numbered without gaps; everything below pins that, plus
the bounds and errors of SPEC-less decisions made in ``forewarn.storage`` [ours].
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from forewarn.domain.errors import ForewarnError
from forewarn.storage import (
    MAX_RECORD_BYTES,
    AppendConflictError,
    Journal,
    JournalClosedError,
    NotSerializableError,
    StorageError,
    UnstorableValueError,
    ValueTooLargeError,
)

from .conftest import Store

SAMPLE: dict[str, Any] = {
    "op": "schedule",
    "at": "2022-04-11T22:11:58+00:00",
    "vms": ["WestNO_0", "WestNO_1"],
    "duration": 5,
    "ratio": 0.25,
    "approved": False,
    "description": "",
    "nested": {"z": 1, "a": [None, True, {"k": "v"}]},
}


def test_a_new_journal_is_empty(journal: Journal) -> None:
    assert journal.last_sequence() == 0
    assert list(journal.records()) == []
    assert journal.metadata() == {}


def test_sequences_start_at_one_and_count_up(journal: Journal) -> None:
    assert [journal.append({"n": n}) for n in range(5)] == [1, 2, 3, 4, 5]
    assert journal.last_sequence() == 5
    assert list(journal.records()) == [(n + 1, {"n": n}) for n in range(5)]


def test_records_read_back_exactly_as_written(journal: Journal) -> None:
    """Key order too: a record is compared as replay will see it, field by field."""
    tricky = {
        "unicode": "Überprüfung 维护 🛠",
        "nul": "a\x00b",
        "quotes": '"\\/\n\t',
        "big": 2**63 + 1,
        "negative": -1,
        "float": 1e-300,
        "empty": {},
        "list": [],
    }
    journal.append(SAMPLE)
    journal.append(tricky)
    read = list(journal.records())
    assert read == [(1, SAMPLE), (2, tricky)]
    assert list(read[0][1]) == list(SAMPLE)
    assert list(read[0][1]["nested"]) == ["z", "a"]


def test_tuples_read_back_as_lists(journal: Journal) -> None:
    """A JSON array is what a tuple becomes; commands turn theirs into lists before writing."""
    journal.append({"vms": ("a", "b")})
    assert list(journal.records()) == [(1, {"vms": ["a", "b"]})]


def test_records_after_a_sequence_skip_what_was_read(journal: Journal) -> None:
    journal.append_many([{"n": n} for n in range(1, 11)])
    assert [seq for seq, _ in journal.records(after=7)] == [8, 9, 10]
    assert list(journal.records(after=10)) == []
    assert list(journal.records(after=99)) == []
    with pytest.raises(ValueError, match="after"):
        journal.records(after=-1)


def test_records_page_through_long_journals_in_order(journal: Journal) -> None:
    """Backends read in pages; no page boundary may drop, repeat or reorder a record."""
    journal.append_many([{"n": n} for n in range(1, 1201)])
    assert [(seq, record["n"]) for seq, record in journal.records()] == [
        (n, n) for n in range(1, 1201)
    ]
    assert [seq for seq, _ in journal.records(after=511)][:2] == [512, 513]


def test_append_many_returns_the_last_sequence(journal: Journal) -> None:
    journal.append({"first": True})
    assert journal.append_many([{"n": 1}, {"n": 2}, {"n": 3}]) == 4
    assert journal.append({"after": True}) == 5
    assert [seq for seq, _ in journal.records()] == [1, 2, 3, 4, 5]


def test_an_empty_batch_writes_nothing(journal: Journal) -> None:
    journal.append({"n": 1})
    assert journal.append_many([]) == 1
    assert journal.last_sequence() == 1


def test_a_batch_with_one_bad_record_writes_none_of_them(journal: Journal) -> None:
    journal.append({"n": 0})
    with pytest.raises(NotSerializableError):
        journal.append_many([{"n": 1}, {"n": {1, 2}}, {"n": 3}])
    assert journal.last_sequence() == 1
    assert journal.append({"n": 1}) == 2


def test_the_journal_keeps_its_own_copy(journal: Journal) -> None:
    """Neither the caller's later changes nor a reader's edits can rewrite history."""
    record: dict[str, Any] = {"vms": ["a"]}
    journal.append(record)
    record["vms"].append("b")
    first = next(iter(journal.records()))[1]
    first["vms"].append("c")
    assert list(journal.records()) == [(1, {"vms": ["a"]})]


@pytest.mark.parametrize(
    ("record", "complaint"),
    [
        ({"when": object()}, "holds a object"),
        ({"set": {1}}, "holds a set"),
        ({"nan": float("nan")}, "holds nan"),
        ({"inf": float("inf")}, "holds inf"),
        ({"deep": {1: "int key"}}, "key 1 is not a string"),
        ({"bytes": b"x"}, "holds a bytes"),
        ({"surrogate": "\ud800"}, "not valid Unicode"),
    ],
)
def test_what_json_cannot_give_back_is_refused(
    journal: Journal, record: dict[str, Any], complaint: str
) -> None:
    """NaN and int keys are accepted by ``json.dumps`` but would not read back as written."""
    with pytest.raises(NotSerializableError, match=complaint):
        journal.append(record)
    assert journal.last_sequence() == 0


def test_a_record_is_a_json_object(journal: Journal) -> None:
    with pytest.raises(NotSerializableError, match="JSON object"):
        journal.append(["not", "an", "object"])  # type: ignore[arg-type]


def test_absurd_nesting_is_refused(journal: Journal) -> None:
    record: dict[str, Any] = {}
    inner = record
    for _ in range(100):
        inner["x"] = {}
        inner = inner["x"]
    with pytest.raises(NotSerializableError, match="nested"):
        journal.append(record)


def _record_of_size(size: int) -> dict[str, str]:
    """A record whose compact JSON is exactly ``size`` bytes: ``{"pad":"..."}`` is 10 + n."""
    return {"pad": "x" * (size - len('{"pad":""}'))}


def test_a_record_of_one_mebibyte_is_kept_and_one_byte_more_is_refused(journal: Journal) -> None:
    assert journal.append(_record_of_size(MAX_RECORD_BYTES)) == 1
    with pytest.raises(ValueTooLargeError) as raised:
        journal.append(_record_of_size(MAX_RECORD_BYTES + 1))
    assert raised.value.size == MAX_RECORD_BYTES + 1
    assert raised.value.limit == MAX_RECORD_BYTES == 1024 * 1024
    assert journal.last_sequence() == 1
    assert len(next(iter(journal.records()))[1]["pad"]) == MAX_RECORD_BYTES - 10


def test_the_size_bound_counts_utf8_bytes(journal: Journal) -> None:
    """A character outside ASCII is stored as several bytes and counts as such."""
    too_big = {"pad": "é" * (MAX_RECORD_BYTES // 2)}
    with pytest.raises(ValueTooLargeError):
        journal.append(too_big)


def test_metadata_is_set_overwritten_and_listed(journal: Journal) -> None:
    journal.set_metadata("seed", "42")
    journal.set_metadata("fleet", "vms:\n  - {name: vm0}\n")
    journal.set_metadata("seed", "43")
    assert journal.metadata() == {"fleet": "vms:\n  - {name: vm0}\n", "seed": "43"}
    journal.set_metadata("empty", "")
    assert journal.metadata()["empty"] == ""


def test_metadata_is_independent_of_records(journal: Journal) -> None:
    journal.set_metadata("seed", "1")
    assert journal.last_sequence() == 0
    journal.append({"n": 1})
    assert journal.metadata() == {"seed": "1"}


@pytest.mark.parametrize(
    ("key", "value"),
    [("seed", 42), (7, "x"), ("", "x"), ("k", "a\x00b"), ("k" * 257, "x")],
)
def test_metadata_is_non_empty_strings_every_backend_can_keep(
    journal: Journal, key: Any, value: Any
) -> None:
    with pytest.raises(NotSerializableError):
        journal.set_metadata(key, value)
    assert journal.metadata() == {}


def test_a_closed_journal_refuses_everything(journal: Journal) -> None:
    journal.append({"n": 1})
    journal.close()
    journal.close()  # idempotent
    calls: list[Callable[[], object]] = [
        lambda: journal.append({"n": 2}),
        lambda: journal.append_many([{"n": 2}]),
        lambda: journal.records(),
        journal.last_sequence,
        journal.metadata,
        lambda: journal.set_metadata("k", "v"),
        lambda: journal.wait_for_append(0, 0),
    ]
    for call in calls:
        with pytest.raises(JournalClosedError):
            call()


def test_the_journal_is_a_context_manager(store: Store) -> None:
    with store.open() as journal:
        journal.append({"n": 1})
    with pytest.raises(JournalClosedError):
        journal.last_sequence()


def test_storage_errors_form_one_tree_under_forewarn_error() -> None:
    """One rooted tree: callers catch ForewarnError, or StorageError for the store alone."""
    assert issubclass(StorageError, ForewarnError)
    assert issubclass(NotSerializableError, UnstorableValueError)
    assert issubclass(ValueTooLargeError, UnstorableValueError)
    assert issubclass(UnstorableValueError, StorageError)
    assert issubclass(JournalClosedError, StorageError)


# -- following appends ---------------------------------------------------------------------


def test_waiting_returns_at_once_when_there_is_already_more(journal: Journal) -> None:
    journal.append_many([{"n": 1}, {"n": 2}])
    assert journal.wait_for_append(after=1, timeout=30) == 2


def test_waiting_gives_up_after_the_timeout(journal: Journal) -> None:
    journal.append({"n": 1})
    assert journal.wait_for_append(after=1, timeout=0) == 1
    assert journal.wait_for_append(after=1, timeout=0.05) == 1


def _blocked_waiter(journal: Journal, after: int) -> tuple[threading.Thread, list[object]]:
    """A thread waiting for an append, checked to be still blocked after a short bounded wait."""
    outcome: list[object] = []

    def wait() -> None:
        try:
            outcome.append(journal.wait_for_append(after=after, timeout=20))
        except JournalClosedError as exc:
            outcome.append(exc)

    waiter = threading.Thread(target=wait)
    waiter.start()
    waiter.join(0.2)
    assert waiter.is_alive(), f"wait_for_append returned without an append: {outcome}"
    return waiter, outcome


def test_an_append_wakes_a_waiter(journal: Journal) -> None:
    journal.append({"n": 1})
    waiter, outcome = _blocked_waiter(journal, after=1)
    journal.append({"n": 2})
    waiter.join(10)
    assert not waiter.is_alive()
    assert outcome == [2]


def test_closing_wakes_a_waiter(journal: Journal) -> None:
    """A follower blocked in wait_for_append must not hold up shutting down."""
    waiter, outcome = _blocked_waiter(journal, after=0)
    journal.close()
    waiter.join(10)
    assert not waiter.is_alive()
    assert len(outcome) == 1
    assert isinstance(outcome[0], JournalClosedError)
    assert str(outcome[0]).endswith(" is closed")


# -- conditional appends: several writers deciding on what they read ------------------------


def test_a_conditional_append_takes_exactly_the_next_sequences(journal: Journal) -> None:
    journal.append({"n": 0})
    assert journal.append_if(1, [{"n": 1}, {"n": 2}]) == 3
    assert journal.append_if(3, [{"n": 3}]) == 4
    assert [record["n"] for _, record in journal.records()] == [0, 1, 2, 3]


def test_a_conditional_append_behind_the_journal_writes_nothing_and_says_so(
    journal: Journal,
) -> None:
    journal.append_many([{"n": 0}, {"n": 1}])
    with pytest.raises(AppendConflictError) as raised:
        journal.append_if(1, [{"n": "late"}])
    assert (raised.value.expected, raised.value.found) == (1, 2)
    assert journal.last_sequence() == 2
    assert [record["n"] for _, record in journal.records()] == [0, 1]
    assert isinstance(raised.value, StorageError)


def test_a_conditional_append_refuses_a_bad_record_before_writing(journal: Journal) -> None:
    with pytest.raises(NotSerializableError):
        journal.append_if(0, [{"n": 1}, {"n": float("nan")}])
    assert journal.last_sequence() == 0


def _writers_for(store: Store, count: int) -> list[Journal]:
    """One journal per writer where the backend allows several (PostgreSQL: each its own
    connection); one shared by all threads where it has one writer per process or file."""
    if store.backend == "postgres":
        return [store.open() for _ in range(count)]
    shared = store.open()
    return [shared] * count


def test_concurrent_conditional_appenders_leave_no_gap_and_no_duplicate(store: Store) -> None:
    """Each writer reads the end, appends there, and on a conflict reads again and retries:
    every record lands once, in a sequence with no gap, and conflicts are reported, not
    silently merged."""
    writers, per_writer = 4, 40
    journals = _writers_for(store, writers)
    failures: list[BaseException] = []
    start = threading.Barrier(writers)

    def write(index: int) -> None:
        journal = journals[index]
        try:
            start.wait(10)
            for n in range(per_writer):
                while True:
                    last = journal.last_sequence()
                    try:
                        journal.append_if(last, [{"writer": index, "n": n, "after": last}])
                        break
                    except AppendConflictError:
                        continue  # someone appended first: read the new end and retry
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=write, args=(index,)) for index in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not failures
    records = list(journals[0].records())
    assert [sequence for sequence, _ in records] == list(range(1, writers * per_writer + 1))
    written = sorted((record["writer"], record["n"]) for _, record in records)
    assert written == sorted((w, n) for w in range(writers) for n in range(per_writer))
    # each record was written right after the one its writer had read as the last
    assert all(record["after"] == sequence - 1 for sequence, record in records)

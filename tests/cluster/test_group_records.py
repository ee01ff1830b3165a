"""Writes journaled together are one record: a group, applied alike by every front-end.

[ours] (docs/scale-out.md, "How front-ends stay one fleet"). The commands one transaction
journals (a turn's approvals, a campaign's operations asked for at once) go in one record,
``{"op": "group", "at": ..., "commands": [...]}``, while they fit in
:data:`~forewarn.cluster.replica.GROUP_BYTES`; a command alone keeps its own record, as before
groups. Every front-end applies the group as its writer did, the events it creates numbered
alike; a command the domain refused ends its record, and the next starts another. A group
read back is untrusted input like any record: bounded and checked command by command.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from forewarn.cluster import ReplicaError
from forewarn.cluster import replica as replica_module
from forewarn.commands import (
    MAX_GROUP_COMMANDS,
    Approve,
    Group,
    Restart,
    ScheduleEvent,
    Seen,
    Touch,
    from_record,
)
from forewarn.domain.errors import UnknownVmError
from forewarn.domain.events import EventType
from forewarn.journal_replay import ReplayError
from forewarn.server.state import OpenedState
from forewarn.storage.journal import MAX_RECORD_BYTES, encode_record

from .test_front_ends_in_process import front_end, in_step, replica

VMS = ("WestNO_0", "WestNO_1", "WestNO_2")
AT = "2024-05-01T10:00:00+00:00"


def freeze(vm: str, label: str = "") -> ScheduleEvent:
    return ScheduleEvent(EventType.FREEZE.value, (vm,), description=label)


def written(state: OpenedState, after: int) -> list[dict[str, Any]]:
    return [record for _, record in replica(state).journal.records(after)]


def test_commands_written_together_are_one_record_every_front_end_applies_alike(
    pair: list[OpenedState], shared_store: str, fleet_file: Path
) -> None:
    a, b = pair
    head = replica(a).head
    outcomes = replica(a).write_group([freeze(vm, vm) for vm in VMS])
    (record,) = written(a, head)
    assert record["op"] == "group"
    assert [command["description"] for command in record["commands"]] == list(VMS)
    assert all(set(command) >= {"op", "resources"} for command in record["commands"])
    assert all("at" not in command for command in record["commands"])
    assert replica(a).head == head + 1
    # the other front-end shows the same events under the same EventIds
    shown = in_step(pair)
    ids = [event.event_id for outcome in outcomes for event in outcome]  # type: ignore[union-attr]
    assert len(set(ids)) == len(VMS)
    assert sorted(view.event.event_id for view in b.service.events()) == sorted(ids)
    # and so does one replaying the journal from the start
    late = front_end(shared_store, fleet_file)
    try:
        assert in_step([a, late]) == shown
    finally:
        assert late.service.journal is not None
        late.service.journal.close()


def test_a_command_alone_keeps_a_record_of_its_own(pair: list[OpenedState]) -> None:
    a, _ = pair
    head = replica(a).head
    replica(a).write_group([freeze("WestNO_0")])
    (record,) = written(a, head)
    assert record["op"] == "schedule"
    in_step(pair)


def test_a_refused_command_ends_its_record_and_the_next_starts_another(
    pair: list[OpenedState],
) -> None:
    a, b = pair
    head = replica(a).head
    outcomes = replica(a).write_group(
        [freeze("WestNO_0"), freeze("WestNO_1"), freeze("nowhere"), freeze("WestNO_2")]
    )
    assert isinstance(outcomes[2], UnknownVmError)
    first, second = written(a, head)
    assert first["op"] == "group"
    assert [command["resources"] for command in first["commands"]] == [["WestNO_0"], ["WestNO_1"]]
    assert second["op"] == "schedule"
    assert second["resources"] == ["WestNO_2"]
    in_step(pair)
    ids = {
        event.event_id for outcome in outcomes if isinstance(outcome, tuple) for event in outcome
    }
    assert {view.event.event_id for view in b.service.events()} == ids


def test_commands_past_the_bytes_of_a_group_start_another_record(
    pair: list[OpenedState], monkeypatch: pytest.MonkeyPatch
) -> None:
    a, _ = pair
    size = len(encode_record({"op": "schedule", **freeze("WestNO_0", "x").fields()}))
    # two of these fit, a third does not
    monkeypatch.setattr(replica_module, "GROUP_BYTES", 2 * size)
    head = replica(a).head
    replica(a).write_group([freeze(vm, "x") for vm in (*VMS, "WestNO_0")])
    records = written(a, head)
    assert [len(record["commands"]) for record in records] == [2, 2]
    # after a refused one, a record starts afresh: two fit again
    head = replica(a).head
    replica(a).write_group(
        [freeze("WestNO_0", "x"), freeze("nowhere", "x")] + [freeze(vm, "x") for vm in VMS]
    )
    records = written(a, head)
    assert [len(record.get("commands", [record])) for record in records] == [1, 2, 1]
    # one larger than a group's bytes is a record of its own
    monkeypatch.setattr(replica_module, "GROUP_BYTES", size - 1)
    head = replica(a).head
    replica(a).write_group([freeze(vm, "x") for vm in VMS[:2]])
    assert [record["op"] for record in written(a, head)] == ["schedule", "schedule"]
    in_step(pair)


def test_a_group_takes_at_most_half_a_records_bytes(pair: list[OpenedState]) -> None:
    """Commands of a quarter of a record's bound each: two go together, a third would take
    the group past half of it."""
    a, _ = pair
    quarter = MAX_RECORD_BYTES // 4 - 100
    head = replica(a).head
    replica(a).write_group([Seen((f"{n}{'x' * quarter}",)) for n in range(3)], spread=False)
    records = written(a, head)
    assert [record["op"] for record in records] == ["group", "seen"]
    assert len(records[0]["commands"]) == 2
    in_step(pair)


def test_a_group_holds_at_most_its_bound_of_commands(
    pair: list[OpenedState], monkeypatch: pytest.MonkeyPatch
) -> None:
    a, _ = pair
    monkeypatch.setattr(replica_module, "MAX_GROUP_COMMANDS", 2)
    head = replica(a).head
    replica(a).write_group([freeze(vm) for vm in VMS] + [freeze("WestNO_0")])
    records = written(a, head)
    assert [len(record["commands"]) for record in records] == [2, 2]
    in_step(pair)


def test_requests_journaled_in_a_group_count_as_seen(pair: list[OpenedState]) -> None:
    a, b = pair
    replica(a).write_group([Touch("WestNO_0"), Seen(("WestNO_1",)), Restart("WestNO_2")])
    in_step(pair)
    at = replica(a).applied.head_at
    for state in pair:
        seen = replica(state).applied.last_seen
        assert seen["WestNO_0"] == at
        assert seen["WestNO_1"] == at
    assert replica(b).applied.last_seen == replica(a).applied.last_seen


def group(*commands: dict[str, Any]) -> dict[str, Any]:
    return {"op": "group", "at": AT, "commands": list(commands)}


APPROVE = {"op": "approve", "vm": "WestNO_0", "event_ids": ["E"]}
RESTART = {"op": "restart", "vm": "WestNO_1"}


def test_a_group_record_reads_back_as_its_commands_at_its_time() -> None:
    at, command = from_record(group(APPROVE, RESTART))
    assert at == datetime(2024, 5, 1, 10, tzinfo=UTC)
    assert command == Group((Approve("WestNO_0", ("E",)), Restart("WestNO_1")))
    assert command.to_record(at) == group(APPROVE, RESTART)


@pytest.mark.parametrize(
    ("commands", "says"),
    [
        ("x", "'commands' is 'x', not a list of 2 to 1000 commands"),
        ([APPROVE], "not a list of 2 to 1000 commands"),
        ([APPROVE] * (MAX_GROUP_COMMANDS + 1), "not a list of 2 to 1000 commands"),
        ([APPROVE, 5], "a grouped command is a JSON object, not 5"),
        ([APPROVE, {"vm": "WestNO_0"}], "a grouped command's op None names no command"),
        ([APPROVE, {"op": "format-disk"}], "op 'format-disk' names no command of a group"),
        ([APPROVE, group(APPROVE, RESTART)], "op 'group' names no command of a group"),
        ([APPROVE, {**RESTART, "at": AT}], "'restart' has no field 'at'"),
        ([APPROVE, {"op": "restart", "vm": 5}], "'vm' is 5, not a string"),
        ([APPROVE, {"op": "restart"}], "journal record 'restart' is incomplete: 'vm' is missing"),
    ],
)
def test_a_damaged_group_is_refused_saying_what_is_wrong(commands: object, says: str) -> None:
    with pytest.raises(ValueError, match=re.escape(says)):
        from_record({"op": "group", "at": AT, "commands": commands})


def test_a_group_of_the_largest_size_is_read() -> None:
    _, command = from_record(group(*[RESTART] * MAX_GROUP_COMMANDS))
    assert isinstance(command, Group)
    assert len(command.commands) == MAX_GROUP_COMMANDS


def test_a_group_whose_command_the_domain_refuses_on_replay_names_its_record(
    pair: list[OpenedState],
) -> None:
    a, _ = pair
    head = replica(a).head
    damaged = group({"op": "restart", "vm": "WestNO_0"}, {"op": "restart", "vm": "nowhere"})
    damaged["at"] = replica(a).applied.head_at.isoformat()  # type: ignore[union-attr]
    with pytest.raises(ReplayError, match=f"record {head + 1} \\(group\\)"):
        replica(a).applied.apply(head + 1, damaged)


def test_a_command_the_journal_cannot_keep_refuses_the_group_before_anything_is_applied(
    pair: list[OpenedState],
) -> None:
    """Every command's size is measured before the first is applied: one the journal
    refuses (not valid Unicode) refuses the write with nothing of it applied here."""
    a, _ = pair
    writer = replica(a)
    head = writer.head
    with pytest.raises(ReplicaError, match="nothing was applied: record holds a string"):
        writer.write_group([freeze("WestNO_0"), freeze("WestNO_1", "\ud800")])
    assert (writer.head, writer.diverged, writer.committing) == (head, False, False)
    assert a.service.events() == ()
    assert written(a, head) == []

"""What the agent already did, per EventId, in a small SQLite file that outlives the agent.

A restarted agent reads the same document again and sees every event as new; the store is
what keeps it from draining a node twice or approving twice, and what tells it that an event
it had prepared for disappeared while it was down (so it still recovers). One row per
(EventId, step); a step is written once, when it is done or has failed for good.
"""

from __future__ import annotations

import enum
import sqlite3
import threading
from datetime import datetime
from pathlib import Path

from forewarn.errors import ForewarnError

STATE_FILE = "agent-state.sqlite3"
_SCHEMA_VERSION = 1


class Step(enum.StrEnum):
    DECIDED = "decided"  # outcome: the action, so a restart decides the same way
    PREPARED = "prepared"
    APPROVED = "approved"
    STARTED = "started"  # the started hooks ran
    RECOVERED = "recovered"


class Outcome(enum.StrEnum):
    OK = "ok"
    FAILED = "failed"
    SKIPPED = "skipped"


class AgentStateError(ForewarnError):
    """The agent's state file cannot be used: not a SQLite file, or another schema."""


class HandledStore:
    """Thread-safe: hooks finish on worker threads while the poll loop reads."""

    def __init__(self, path: Path | str) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        try:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            (version,) = self._db.execute("PRAGMA user_version").fetchone()
        except sqlite3.DatabaseError as exc:
            self._db.close()
            raise AgentStateError(
                f"{path}: not the agent's state ({exc}); move it away to start afresh"
            ) from None
        if version == 0:
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS handled ("
                " event_id TEXT NOT NULL, step TEXT NOT NULL, outcome TEXT NOT NULL,"
                " detail TEXT NOT NULL DEFAULT '', at TEXT NOT NULL,"
                " PRIMARY KEY (event_id, step))"
            )
            self._db.execute(f"PRAGMA user_version={_SCHEMA_VERSION}")
        elif version != _SCHEMA_VERSION:
            self._db.close()
            raise AgentStateError(
                f"{path}: agent state of schema {version}, not {_SCHEMA_VERSION}; "
                "move it away to start afresh"
            )

    @classmethod
    def in_directory(cls, directory: Path) -> HandledStore:
        directory.mkdir(parents=True, exist_ok=True)
        return cls(directory / STATE_FILE)

    def record(
        self, event_id: str, step: Step, outcome: Outcome, at: datetime, detail: str = ""
    ) -> None:
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO handled (event_id, step, outcome, detail, at)"
                " VALUES (?, ?, ?, ?, ?)",
                (event_id.upper(), step.value, outcome.value, detail, at.isoformat()),
            )

    def steps(self, event_id: str) -> dict[Step, tuple[Outcome, str]]:
        """Every step recorded for ``event_id``, with its outcome and detail."""
        with self._lock:
            rows = self._db.execute(
                "SELECT step, outcome, detail FROM handled WHERE event_id = ?",
                (event_id.upper(),),
            ).fetchall()
        return {Step(step): (Outcome(outcome), detail) for step, outcome, detail in rows}

    def unrecovered(self) -> list[str]:
        """Events the agent acted on (prepared, approved or ran started hooks for) that it
        has not recovered from yet."""
        with self._lock:
            rows = self._db.execute(
                "SELECT DISTINCT event_id FROM handled"
                " WHERE step IN ('prepared', 'approved', 'started')"
                " AND event_id NOT IN (SELECT event_id FROM handled WHERE step = 'recovered')"
                " ORDER BY event_id"
            ).fetchall()
        return [event_id for (event_id,) in rows]

    def reopen(self, event_id: str) -> None:
        """Forget every step after the decision: the event is back and must go through them
        again (the endpoint lost its state and shows it anew)."""
        with self._lock:
            self._db.execute(
                "DELETE FROM handled WHERE event_id = ? AND step != ?",
                (event_id.upper(), Step.DECIDED.value),
            )

    def forget_before(self, moment: datetime) -> int:
        """Drop events recovered before ``moment``: EventIds are never reused."""
        with self._lock:
            cursor = self._db.execute(
                "DELETE FROM handled WHERE event_id IN (SELECT event_id FROM handled"
                " WHERE step = 'recovered' AND at < ?)",
                (moment.isoformat(),),
            )
        return cursor.rowcount

    def close(self) -> None:
        with self._lock:
            self._db.close()


__all__ = [
    "STATE_FILE",
    "AgentStateError",
    "HandledStore",
    "Outcome",
    "Step",
]

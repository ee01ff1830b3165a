"""Deadlines for blocking calls, kept by one thread per process.

A call to PostgreSQL waiting on a server that went silent (its host still acknowledging) is
ended by shutting its socket down from another thread once its time is up
(:meth:`forewarn.storage.postgres.PostgresJournal.bounded`). A timer thread started for each
call did that, at the cost of a thread started and ended for every call a front-end makes
(several a second each, idle). Here one thread, started on the first deadline, sleeps until
the earliest one still set: setting a deadline wakes it only when that deadline is earlier
than the one it sleeps until, and a cancelled one is dropped when it wakes, never by waking
it.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import math
import os
import threading
import time
from collections.abc import Callable

__all__ = ["Deadline", "Keeper", "after"]

_LOG = logging.getLogger("forewarn.storage")


class Deadline:
    """``action`` to run at ``when`` (:func:`time.monotonic`) unless cancelled first."""

    __slots__ = ("action", "cancelled", "when")

    def __init__(self, when: float, action: Callable[[], object]) -> None:
        self.when = when
        self.action = action
        self.cancelled = False

    def cancel(self) -> None:
        """Do not run the action (unless it is running already)."""
        self.cancelled = True


class Keeper:
    """Deadlines kept by one thread, started by the first; the process has one
    (:func:`after`), and tests make their own."""

    def __init__(self) -> None:
        self._lock = threading.Condition()
        self._heap: list[tuple[float, int, Deadline]] = []
        self._order = itertools.count()
        self._thread: threading.Thread | None = None
        #: When the thread wakes next, on its own (infinity: it waits to be woken).
        self._until = math.inf

    def after(self, seconds: float, action: Callable[[], object]) -> Deadline:
        deadline = Deadline(time.monotonic() + seconds, action)
        with self._lock:
            heapq.heappush(self._heap, (deadline.when, next(self._order), deadline))
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="forewarn deadlines", daemon=True
                )
                self._thread.start()
            elif deadline.when < self._until:
                self._lock.notify()
        return deadline

    def _run(self) -> None:
        while True:
            with self._lock:
                now = time.monotonic()
                if any(entry[2].cancelled for entry in self._heap):
                    self._heap = [entry for entry in self._heap if not entry[2].cancelled]
                    heapq.heapify(self._heap)
                due = []
                while self._heap and self._heap[0][0] <= now:
                    due.append(heapq.heappop(self._heap)[2])
                if not due:
                    self._until = self._heap[0][0] if self._heap else math.inf
                    # Awake again, it looks at the heap on its next turn: a deadline set
                    # meanwhile and notified to no one waiting is seen there.
                    self._lock.wait(None if self._until == math.inf else self._until - now)
                    continue
            for deadline in due:
                if deadline.cancelled:
                    continue
                try:
                    deadline.action()
                except Exception:  # an action failing must not end the others' deadlines
                    _LOG.exception("a deadline's action failed")


_KEEPER = Keeper()


def _forked() -> None:
    """A child of ``fork`` has no keeper thread (nor, perhaps, a usable lock): a new one."""
    global _KEEPER
    _KEEPER = Keeper()


os.register_at_fork(after_in_child=_forked)


def after(seconds: float, action: Callable[[], object]) -> Deadline:
    """Run ``action`` (in the keeper's thread; quick, never blocking) ``seconds`` from now,
    unless the :class:`Deadline` returned is cancelled first."""
    return _KEEPER.after(seconds, action)

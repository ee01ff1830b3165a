"""One process writing its own journal (a SQLite data directory): nothing is shown that the
journal does not hold.

A change is applied to the platform first, because only the domain can say whether it is
possible and what it creates, and journaled right after, before anyone can see it: the
service runs both on one thread, so no answer, log line, hook or dashboard reads the platform
in between. If the journal refuses the record (a full disk, an I/O error), the change is
undone by rebuilding the platform from the journal, which holds everything acknowledged and
nothing else: the same replay as a restart (:func:`forewarn.journal_replay.replay_journal`), so the
EventIds the change drew are drawn again by the next change, as they were never shown to
anyone, and every VM is shown what it was shown before, at the same DocumentIncarnation.

After a refusal, changes are refused without being tried for :data:`QUIET_SECONDS` (longer
when rebuilding took long), so a full disk met by VMs retrying their approvals costs one
rebuild a second at most, not one per request; reads go on from the rebuilt platform all
along. Should the journal not even be readable to rebuild from, the platform cannot be
trusted: every read and change is refused (:class:`~forewarn.storage.StoreUnavailableError`)
until a rebuild succeeds, tried again at most once per quiet period.

Several front-ends sharing a PostgreSQL journal do the same under a lock instead
(:mod:`forewarn.cluster.replica`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import datetime

from forewarn.commands import Command, Result, Touch
from forewarn.domain.clock import Clock
from forewarn.domain.platform import Platform
from forewarn.journal_replay import Applied, NewPlatform, replay_journal
from forewarn.storage import Journal
from forewarn.storage.errors import StoreUnavailableError
from forewarn.storage.journal import encode_record

_LOG = logging.getLogger("forewarn.store")

#: After the journal refused a change, how long further changes are refused without trying
#: (and a platform that could not be rebuilt is not tried again): a VM's approval retried
#: against a full disk costs a rebuild once per this, not once per request.
QUIET_SECONDS = 1.0
#: ... or this many times as long as the last rebuild took, when that is longer, so that
#: rebuilding a long journal takes a tenth of the server's time at most.
QUIET_FACTOR = 10.0


class NotJournaledError(StoreUnavailableError):
    """A change the journal could not record, so it was not made: nothing of it was shown to
    anyone, and it may be asked again once the store works."""


class JournalWriter:
    """The platform of a journal this process alone writes, kept equal to what it holds.

    Not thread-safe, like the service it belongs to: every call comes from one thread (the
    event loop's in ``forewarn serve``).
    """

    #: What the store said when it last failed, for the errors of the quiet period and of a
    #: diverged platform: set by the first refusal, before either can be.
    _failure: str

    def __init__(
        self,
        journal: Journal,
        clock: Clock,
        new_platform: NewPlatform,
        *,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.journal = journal
        self.clock = clock
        self._new_platform = new_platform
        self._monotonic = monotonic
        self.applied = Applied.fresh(new_platform)
        #: The platform built with the writer, with nothing applied: replay starts from it.
        self._pristine = True
        #: Told of every platform this writer serves from (the service's).
        self.adopt: Callable[[Platform], None] = lambda platform: None
        #: True while the platform may hold a change the journal does not (it refused one,
        #: and could not be read back since): nothing may be read from it.
        self.diverged = False
        #: From a refusal, the :attr:`_monotonic` reading the quiet period after it ends at
        #: (None: no refusal since it last ended).
        self._quiet_until: float | None = None
        #: When each VM last asked, before the change the journal refused: what a platform
        #: rebuilt to undo it takes (a VM's refused first request is no request).
        self._requests: dict[str, datetime] | None = None

    @property
    def platform(self) -> Platform:
        return self.applied.platform

    @property
    def refusing(self) -> bool:
        """True from a refusal until the quiet period after it has passed."""
        return self._quiet_until is not None

    # -- the platform from the journal -----------------------------------------------------

    def rebuild(self) -> int:
        """Replay the whole journal onto a fresh platform brought up to the clock, then serve
        that one; the number of records. Start-up and the undoing of a refused change both
        come here.

        Only requests that changed state are journaled: at start-up nobody is idle by the
        server's absence, so every VM counts as having asked just now; when undoing, each VM
        last asked when it did on the platform replaced (:attr:`_requests`)."""
        if self._pristine:
            applied = self.applied
        else:
            # readers of its history are told of the changes the replaced one had not told
            # them of once it is served (forewarn.domain.history), the change undone never
            told = self.applied.platform.history.told
            applied = Applied.fresh(self._new_platform)
            applied.platform.history.hold(after=told)
        self._pristine = False
        replay_journal(applied, self.journal.records(), self.clock)
        platform = applied.platform
        platform.advance_to(self.clock.now())
        if self._requests is None:
            platform.assume_requests_now()
        else:
            platform.take_requests(self._requests)
        self.applied = applied
        self.diverged = False
        self.adopt(platform)
        platform.history.release()
        return applied.head

    def recover(self) -> None:
        """Before anything reads a diverged platform: rebuild it, or refuse (at once, during
        the quiet period) with :class:`~forewarn.storage.StoreUnavailableError`."""
        if not self.quiet():
            self._rebuild_after(self._failure)
            if not self.diverged:
                return
        raise StoreUnavailableError(
            "forewarn cannot read its journal back after a change it could not record "
            f"({self._failure}); it answers again once it can"
        )

    # -- changes ---------------------------------------------------------------------------

    def write(self, command: Command, at: datetime) -> Result:
        """Apply ``command`` at platform time ``at`` and journal it: its result, once the
        journal holds it. A domain error leaves everything as it was, as does a change the
        journal cannot record (:class:`NotJournaledError`); a value the journal would not
        keep is refused before anything is applied."""
        record = command.to_record(at)
        encode_record(record)  # refused now, rather than undone after
        if self.quiet():
            raise self.refusal()
        applied = self.applied
        history = applied.platform.history
        history.hold()  # a change of a published event is told once it is journaled
        try:
            result = applied.apply_command(applied.head + 1, at, command)
        except BaseException:
            history.release()  # refused by the domain: nothing changed, nothing held
            raise
        self._append(record)
        history.release()
        return result

    def journal_taken(self, command: Touch, at: datetime) -> None:
        """The platform took ``command`` at ``at`` already (a VM's request that turned
        Scheduled Events on, on the request's own path): journal it, or undo it, the request
        with it (the VM was off or idle before it, as the journal has it too)."""
        applied = self.applied
        applied.record_taken(applied.head + 1, at, command)
        self._append(command.to_record(at), command.vm)

    def quiet(self) -> bool:
        """Whether the journal refused a change so lately that changes are refused without
        trying (:data:`QUIET_SECONDS`)."""
        if self._quiet_until is None:
            return False
        if self._monotonic() < self._quiet_until:
            return True
        self._quiet_until = None
        return False

    def refusing_now(self) -> bool:
        """:meth:`quiet` without ending the quiet period (readiness reads it, ``/readyz``)."""
        quiet_until = self._quiet_until
        return self.diverged or (quiet_until is not None and self._monotonic() < quiet_until)

    def refusal(self) -> NotJournaledError:
        """The error of a change refused without trying, in the quiet period."""
        return NotJournaledError(
            f"the change was not made: the journal could not record one a moment ago "
            f"({self._failure}); retry in a moment"
        )

    def _append(self, record: dict[str, object], requester: str | None = None) -> None:
        """Append ``record``, the change just applied; undo it when that fails (with the
        request of ``requester``, when the change was a VM's request)."""
        applied = self.applied
        try:
            self.journal.append_if(applied.head - 1, [record])
        except Exception as exc:  # nothing was recorded, whatever the store's reason
            self._requests = applied.platform.last_requests()
            self._requests.pop(requester or "", None)
            self._failure = " ".join(str(exc).split()) or type(exc).__name__
            _LOG.warning("the journal refused a change, which is undone: %s", self._failure)
            self._rebuild_after(self._failure)
            raise NotJournaledError(
                f"the change was not made, as the journal could not record it: {self._failure}"
            ) from exc

    def _rebuild_after(self, failure: str) -> None:
        """Rebuild after ``failure``; diverged when the journal cannot be read either. The
        quiet period starts over, as long as the rebuild took calls for."""
        started = self._monotonic()
        try:
            self.rebuild()
        except Exception as exc:  # unreadable too: nothing may be read until it is
            self.diverged = True
            _LOG.warning(
                "the journal cannot be read back after a change it refused (%s): %s",
                failure,
                " ".join(str(exc).split()) or type(exc).__name__,
            )
        took = self._monotonic() - started
        self._quiet_until = self._monotonic() + max(QUIET_SECONDS, QUIET_FACTOR * took)


__all__ = [
    "QUIET_FACTOR",
    "QUIET_SECONDS",
    "JournalWriter",
    "NotJournaledError",
]

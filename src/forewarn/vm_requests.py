"""The VM-facing request path of :class:`~forewarn.service.ScheduledEventsService`: who is
calling, whether the request can be answered now, and the document it is answered with.

Every VM's poll comes through here, so this is the code the bench's figures are about; it is
kept apart from the use cases so that its caches (encoded documents shared between the VMs
shown them, what a request found at each address) are read in one place. It is part of the
service's door, not another one: :class:`VmRequestPath` is a base class of the service, its
public methods are the service's, and it reaches the platform only through the service's
``_caught_up`` (the catch-up rule in :mod:`forewarn.service`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, NamedTuple

from forewarn.commands import Touch
from forewarn.domain._frozen import frozen_slot_setters
from forewarn.domain.api_versions import ApiVersion
from forewarn.domain.documents import Document
from forewarn.domain.impact import Pause
from forewarn.domain.platform import Deletion, Platform
from forewarn.domain.vms import Vm
from forewarn.storage.errors import StoreUnavailableError
from forewarn.wire.documents import encode_document

if TYPE_CHECKING:
    from forewarn.cluster.replica import Replica
    from forewarn.domain.clock import Clock
    from forewarn.writer import JournalWriter


#: Told when a request that had to wait can be answered: None, or the error refusing it.
Ready = Callable[[Exception | None], None]


class AnswerLaterError(StoreUnavailableError):
    """A VM's request cannot be answered now without waiting on the store: a write applied
    to the platform waits for its commit's answer (it must not be shown before), or the
    request is the VM's first, whose record is being journaled
    (:mod:`forewarn.cluster.replica`). ``wait(ready)`` calls ``ready`` once it can be
    answered (then answered afresh) or must be refused; an endpoint that cannot wait
    refuses it as the store being unavailable (``503``), which it is a kind of."""

    def __init__(self, wait: Callable[[Ready], None]) -> None:
        super().__init__("the store has not confirmed a change yet; retry in a moment")
        self.wait = wait


@dataclass(frozen=True, slots=True, init=False)
class EncodedDocument:
    """A document's bytes and its ETag, the incarnation (SPEC 1.4: the
    scale sets' terminate-notification page calls DocumentIncarnation "an ETag")."""

    body: bytes
    tag: str
    etag: bytes
    #: The document encoded: a VM's cached encoding holds while it is shown this very object.
    document: Document

    def __init__(self, body: bytes, tag: str, etag: bytes, document: Document) -> None:
        # Through the slots' own setters (forewarn.domain._frozen): one for every document a
        # campaign changes, and one more for each VM shown a shared one.
        _set_body(self, body)
        _set_tag(self, tag)
        _set_etag(self, etag)
        _set_document(self, document)

    @classmethod
    def of(cls, document: Document, version: ApiVersion) -> EncodedDocument:
        """The encoding of ``document``; equal documents (the empty one every VM starts
        with, the same events shown across a set) share one body and one tag."""
        shared = _shared_encoding(document, version)
        if shared.document is document:
            return shared
        return cls(shared.body, shared.tag, shared.etag, document)


_set_body, _set_tag, _set_etag, _set_document = frozen_slot_setters(EncodedDocument)


def _encoding(
    document: Document, version: ApiVersion, cached: EncodedDocument | None
) -> EncodedDocument:
    """``document`` encoded as ``version`` shows it: ``cached`` while it encodes this very
    document (a VM's document is replaced, never changed, when its events change)."""
    if cached is not None and cached.document is document:
        return cached
    return EncodedDocument.of(document, version)


#: Distinct documents whose encodings are shared between the VMs shown them.
_SHARED_ENCODINGS = 1024
#: Those encodings by api-version, incarnation (as that version reads it) and the identities
#: of the events shown: an event is one object in every document showing it, so equal
#: documents of VMs shown the same events have equal keys, made without hashing the events
#: field by field (which cost more than encoding a one-event document). An entry holds its
#: document, so no identity in a kept key can be reused by another object. Emptied when full,
#: at once rather than entry by entry: a campaign's documents, each shown to one VM, pass
#: through it, and a shared document is encoded again at most once per so many.
_shared: dict[tuple[str, int, tuple[int, ...]], EncodedDocument] = {}


def _shared_encoding(document: Document, version: ApiVersion) -> EncodedDocument:
    incarnation = document.incarnation_for(version.event_types)
    key = (version.name, incarnation, tuple(map(id, document.events)))
    shared = _shared.get(key)
    if shared is None:
        if len(_shared) >= _SHARED_ENCODINGS:
            _shared.clear()
        tag = str(incarnation)
        shared = _shared[key] = EncodedDocument(
            encode_document(document, version), tag, b'"%s"' % tag.encode(), document
        )
    return shared


class VmRequestPath:
    """The service's VM-facing reads: a base class of
    :class:`~forewarn.service.ScheduledEventsService`, which sets the state declared here."""

    # api-version name -> VM name -> its document's encoding
    _encoded: dict[str, dict[str, EncodedDocument]]
    # The address a request arrived at -> what it found there (request_from)
    _known: dict[str, _Known]
    _writer: JournalWriter | None
    _replica: Replica | None
    _clock: Clock

    def _caught_up(self) -> Platform:
        """The platform brought up to the clock: the service's (the catch-up rule)."""
        raise NotImplementedError

    def _answered_at(self, platform: Platform) -> datetime:
        """The time a request is answered at (its Date): the platform's, which is the
        clock's once caught up. A front-end of a shared journal moves its platform only by
        the journal's records, which come when something falls due, so between them its
        platform's time stands still while the clock goes on: it answers at the clock's
        time then (Azure's Date is the time of the answer), the later of the two."""
        if self._replica is None:
            return platform.now
        return max(platform.now, self._clock.now())

    def _vm_platform(self) -> Platform:
        """The platform as VMs may be shown it: :meth:`_caught_up`'s, unless a write applied
        to it is waiting for its commit's answer (:class:`AnswerLaterError` then)."""
        platform = self._caught_up()
        replica = self._replica
        if replica is not None and replica.committing:
            raise AnswerLaterError(lambda ready: replica.when_committed(lambda: ready(None)))
        return platform

    def resolve_vm(self, local_address: str, peer_address: str) -> Vm | None:
        """The calling VM: by the address the request arrived at, then the one it came from.

        A fleet of one VM answers on any address, which is the zero-configuration default.
        """
        return _vm_calling(self._vm_platform(), local_address, peer_address)

    def vm_request(self, vm_name: str) -> Pause | None:
        """A request from ``vm_name`` arrived: it counts as a request (turning Scheduled Events
        on when it is the first), unless the VM is down (reboot, freeze, deleted) when nothing
        inside it could be asking. None when it can be answered now; otherwise why and until
        when not (the first-call delay included)."""
        return self._requested(self._vm_platform(), vm_name)

    def request_from(
        self,
        local_address: str,
        peer_address: str,
        version: ApiVersion | None = None,
        *,
        for_events: bool = True,
    ) -> Arrival | None:
        """:meth:`resolve_vm` then :meth:`vm_request` on one catch-up, as the endpoint asks
        for every request: the calling VM, why it cannot be answered now if it cannot, the
        platform time it arrived at (the answer's Date) and, for a request of Scheduled
        Events answered now, the document as ``version`` shows it after this request; None
        when no VM answers at those addresses and none was deleted there. A request in the
        name of a deleted VM arrives with a pause that never ends (:attr:`Pause.gone`),
        naming the event that deleted it: nothing answers it.

        ``for_events`` False is a request for instance metadata or the versions: it does not
        count as a request for events (:meth:`Platform.arrive`), so it neither turns
        Scheduled Events on nor keeps it on, and waits for no first-call delay.

        What a VM's request found is kept by the address it arrived at while the VM was
        answerable (:class:`_Known`): while nothing it meets has changed since
        (:meth:`Platform.unchanged_since`; other VMs' changes do not count), its next request
        finds the same VM, no pause and the same document, and only counts as a request.
        Most of a fleet's polls are those, a campaign's polls of the VMs it is not at too.
        """
        platform = self._vm_platform()
        if not for_events:  # rare beside the polls: looked up afresh, nothing kept
            calling = _vm_calling(platform, local_address, peer_address)
            if calling is None:
                return _gone(platform, local_address, peer_address, self._answered_at(platform))
            pause = self._requested(platform, calling.name, for_events=False)
            return Arrival(calling, pause, self._answered_at(platform), None)
        known = self._known.get(local_address)
        if known is not None and known.version is version:
            vm = known.vm
            if self._again(platform, vm.name, known.changes):
                at = self._answered_at(platform)
                return Arrival(vm, None, at, known.document, known.changes)
        calling = _vm_calling(platform, local_address, peer_address)
        if calling is None:
            return _gone(platform, local_address, peer_address, self._answered_at(platform))
        pause = self._requested(platform, calling.name)
        address = calling.address
        kept = pause is None and address == local_address
        if version is None or pause is not None:  # nothing to show, or nobody answered now
            document = None
        elif kept and (known is None or known.version is version):
            # Its encoding kept with the address alone, not in the table by VM name as well:
            # one lookup in a table of the whole fleet the less for every changed VM's poll.
            cached = None if known is None else known.document
            document = _encoding(platform.document(calling.name), version, cached)
        else:
            document = self._encoded_of(platform, calling.name, version)
        if kept and address is not None:  # (it is: equal to the local address)
            changes = platform.changes
            if known is None:  # kept under the VM's own address string, not the caller's
                self._known[address] = _Known(changes, calling, version, document)
            elif version is not None or known.version is None:
                # out of date: brought up to date in place, as a campaign does to each
                known.changes, known.vm = changes, calling
                known.version, known.document = version, document
            # else an approval (no version) from a VM that polls: what its polls found is
            # kept, out of date as it may be (its count is behind when the VM changed since),
            # so its next poll finds its document's last encoding there rather than in the
            # table by name
            return Arrival(calling, None, self._answered_at(platform), document, changes)
        return Arrival(calling, pause, self._answered_at(platform), document)

    def request_again(self, vm_name: str, changes: int) -> datetime | None:
        """A request from ``vm_name`` repeating one whose arrival holds while the platform
        read ``changes`` (:attr:`Arrival.repeats_under`), as a VM's every poll on a kept
        connection repeats its last: counted as :meth:`request_from` counts it, and the
        platform time it arrived at when that arrival holds still. None when something of
        the VM's changed since (:meth:`Platform.unchanged_since`), or this very request
        changed it (the VM back after the idle period): :meth:`request_from` then says what
        it finds."""
        replica = self._replica
        if replica is not None:
            # Never answered from a write waiting for its commit (_vm_platform): respond
            # then says when it may be.
            if replica.committing:
                return None
            platform = self._caught_up()
            if not self._replica_again(platform, vm_name, changes):
                return None
            return self._answered_at(platform)
        platform = self._caught_up()
        # _again's rule written out: a kept connection's every poll comes here.
        turned_on = platform.repeat(vm_name, changes)
        if turned_on is False:
            return platform.now
        if turned_on:
            self._journal_touch(platform, vm_name)
        return None

    def _again(self, platform: Platform, vm_name: str, changes: int) -> bool:
        """The rule of :meth:`request_again` on a platform caught up already: True when the
        request is counted and what it found holds still."""
        if self._replica is not None:
            return self._replica_again(platform, vm_name, changes)
        # Not down, so the request counts (Platform.arrive's rule): only a touch that turned
        # Scheduled Events on (a VM back after the idle period) changes anything.
        turned_on = platform.repeat(vm_name, changes)
        if turned_on:
            self._journal_touch(platform, vm_name)
            return False
        return turned_on is not None

    def _replica_again(self, platform: Platform, vm_name: str, changes: int) -> bool:
        """:meth:`_again`'s rule for a front-end of a shared journal, whose platform only its
        records move: the request repeats while nothing of the VM's has changed since and it
        still receives, unpaused; it is then counted as :meth:`_requested` counts it
        (journaled later, with the VMs seen meanwhile). A VM not receiving leaves it to
        :meth:`request_from`, whose first request is journaled before it is answered."""
        return (
            platform.unchanged_since(vm_name, changes)
            and platform.receiving(vm_name)
            and self._requested(platform, vm_name) is None
        )

    def _journal_touch(self, platform: Platform, vm_name: str) -> None:
        """A request from ``vm_name`` turned Scheduled Events on: the only requests that
        change state, so the only ones journaled (or undone, and refused, when that fails)."""
        if self._writer is not None:
            self._writer.journal_taken(Touch(vm_name), platform.now)

    def _requested(
        self, platform: Platform, vm_name: str, *, for_events: bool = True
    ) -> Pause | None:
        if self._replica is not None:
            # Whether the request counts is the same rule (Pause.warming_up, and only a
            # request for events), but the replica journals the touch, as every front-end
            # must apply it.
            pause = platform.pause(vm_name)
            if pause is not None and not pause.warming_up:
                return pause
            if not for_events:
                return None
            return self._replica.requested(vm_name) or platform.pause(vm_name)
        writer = self._writer
        if (
            writer is not None
            and for_events
            and writer.refusing
            and writer.quiet()
            and _turns_on(platform, vm_name)
        ):
            raise writer.refusal()  # it would change state, which cannot be recorded now
        pause, turned_on = platform.arrive(vm_name, for_events=for_events)
        if turned_on:
            self._journal_touch(platform, vm_name)
        return pause

    def impacts(self) -> dict[str, Pause]:
        """The VMs under an impact now (for impact hooks)."""
        return self._caught_up().impacts()

    def deletions_after(self, number: int) -> tuple[Deletion, ...]:
        """The VMs deleted after the ``number``-th deletion and not added again, in order
        (for impact hooks, which stop a deleted VM's software)."""
        return self._caught_up().deletions_after(number)

    def document_bytes(self, vm_name: str, version: ApiVersion) -> bytes:
        return self.encoded_document(vm_name, version).body

    def encoded_document(self, vm_name: str, version: ApiVersion) -> EncodedDocument:
        """``vm_name``'s document as ``version`` shows it, with its tag; cached until the
        VM's events change."""
        return self._encoded_of(self._caught_up(), vm_name, version)

    def _encoded_of(self, platform: Platform, vm_name: str, version: ApiVersion) -> EncodedDocument:
        """The encoding of ``vm_name``'s document, kept by VM name: for the polls not kept
        by address (:class:`_Known`) and the control plane's readers."""
        document = platform.document(vm_name)
        encodings = self._encoded.get(version.name)
        if encodings is None:
            encodings = self._encoded[version.name] = {}
        encoded = encodings[vm_name] = _encoding(document, version, encodings.get(vm_name))
        return encoded

    def document(self, vm_name: str) -> Document:
        return self._caught_up().document(vm_name)


class Arrival(NamedTuple):
    """A VM's request as the platform took it: who called, why it cannot be answered now
    (None when it can), and when, so one reading of the clock serves the whole request."""

    vm: Vm
    pause: Pause | None
    at: datetime
    #: For a request of Scheduled Events answered now, the document it is answered with.
    document: EncodedDocument | None
    #: The platform's count of changes (:attr:`Platform.changes`) when it arrived: until
    #: something of this VM's changes after it (:meth:`Platform.unchanged_since`), the same
    #: request from the same address finds all of this again and only counts as a request
    #: (:meth:`ScheduledEventsService.request_again`); None when it may find otherwise.
    repeats_under: int | None = None


class _Known:
    """What a VM's request found at the address it arrived at, while the platform had
    changed ``changes`` times: the VM, answerable, and its document as ``version`` shows it;
    all of it holds until something of that VM changes after (:meth:`Platform.unchanged_since`)."""

    __slots__ = ("changes", "document", "version", "vm")

    def __init__(
        self, changes: int, vm: Vm, version: ApiVersion | None, document: EncodedDocument | None
    ) -> None:
        self.changes = changes
        self.vm = vm
        self.version = version
        self.document = document


def _turns_on(platform: Platform, vm_name: str) -> bool:
    """Whether a request from ``vm_name`` now would turn Scheduled Events on
    (:meth:`Platform.arrive`'s rule, read without taking the request): off or idle, and up."""
    return not platform.receiving(vm_name) and platform.pause(vm_name) is None


def _gone(
    platform: Platform, local_address: str, peer_address: str, at: datetime
) -> Arrival | None:
    """The arrival at ``at`` of a request in the name of a VM deleted since, or None when no
    VM ever answered there (:meth:`Platform.deleted_calling`)."""
    deletion = platform.deleted_calling(local_address, peer_address)
    if deletion is None:
        return None
    event = deletion.event
    pause = Pause(None) if event is None else Pause(None, event.event_type, event.event_id)
    return Arrival(deletion.vm, pause, at, None)


def _vm_calling(platform: Platform, local_address: str, peer_address: str) -> Vm | None:
    vm = platform.vm_at(local_address) or platform.vm_at(peer_address)
    if vm is None:
        vms = platform.vms()
        if len(vms) == 1 and vms[0].address is None:
            return vms[0]
    return vm


__all__ = ["AnswerLaterError", "Arrival", "EncodedDocument", "Ready", "VmRequestPath"]

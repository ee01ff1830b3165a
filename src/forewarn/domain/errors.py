"""Errors the domain raises, independent of any transport.

The HTTP edge maps these to status codes; nothing here knows what a status code is. The root,
:class:`~forewarn.errors.ForewarnError`, lives in :mod:`forewarn.errors` (standard library
only), so the SDK, storage and the agent need not import the domain for it.

    ForewarnError                   (forewarn.errors)
    └── DomainError
        ├── UnknownVmError          no VM of that name or address
        ├── UnknownGroupError       no scale set of that name
        │   └── UnknownHostError    no VM runs on that host
        ├── UnknownEventError       an event id the calling VM cannot see
        ├── InvalidOperationError   the request makes no sense in the current state
        ├── InvalidEventError       an event that breaks a documented rule (notice, type...)
        └── TimeOutOfRangeError     a time past LATEST, or a duration longer than LONGEST
"""

from __future__ import annotations

from forewarn.errors import ForewarnError


class DomainError(ForewarnError):
    """A rule of the simulated platform was broken by the caller."""


class UnknownVmError(DomainError):
    """Raised when a VM name or address does not belong to the fleet."""

    def __init__(self, what: str) -> None:
        super().__init__(f"no virtual machine {what}")


class UnknownGroupError(DomainError):
    """Raised when a scale set or host named by an operation does not exist."""

    def __init__(self, kind: str, name: str) -> None:
        super().__init__(f"no {kind} named {name!r}")


class UnknownHostError(UnknownGroupError):
    """Raised when no VM runs on the host an operation names (hosts exist through their VMs)."""

    def __init__(self, host: str) -> None:
        DomainError.__init__(self, f"no virtual machine runs on host {host!r}")


class UnknownEventError(DomainError):
    """Raised when an event id is not one the calling VM can see.

    Approvals name events by id; an id the VM cannot see must not change any state,
    so the whole request is refused before anything is recorded.
    """

    def __init__(self, event_ids: tuple[str, ...]) -> None:
        super().__init__("unknown event id(s): " + ", ".join(event_ids))
        self.event_ids = event_ids


class InvalidOperationError(DomainError):
    """Raised when an operation does not apply to the current state."""


class InvalidEventError(DomainError):
    """Raised when a requested event breaks a rule of its type."""


class TimeOutOfRangeError(DomainError):
    """Raised when a clock move, a journal's time or a duration would take the platform past
    the times it can print (:data:`forewarn.domain.clock.LATEST`, ``LONGEST``)."""


__all__ = [
    "DomainError",
    "ForewarnError",
    "InvalidEventError",
    "InvalidOperationError",
    "TimeOutOfRangeError",
    "UnknownEventError",
    "UnknownGroupError",
    "UnknownHostError",
    "UnknownVmError",
]

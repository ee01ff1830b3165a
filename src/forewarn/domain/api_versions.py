"""The Scheduled Events api-versions and what each one shows.

Source: the release notes table in learn.microsoft.com/azure/virtual-machines/linux/scheduled-events
("Version and Region Availability") and
learn.microsoft.com/azure/virtual-machines/windows/scheduled-events; distilled in SPEC 2. Each
version adds to the one before it, so the table is a list of increments.
"""

from __future__ import annotations

from dataclasses import dataclass

from forewarn.domain.events import EventType


@dataclass(frozen=True, slots=True)
class ApiVersion:
    """What a client asking with this api-version is shown.

    The table below is data, written out literally: built by a helper at import it would run
    before any test could see a change to that helper.
    """

    name: str
    event_types: frozenset[EventType]
    underscore_iaas_names: bool = False
    description: bool = False
    event_source: bool = False
    duration: bool = False
    metadata_header_on_post: bool = True

    def shows(self, event_type: EventType) -> bool:
        """An event whose type this version does not know is not shown to it at all."""
        return event_type in self.event_types


_BASE_TYPES = frozenset({EventType.FREEZE, EventType.REBOOT, EventType.REDEPLOY})
_WITH_PREEMPT = _BASE_TYPES | {EventType.PREEMPT}
_ALL_TYPES = _WITH_PREEMPT | {EventType.TERMINATE}


#: Oldest first. 2017-08-01's note "Metadata header requirement enforced for all requests"
#: means the preview did not demand it on POST (its C# sample approves without it).
SCHEDULED_EVENTS_VERSIONS: tuple[ApiVersion, ...] = (
    ApiVersion(
        "2017-03-01", _BASE_TYPES, underscore_iaas_names=True, metadata_header_on_post=False
    ),
    ApiVersion("2017-08-01", _BASE_TYPES),
    ApiVersion("2017-11-01", _WITH_PREEMPT),
    ApiVersion("2019-01-01", _ALL_TYPES),
    ApiVersion("2019-04-01", _ALL_TYPES, description=True),
    ApiVersion("2019-08-01", _ALL_TYPES, description=True, event_source=True),
    ApiVersion("2020-07-01", _ALL_TYPES, description=True, event_source=True, duration=True),
)

_BY_NAME: dict[str | None, ApiVersion] = {v.name: v for v in SCHEDULED_EVENTS_VERSIONS}

CURRENT_VERSION = SCHEDULED_EVENTS_VERSIONS[-1]

#: Listed in the body of an api-version error, newest first (SPEC 1, [ours]).
NEWEST_VERSIONS: tuple[str, ...] = tuple(v.name for v in reversed(SCHEDULED_EVENTS_VERSIONS[-3:]))


def find_version(name: str | None) -> ApiVersion | None:
    """The version called ``name``, or None: ``latest``, unknown names and no name at all are
    not versions."""
    return _BY_NAME.get(name)


__all__ = [
    "CURRENT_VERSION",
    "NEWEST_VERSIONS",
    "SCHEDULED_EVENTS_VERSIONS",
    "ApiVersion",
    "find_version",
]

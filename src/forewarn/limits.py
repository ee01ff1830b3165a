"""The bounds of what the control API takes, shared by its request models and by the scenario
schema, which checks every step of a file against them before any step runs: a file
``forewarn scenario validate`` accepts is one whose every step the API accepts as far as a
body alone can tell (what depends on the platform's state, a VM that exists or a notice
long enough for the profile, is told when the step runs).

Durations come from the domain (:data:`forewarn.domain.clock.LONGEST`); the faults' own bounds
live with them in :mod:`forewarn.faults`. Light on purpose: the CLI imports it.
"""

from __future__ import annotations

from forewarn.domain.clock import LONGEST

__all__ = [
    "MAX_DESCRIPTION",
    "MAX_NAMES",
    "MAX_NAME_LENGTH",
    "MAX_SECONDS",
]

#: Names (VMs, instance ids, event ids) one request may list.
MAX_NAMES = 10_000
#: Characters of a VM's name in a request.
MAX_NAME_LENGTH = 128
#: Characters of an event's Description.
MAX_DESCRIPTION = 1024
#: The longest duration a request may give, in seconds (100 years).
MAX_SECONDS = int(LONGEST.total_seconds())

"""The test platform's impact hook: ``serve --impact-hook``'s equivalent in a test.

A harness running the application under test as real processes (one per VM) needs to know
when a VM's impact starts and ends, to pause or resume them, and above all when a VM is
deleted (a Terminate or Preempt at the end of its impact), to stop them: on Azure the
software of a deleted VM is gone with it. The same :class:`~forewarn.domain.impact.ImpactWatch`
as ``serve`` finds the changes; here they are looked for after every call the test makes on
its platform, and told in the test's own thread, in order.
"""

from __future__ import annotations

from collections.abc import Callable

from forewarn.domain.impact import ImpactChange, ImpactWatch
from forewarn.service import ScheduledEventsService

#: What a test passes as ``impact_hook``: called with each change, its result ignored.
ImpactHook = Callable[[ImpactChange], object]


class ImpactHookCaller:
    """Finds the changes since the last look (where the platform may be touched) and calls
    the hook with them (in the test's thread)."""

    __slots__ = ("_hook", "_watch")

    def __init__(self, hook: ImpactHook) -> None:
        self._hook = hook
        self._watch = ImpactWatch()

    def look(self, service: ScheduledEventsService) -> list[ImpactChange]:
        """The changes since the last look; run where the platform may be touched."""
        watch = self._watch
        return watch.changes(service.impacts(), service.deletions_after(watch.deletions_seen))

    def tell(self, changes: list[ImpactChange]) -> None:
        for change in changes:
            self._hook(change)

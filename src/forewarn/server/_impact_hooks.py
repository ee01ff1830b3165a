"""Impact hooks: a command run when a VM's impact starts, when it ends, and when the VM is
deleted.

forewarn can only pretend a VM is paused, rebooting or gone; users who want that to be real
on their workload (``docker pause``, ``kill -STOP``, restarting a service, stopping the
software of a deleted VM) name a command, which runs with the VM, the event and the phase in
its environment. A hook is bounded by a timeout and its failure is logged: it never stops the
platform.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Callable

from forewarn.domain.impact import ImpactChange, ImpactWatch, Pause
from forewarn.domain.platform import Deletion
from forewarn.storage.errors import StoreUnavailableError

__all__ = ["ImpactHooks", "watch_impacts"]

LOG = logging.getLogger("forewarn.impact")

#: How often, in real time, the platform is asked which VMs are under an impact.
_WATCH_INTERVAL = 0.1


class ImpactHooks:
    """Runs ``command`` (a shell command line) for each impact start and end, and each VM
    deleted."""

    def __init__(self, command: str, *, timeout: float = 30.0) -> None:
        self.command = command
        self.timeout = timeout

    async def run(self, change: ImpactChange) -> int | None:
        """The hook's exit status, or None when it did not finish within the timeout."""
        vm, phase = change.vm, change.phase
        env = dict(os.environ)
        env.update(
            FOREWARN_VM=vm,
            FOREWARN_EVENT_ID=change.event_id or "",
            FOREWARN_EVENT_TYPE=change.event_type.value if change.event_type else "",
            FOREWARN_IMPACT=phase,
        )
        try:
            process = await asyncio.create_subprocess_shell(
                self.command, env=env, start_new_session=True
            )
        except OSError as exc:
            LOG.warning("impact hook %r could not start: %s", self.command, exc)
            return None
        try:
            status = await asyncio.wait_for(process.wait(), self.timeout)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, 9)
            await process.wait()
            LOG.warning("impact hook for %s (%s) killed after %.0f s", vm, phase, self.timeout)
            return None
        if status != 0:
            LOG.warning("impact hook for %s (%s) exited with status %d", vm, phase, status)
        return status


async def watch_impacts(
    impacts: Callable[[], dict[str, Pause]],
    deletions_after: Callable[[int], tuple[Deletion, ...]],
    hooks: ImpactHooks,
    stop: asyncio.Event,
) -> None:
    """Run ``hooks`` as VMs enter and leave impacts and are deleted, until ``stop`` is set.

    What changed is found by comparing looks at the platform (:class:`ImpactWatch`), so it
    follows the platform clock whatever drives it (system, scaled, or moved by the control
    API). Each VM's hooks run in order (its end after its start, its deletion after its
    end); different VMs' run at once. VMs deleted before the first look are not told.
    """
    before = deletions_after(0)
    watch = ImpactWatch(before[-1].number if before else 0)
    chains: dict[str, asyncio.Task[None]] = {}

    def chain(change: ImpactChange) -> None:
        previous = chains.get(change.vm)

        async def after_previous() -> None:
            if previous is not None:
                await previous
            await hooks.run(change)

        chains[change.vm] = asyncio.create_task(after_previous())

    while not stop.is_set():
        try:
            changes = watch.changes(impacts(), deletions_after(watch.deletions_seen))
        except StoreUnavailableError:  # being rebuilt from its journal: looked at again next
            changes = []
        for change in changes:
            chain(change)
        for vm in [vm for vm, task in chains.items() if task.done()]:
            del chains[vm]
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), _WATCH_INTERVAL)
    for change in watch.ending():
        chain(change)
    if chains:
        await asyncio.gather(*chains.values(), return_exceptions=True)

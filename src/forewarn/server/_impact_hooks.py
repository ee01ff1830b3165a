"""Impact hooks: a command run when a VM's impact starts and when it ends.

forewarn can only pretend a VM is paused or rebooting; users who want the impact to be real
on their workload (``docker pause``, ``kill -STOP``, restarting a service) name a command,
which runs with the VM, the event and the phase in its environment. A hook is bounded by a
timeout and its failure is logged: it never stops the platform.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Callable

from forewarn.domain.impact import Pause
from forewarn.storage.errors import StoreUnavailableError

__all__ = ["ImpactHooks", "watch_impacts"]

LOG = logging.getLogger("forewarn.impact")

#: How often, in real time, the platform is asked which VMs are under an impact.
_WATCH_INTERVAL = 0.1


class ImpactHooks:
    """Runs ``command`` (a shell command line) for each impact start and end."""

    def __init__(self, command: str, *, timeout: float = 30.0) -> None:
        self.command = command
        self.timeout = timeout

    async def run(self, vm: str, pause: Pause, phase: str) -> int | None:
        """The hook's exit status, or None when it did not finish within the timeout."""
        env = dict(os.environ)
        env.update(
            FOREWARN_VM=vm,
            FOREWARN_EVENT_ID=pause.event_id or "",
            FOREWARN_EVENT_TYPE=pause.event_type.value if pause.event_type else "",
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
    impacts: Callable[[], dict[str, Pause]], hooks: ImpactHooks, stop: asyncio.Event
) -> None:
    """Run ``hooks`` as VMs enter and leave impacts, until ``stop`` is set.

    Starts and ends are found by comparing what ``impacts`` reports between looks, so they
    follow the platform clock whatever drives it (system, scaled, or moved by the control
    API). Each VM's hooks run in order (its end after its start); different VMs' run at once.
    """
    known: dict[str, Pause] = {}
    chains: dict[str, asyncio.Task[None]] = {}

    def chain(vm: str, pause: Pause, phase: str) -> None:
        previous = chains.get(vm)

        async def after_previous() -> None:
            if previous is not None:
                await previous
            await hooks.run(vm, pause, phase)

        chains[vm] = asyncio.create_task(after_previous())

    while not stop.is_set():
        try:
            current = impacts()
        except StoreUnavailableError:  # being rebuilt from its journal: looked at again next
            current = known
        for vm, pause in known.items():
            if current.get(vm, None) is None or current[vm].event_id != pause.event_id:
                chain(vm, pause, "end")
        for vm, pause in current.items():
            if vm not in known or known[vm].event_id != pause.event_id:
                chain(vm, pause, "start")
        known = current
        for vm in [vm for vm, task in chains.items() if task.done()]:
            del chains[vm]
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), _WATCH_INTERVAL)
    for vm, pause in known.items():
        chain(vm, pause, "end")
    if chains:
        await asyncio.gather(*chains.values(), return_exceptions=True)

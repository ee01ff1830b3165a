"""``forewarn serve``'s start-up lines: where every VM answers, a curl line that works for
the fleet, the control API with its token (or where it is), the store.

Printed once both planes listen, so every address they name answers; README.md quotes the
first line byte for byte (the documentation's tests compare it).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from forewarn.server.settings_checks import url_for
from forewarn.server.state import describe_store

if TYPE_CHECKING:
    from forewarn.domain.vms import Vm
    from forewarn.server.runner import ServeSettings

__all__ = ["control_line", "start_up_lines"]

#: How many VMs the start-up lines name; ``forewarn vm list`` shows them all.
_LISTED = 8


def start_up_lines(
    settings: ServeSettings,
    vms: Sequence[Vm],
    *,
    profile: str,
    token: str,
    token_path: Path,
    store: str | None = None,
) -> list[str]:
    """The lines ``serve`` prints once it listens, in order; ``store``: how to name the
    store (default: as the settings give it)."""
    addressed = [vm for vm in vms if vm.address is not None]
    # Where a VM answers: the bind address is no VM's when the fleet gives VMs addresses of
    # their own (nothing answers a request there), so the first of those.
    first = next((vm for vm in addressed if vm.address == settings.host), None)
    if first is None and addressed:
        first = addressed[0]
    endpoint_url = url_for(settings.host if first is None else str(first.address), settings.port)
    vm_names = ", ".join(vm.name for vm in vms[:5])
    more = len(vms) - 5
    whose = "" if first is None else f" ({first.name}'s; each VM at its own address)"
    lines = [
        f"forewarn: Scheduled Events for {len(vms)} VM(s) ({vm_names}"
        f"{f' and {more} more' if more > 0 else ''}) at {endpoint_url}/metadata/scheduledevents"
        f"{whose}; control API at {url_for(settings.control_host, settings.control_port)}/api/v1; "
        f"clock {settings.clock}, timing profile {profile}; "
        f"state in {store or describe_store(settings)}."
    ]
    if addressed:
        shown = ", ".join(f"{vm.name} at {vm.address}" for vm in addressed[:_LISTED])
        rest = len(addressed) - _LISTED
        lines.append(f"  VMs: {shown}{f' and {rest} more' if rest > 0 else ''}")
    lines.append(
        f"  try: curl -H Metadata:true "
        f'"{endpoint_url}/metadata/scheduledevents?api-version=2020-07-01"'
    )
    lines.append(control_line(settings, token, token_path))
    if settings.control_tls is not None:
        tls_url = url_for(*settings.control_tls).replace("http://", "https://", 1)
        lines.append(f"  control over TLS (for the Azure SDKs): {tls_url}")
    return lines


def control_line(settings: ServeSettings, token: str, token_path: Path) -> str:
    """The start-up line of the control API: the link with its token when forewarn made the
    token up, but never a token the user chose (``--token``, ``FOREWARN_TOKEN``), which start-up
    lines would copy into every log that keeps them (a pod's, a CI job's)."""
    control_url = url_for(settings.control_host, settings.control_port)
    if settings.token is None:
        return f"  control: {control_url}/?token={token} (the token is also in {token_path})"
    return (
        f"  control: {control_url}/?token=<the token given with --token or FOREWARN_TOKEN, "
        f"not shown here; the CLI finds it in {token_path}>"
    )

"""Azure's doors beyond the VM's, on the control port: the Maintenance provider's acknowledge
call, Resource Graph's query and Event Grid's subscriptions (docs/azure-side.md)."""

from __future__ import annotations

__all__: list[str] = []

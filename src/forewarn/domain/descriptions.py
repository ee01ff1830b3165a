"""The Description texts the documentation and real captures show (SPEC 2)."""

from __future__ import annotations

HOST_MAINTENANCE = "Host server is undergoing maintenance."
HOST_INFRASTRUCTURE_MAINTENANCE = "Host Server infrastructure is undergoing maintenance."
LIVE_MIGRATION = (
    "Virtual machine is being paused because of a memory-preserving Live Migration operation."
)
USER_RESTART = "Virtual machine is going to be restarted as requested by authorized user."
USER_REDEPLOY = "Virtual machine is going to be redeployed as requested by authorized user."
EMERGENCY_REPAIR = "Host server is undergoing an emergency repair."
VM_FAILURE = "Virtual machine has encountered a failure."


__all__ = [
    "EMERGENCY_REPAIR",
    "HOST_INFRASTRUCTURE_MAINTENANCE",
    "HOST_MAINTENANCE",
    "LIVE_MIGRATION",
    "USER_REDEPLOY",
    "USER_RESTART",
    "VM_FAILURE",
]

"""A worker that drains before its VM is impacted, approves the event, and recovers."""

from __future__ import annotations

from drainer.worker import AZURE_ENDPOINT, Worker

__all__ = ["AZURE_ENDPOINT", "Worker"]

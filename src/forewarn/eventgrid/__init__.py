"""Event Grid's system topic for scheduled events: webhook subscriptions, their validation
handshake, and at-least-once delivery with Event Grid's retry schedule, maximum attempts,
time to live and dead-lettering (docs/azure-side.md)."""

from __future__ import annotations

__all__: list[str] = []

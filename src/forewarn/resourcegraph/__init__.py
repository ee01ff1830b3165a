"""Azure Resource Graph's ``maintenanceresources`` table: a small, safe subset of KQL
(:mod:`forewarn.resourcegraph.kql`) run over the rows of published events
(:mod:`forewarn.resourcegraph.query`)."""

from __future__ import annotations

__all__: list[str] = []

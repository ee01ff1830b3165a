"""EventIds: upper-case GUIDs, drawn from a seeded generator so a run can replay exactly."""

from __future__ import annotations

import random
import uuid


class EventIdFactory:
    """Makes globally unique, upper-case, version-4 GUIDs from a seedable generator."""

    def __init__(self, seed: int | None = None) -> None:
        self._random = random.Random(seed)

    def __call__(self) -> str:
        return str(uuid.UUID(int=self._random.getrandbits(128), version=4)).upper()

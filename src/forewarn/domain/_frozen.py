"""Frozen records built as often as a fleet's campaign builds them.

A frozen dataclass refuses ``setattr``, so its generated ``__init__`` gets past the refusal by
calling ``object.__setattr__`` once per field, which looks each field up again on the class.
The records the platform builds for every event and every VM's every change (an event, a
document) set their slots through the slots' own descriptors instead, found once here: the
same values end up in the same slots, and the record stays as frozen as before.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields
from typing import Any

#: Sets one slot of a record, as ``object.__setattr__(record, name, value)`` would.
SlotSetter = Callable[[Any, Any], None]


def frozen_slot_setters(cls: type) -> tuple[SlotSetter, ...]:
    """The setter of each field's slot of the slotted dataclass ``cls``, in field order."""
    return tuple(vars(cls)[field.name].__set__ for field in fields(cls))

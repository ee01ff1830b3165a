"""Testing applications that handle Scheduled Events: a platform in the test's process.

The pytest plugin (:mod:`forewarn.testing.plugin`, registered through the ``pytest11`` entry
point, so installing forewarn is enough) gives a test a :class:`ForewarnPlatform` on a manual
clock::

    def test_drains_and_approves(forewarn_platform):
        worker = Worker(endpoint=forewarn_platform.url)
        (event,) = forewarn_platform.restart("vm0")
        worker.poll_once()
        forewarn_platform.assert_approved(event, by="vm0", within=1)

``forewarn_verify`` (or :func:`verify_handler`) grades a whole handler as ``forewarn verify``
does (docs/verify.md). Usage, the fixtures and the marker are in ``docs/testing.md``; the
same handle works without pytest as a context manager
(``with ForewarnPlatform(vms=["a", "b"]) as platform: ...``).
"""

from __future__ import annotations

from forewarn.domain.impact import ImpactChange
from forewarn.testing._impact_hook import ImpactHook
from forewarn.testing._platform import (
    DEFAULT_WAIT,
    EventRef,
    ForewarnPlatform,
    MakePlatform,
    event_id_of,
)
from forewarn.testing._recording import Approval, RecordedRequest
from forewarn.testing._verify import VerifyFailed, verify_handler

__all__ = [
    "DEFAULT_WAIT",
    "Approval",
    "EventRef",
    "ForewarnPlatform",
    "ImpactChange",
    "ImpactHook",
    "MakePlatform",
    "RecordedRequest",
    "VerifyFailed",
    "event_id_of",
    "verify_handler",
]

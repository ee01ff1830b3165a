"""The pytest plugin: ``forewarn_platform``, ``make_forewarn_platform`` and ``forewarn_verify``.

Registered through the ``pytest11`` entry point ``forewarn``, so any project with forewarn
installed has the fixtures; ``-p no:forewarn`` turns it off. Options come from the
``forewarn`` marker (closest wins, so a class or module can set them with ``pytestmark``) or
from the factory's keyword arguments; both take what :class:`ForewarnPlatform` takes::

    @pytest.mark.forewarn(vms=["web0", "web1"], profile="fast")
    def test_fleet(forewarn_platform): ...

    def test_two(make_forewarn_platform):
        blue = make_forewarn_platform(vms=["blue"])
        green = make_forewarn_platform(vms=["green"], seed=7)

Every platform a test made is closed at teardown: listeners and open connections shut, the
server thread joined.

``forewarn_verify`` grades a whole handler as ``forewarn verify`` does (docs/verify.md) and
fails the test naming the trials it failed::

    def test_my_handler(forewarn_verify):
        forewarn_verify([sys.executable, "my_handler.py"], suite="quick")
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from forewarn.testing._platform import ForewarnPlatform, MakePlatform
from forewarn.testing._verify import verify_handler

MARKER = "forewarn"
MARKER_HELP = (
    "forewarn(**options): options of the forewarn_platform fixture (vms, fleet, profile, "
    "timing, seed, start, rate_limit, impact, impact_hook), as "
    "forewarn.testing.ForewarnPlatform takes them"
)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER_HELP)


@pytest.fixture
def make_forewarn_platform() -> Iterator[MakePlatform]:
    """A factory of platforms (``make_forewarn_platform(vms=[...], profile="fast")``),
    each closed when the test ends."""
    made: list[ForewarnPlatform] = []

    def make(**options: Any) -> ForewarnPlatform:
        platform = ForewarnPlatform(**options)
        made.append(platform)
        return platform

    try:
        yield make
    finally:
        for platform in reversed(made):
            platform.close()


@pytest.fixture
def forewarn_platform(
    request: pytest.FixtureRequest, make_forewarn_platform: MakePlatform
) -> ForewarnPlatform:
    """A platform on a manual clock, configured by the closest ``forewarn`` marker (one VM,
    ``vm0``, on the documented timing profile when there is none)."""
    marker = request.node.get_closest_marker(MARKER)
    if marker is not None and marker.args:
        raise pytest.UsageError(
            f"{request.node.nodeid}: the forewarn marker takes keyword arguments only"
        )
    options: dict[str, Any] = dict(marker.kwargs) if marker is not None else {}
    return make_forewarn_platform(**options)


@pytest.fixture
def forewarn_verify() -> Callable[..., Any]:
    """``forewarn_verify(handler, suite="quick", trials=(), ...)``: run ``forewarn verify``'s
    trials against ``handler`` (a command, or a callable ``handler(endpoint, stop)`` run on a
    thread); the report, or a failure naming each failed trial with its evidence
    (:func:`forewarn.testing.verify_handler` takes the same arguments)."""
    return verify_handler


__all__ = [
    "MARKER",
    "MARKER_HELP",
    "MakePlatform",
    "forewarn_platform",
    "forewarn_verify",
    "make_forewarn_platform",
    "pytest_configure",
]

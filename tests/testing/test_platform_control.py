"""forewarn.testing's control side: the control API in process, scenarios on the platform, and
the rate limit's clock.

The handle offers what ``forewarn serve`` offers the CLI and scenarios (docs/testing.md,
"Driving the platform"), so a test drives its platform the way those do; these check the
handle's own promises (SPEC 4 [ours] for the control API, section 8 for the limit).
"""

from __future__ import annotations

import threading
from typing import Any

import httpx
import pytest

from forewarn.scenario import parse_scenario
from forewarn.testing import ForewarnPlatform

API = {"api-version": "2020-07-01"}
HEADERS = {"Metadata": "true"}


def test_the_control_client_drives_the_platform_in_process() -> None:
    with ForewarnPlatform() as platform, platform.control_client() as http:
        created = http.post("/api/v1/vms/vm0/restart")
        assert created.status_code == 200, created.text
        (event,) = platform.events()
        assert [e["EventId"] for e in created.json()["events"]] == [event.event.event_id]
        assert http.post("/api/v1/clock/advance", json={"seconds": 60}).status_code == 200
        assert platform.now.isoformat() == "2022-04-11T22:12:58+00:00"
        assert http.get("/api/v1/clock").json()["now"].startswith("2022-04-11T22:12:58")


def test_the_control_client_runs_on_the_server_loop_once_sockets_serve(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The platform is not thread-safe: once the socket server runs, a control request is
    handled on its loop, the only thread that then touches the platform."""
    with ForewarnPlatform() as platform:
        server = platform.serve()
        seen: list[str] = []
        original = platform.service.execute  # where every change is made, by any route

        def execute(*args: Any, **kwargs: Any) -> Any:
            seen.append(threading.current_thread().name)
            return original(*args, **kwargs)

        monkeypatch.setattr(platform.service, "execute", execute)
        with platform.control_client() as http:
            assert http.post("/api/v1/vms/vm0/restart").status_code == 200
        assert seen == ["forewarn-imds-server"]
        assert server.is_running()
        document = httpx.get(platform.scheduled_events_url(), params=API, headers=HEADERS)
        assert [e["EventType"] for e in document.json()["Events"]] == ["Reboot"]


def test_the_control_client_answers_the_control_api_errors() -> None:
    """SPEC 4 [ours]: an unknown VM is the control API's 404."""
    with ForewarnPlatform() as platform, platform.control_client() as http:
        response = http.post("/api/v1/vms/nobody/restart")
        assert response.status_code == 404
        assert "nobody" in response.json()["error"]
        assert platform.events() == ()


def test_a_scenario_runs_on_the_platform_and_a_failure_is_returned() -> None:
    with ForewarnPlatform(vms=["a", "b"]) as platform:
        steps: list[int] = []
        passed = platform.run_scenario(
            parse_scenario(
                "steps:\n  - restart: a\n"
                "  - expect: {vm: a, events: [{EventType: Reboot, Resources: [a]}]}\n"
            ),
            on_step=lambda step: steps.append(step.number),
        )
        assert passed.passed, passed.failure
        assert steps == [1, 2]
        (event,) = platform.events()
        assert [r.name for r in event.event.resources] == ["a"]
        failed = platform.run_scenario(
            parse_scenario("steps:\n  - expect: {vm: b, incarnation: 7}\n")
        )
        assert not failed.passed
        assert failed.failure is not None
        assert failed.failure.number == 1


def test_the_rate_limit_runs_on_the_clock_it_is_given() -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Polling frequency": 5
    requests per second per VM, then 429 (SPEC 8); measured on the ``monotonic`` the test passes."""
    now = [100.0]
    with ForewarnPlatform(monotonic=lambda: now[0]) as platform:
        http = httpx.Client(transport=platform.transport(), base_url="http://169.254.169.254")
        with http:

            def status() -> int:
                return http.get(
                    "/metadata/scheduledevents", params=API, headers=HEADERS
                ).status_code

            assert [status() for _ in range(6)] == [200] * 5 + [429]
            now[0] += 1.0
            assert status() == 200


@pytest.mark.parametrize("step", [0.25, 1.0])
def test_the_rate_limit_clock_moving_lets_requests_through(step: float) -> None:
    now = [0.0]

    def monotonic() -> float:
        now[0] += step
        return now[0]

    with ForewarnPlatform(monotonic=monotonic) as platform:
        http = httpx.Client(transport=platform.transport(), base_url="http://169.254.169.254")
        with http:
            statuses = [
                http.get("/metadata/scheduledevents", params=API, headers=HEADERS).status_code
                for _ in range(12)
            ]
        assert statuses == [200] * 12

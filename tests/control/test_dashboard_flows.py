"""Built-in flows from the dashboard: ``GET /api/v1/flows`` lists them and ``POST
/api/v1/scenarios`` runs one by name, through the control API as ``forewarn scenario run
--builtin`` does (docs/flows.md)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from forewarn.scenario import in_process_client
from forewarn.scenario.flows import FLOWS
from forewarn.server.control import create_control_app
from forewarn.server.dashboard._scenarios import ScenarioRuns
from forewarn.testing import MakePlatform

from .control_support import ok, refused

FLEET = Path(__file__).resolve().parents[2] / "examples" / "flows" / "fleet.yaml"


@pytest.fixture
def app_and_runs(make_forewarn_platform: MakePlatform) -> tuple[FastAPI, ScenarioRuns]:
    platform = make_forewarn_platform(fleet=FLEET)
    apps: list[FastAPI] = []
    runs = ScenarioRuns(lambda: in_process_client(apps[0]))
    apps.append(create_control_app(platform.service, runs=runs))
    return apps[0], runs


def finished(runs: ScenarioRuns) -> dict[str, Any]:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        (view,) = runs.views()
        if view["status"] != "running":
            return view
        time.sleep(0.02)
    raise AssertionError("the flow did not finish")


def test_the_flows_are_listed_and_one_runs_by_name(
    app_and_runs: tuple[FastAPI, ScenarioRuns],
) -> None:
    app, runs = app_and_runs
    with in_process_client(app) as http:
        listed = ok(http.get("/api/v1/flows"))["flows"]
        assert [flow["name"] for flow in listed] == [flow.name for flow in FLOWS]
        started = ok(http.post("/api/v1/scenarios", json={"builtin": "spot-eviction"}), 202)
    assert (started["name"], started["steps"], started["status"]) == (
        "spot-eviction on spot0",
        6,
        "running",
    )
    view = finished(runs)
    assert (view["status"], view["done"]) == ("passed", 6), view["detail"]


def test_a_flow_needs_a_vm_it_fits_and_one_of_yaml_or_name(
    app_and_runs: tuple[FastAPI, ScenarioRuns],
) -> None:
    app, runs = app_and_runs
    with in_process_client(app) as http:

        def post(body: dict[str, Any]) -> httpx.Response:
            return http.post("/api/v1/scenarios", json=body)

        assert "needs a Spot VM; vm0 is not one" in refused(
            post({"builtin": "spot-eviction", "vm": "vm0"}), 422
        )
        assert "no built-in flow 'nope'" in refused(post({"builtin": "nope"}), 422)
        assert "give either scenario (YAML) or builtin" in refused(
            post({"builtin": "user-reboot", "scenario": "steps: [{advance: 1s}]"}), 422
        )
        assert "vm and devTiming go with builtin" in refused(
            post({"scenario": "steps: [{advance: 1s}]", "devTiming": True}), 422
        )
    assert runs.views() == []

"""The dashboard in a real browser (Debian's chromium driven by Playwright): a user opens the
link ``forewarn serve`` printed, sees the fleet, restarts a VM from the page, and watches the
VM's own approval arrive on its timeline (README "Dashboard").

Skipped with the reason where chromium or Playwright is missing, and failed under CI, which
installs both (tests/e2e/machine_support.py).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from e2e_support import free_port
from machine_support import require_chromium

pytestmark = pytest.mark.e2e

FLEET = """\
availabilitySets:
  - name: west
vms:
  - {name: WestNO_0, address: 127.0.0.2, availabilitySet: west, faultDomain: 0, host: h1}
  - {name: WestNO_1, address: 127.0.0.3, availabilitySet: west, faultDomain: 1, updateDomain: 1, host: h2}
"""
SCENARIO = """\
name: after the approval
steps:
  - advance: 7s
  - expect: {vm: WestNO_0, events: [{EventType: Reboot, EventStatus: Started}]}
  - advance: 1s
"""
SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "dashboard.png"
#: Set to 1 to write the page, as this test leaves it, to docs/dashboard.png.
SCREENSHOT_VARIABLE = "FOREWARN_REGENERATE_SCREENSHOT"


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, str, int]]:
    """``forewarn serve`` on a manual clock; yields (banner link, control base, VM port)."""
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(FLEET)
    port, control = free_port(["127.0.0.1"]), free_port(["127.0.0.1"])
    env = {k: v for k, v in os.environ.items() if k != "FOREWARN_TOKEN"}
    env["FOREWARN_RUNTIME_DIR"] = str(tmp_path / "runtime")
    argv = [sys.executable, "-m", "forewarn", "serve", "--fleet", str(fleet), "--clock", "manual"]
    argv += ["--bind", f"127.0.0.1:{port}", "--control", f"127.0.0.1:{control}", "--seed", "3"]
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env)
    try:
        deadline = time.monotonic() + 20
        while "control: http://" not in log.read_text():
            assert process.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        match = re.search(r"control: (http://\S+/\?token=\S+)", log.read_text())
        assert match is not None
        yield match.group(1), f"http://127.0.0.1:{control}", port
    finally:
        process.terminate()
        process.wait(10)


def test_restart_from_the_page_and_watch_the_vm_approve(
    served: tuple[str, str, int], tmp_path: Path
) -> None:
    chromium = require_chromium()
    from playwright import sync_api

    link, control, port = served
    vm_url = f"http://127.0.0.2:{port}/metadata/scheduledevents?api-version=2020-07-01"
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1366, "height": 900})
            page.goto(link)  # the banner's link: sets the cookie, lands on the dashboard
            assert page.url == f"{control}/"
            page.locator('button[data-vm="WestNO_0"]').wait_for()
            assert page.locator('button[data-vm="WestNO_1"]').count() == 1

            # Restart WestNO_0 from its form, by keyboard as well as a mouse would.
            form = page.locator("#op-vm-restart")
            form.locator("select").select_option("WestNO_0")
            form.locator("button[type=submit]").focus()
            page.keyboard.press("Enter")
            row = page.locator("#events tbody tr")
            row.first.wait_for()
            assert "Reboot" in row.first.inner_text()
            assert "Scheduled" in row.first.inner_text()

            # The VM itself reads its document and approves, as a handler would.
            document = httpx.get(vm_url, headers={"Metadata": "true"}).json()
            (event,) = document["Events"]
            approval = httpx.post(
                vm_url,
                headers={"Metadata": "true"},
                json={"StartRequests": [{"EventId": event["EventId"]}]},
            )
            assert approval.status_code == 200

            page.locator('button[data-vm="WestNO_0"]').click()
            timeline = page.locator("#timeline")
            timeline.locator("li", has_text="POST /metadata/scheduledevents -> 200").wait_for()
            assert "shown DocumentIncarnation" in timeline.inner_text()
            page.locator("#events td.Started").wait_for()

            # A scenario from the page, with its progress: the impact (7 s) ends, then
            # WestNO_0 is reachable again with its event Started.
            page.fill("#scenario-text", SCENARIO)
            page.locator("#scenario button[type=submit]").click()
            page.locator('#scenario-runs li[data-status="passed"]').wait_for()
            assert "3/3 passed" in page.locator("#scenario-runs").inner_text()
            # A fault from the page: the VM's next poll is a 410, then it is answered again.
            fault = page.locator("#op-fault")
            fault.locator("select[name=kind]").select_option("gone")
            fault.locator("select[name=vm]").select_option("WestNO_0")
            fault.locator("input[name=count]").fill("1")
            fault.locator("button[type=submit]").click()
            page.locator("#faults li").wait_for()
            assert httpx.get(vm_url, headers={"Metadata": "true"}).status_code == 410
            assert httpx.get(vm_url, headers={"Metadata": "true"}).status_code == 200
            page.locator("#faults li").wait_for(state="detached")

            # A campaign of memory-preserving host updates: its first step is a ~9 s Freeze.
            campaign = page.locator("#op-campaign")
            campaign.locator("select[name=kind]").select_option("update")
            campaign.locator("button[type=submit]").click()
            page.locator("#events tbody tr", has_text="Freeze").first.wait_for()
            assert page.locator("#campaigns").inner_text().startswith("campaign ")

            shot = tmp_path / "dashboard.png"
            page.screenshot(path=str(shot), full_page=True)
            assert shot.stat().st_size > 10_000
            if os.environ.get(SCREENSHOT_VARIABLE) == "1":  # docs/dashboard.png, on request
                SCREENSHOT.write_bytes(shot.read_bytes())
        finally:
            browser.close()


def test_the_page_needs_the_link_first(served: tuple[str, str, int]) -> None:
    """Without the token's cookie the control port shows how to get in, and nothing else."""
    _, control, _ = served
    landing = httpx.get(f"{control}/")
    assert landing.status_code == 401
    assert "?token=" in landing.text
    assert httpx.get(f"{control}/api/v1/stream").status_code == 401

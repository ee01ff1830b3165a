"""The dashboard in a real browser (Debian's chromium driven by Playwright): a user opens the
link ``forewarn serve`` printed, sees the fleet, restarts a VM from the page, and watches the
VM's own approval arrive on its timeline (docs/dashboard.md).

Skipped with the reason where chromium or Playwright is missing, and failed under CI, which
installs both (tests/support/machine_support.py).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from e2e_support import serve_with_its_link
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
    with serve_with_its_link(tmp_path, fleet=FLEET) as served:
        yield served


def _playwright() -> tuple[Any, str]:
    """Playwright's sync API and Debian's chromium (a skip saying what is missing, or a
    failure under CI: tests/support/machine_support.py)."""
    chromium = require_chromium()
    from playwright import sync_api

    return sync_api, chromium


def test_restart_from_the_page_and_watch_the_vm_approve(
    served: tuple[str, str, int], tmp_path: Path
) -> None:
    sync_api, chromium = _playwright()
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

            # A built-in flow from the page (docs/flows.md): Microsoft's captured user
            # reboot on WestNO_1, 25 minutes of the manual clock in one go.
            flow = page.locator("#flow")
            flow.locator("select[name=builtin]").select_option("user-reboot")
            flow.locator("select[name=vm]").select_option("WestNO_1")
            flow.locator("button[type=submit]").click()
            page.locator('#scenario-runs li[data-status="passed"]').wait_for()
            assert "user-reboot on WestNO_1: " in page.locator("#scenario-runs").inner_text()

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
            page.locator('#scenario-runs li[data-status="passed"]', has_text="after the").wait_for()
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
    """Without the token the page shows how to get in, and nothing else: the page's bytes
    are the same for everyone, and every call it would make needs the token."""
    sync_api, chromium = _playwright()
    _, control, _ = served
    assert httpx.get(f"{control}/api/v1/stream").status_code == 401
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        try:
            page = browser.new_page()
            page.goto(f"{control}/")
            page.locator("#clock", has_text="locked").wait_for()
            assert "?token=" in page.locator("#status").inner_text()
            assert page.locator("#fleet button").count() == 0
        finally:
            browser.close()


#: Scale sets for every operation an instance-id field takes: Spot instances to evict, a set
#: with terminate and OS image notifications to delete from and upgrade.
EXAMPLES_FLEET = """\
vms:
  - {name: app0, address: 127.0.0.2}
scaleSets:
  - {name: web, capacity: 2, addressStart: 127.0.0.3, osImageNotification: true,
     terminateNotification: {enabled: true, notBeforeTimeout: PT5M}}
  - {name: spot, capacity: 1, addressStart: 127.0.0.5, priority: Spot}
"""
#: Which scale set each operation with instance ids is shown on.
EXAMPLE_TARGETS = {
    "simulate-eviction": "spot",
    "delete-instances": "web",
    "os-image-upgrade": "web",
}


def test_every_example_the_page_shows_is_accepted(tmp_path: Path) -> None:
    """Seen by a newcomer: the scenario box suggested a step it then refused (``unknown step
    'vm'``). Every example the page shows, submitted as shown, is accepted: the scenario box's
    (run to its end) and each instance-id field's, on the scale set the form names."""
    sync_api, chromium = _playwright()
    with (
        serve_with_its_link(tmp_path, fleet=EXAMPLES_FLEET) as (link, _, _),
        sync_api.sync_playwright() as play,
    ):
        browser = play.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        try:
            page = browser.new_page()
            page.goto(link)
            page.locator('button[data-vm="app0"]').wait_for()
            scenario = page.locator("#scenario-text")
            example = scenario.get_attribute("placeholder") or ""
            assert example == "steps:\n  - restart: app0\n  - advance: 15m"
            scenario.fill(example)
            page.locator("#scenario button[type=submit]").click()
            page.locator('#scenario-runs li[data-status="passed"]').wait_for()
            fields = page.locator("#actions input[data-example=instance-ids]")
            assert fields.count() == len(EXAMPLE_TARGETS)
            for operation, scale_set in EXAMPLE_TARGETS.items():
                form = page.locator(f"#op-scale-set-{operation}")
                form.locator("select[name=target]").select_option(scale_set)
                field = form.locator("input[data-example=instance-ids]")
                shown = field.get_attribute("placeholder")
                assert shown == "0", (operation, shown)
                field.fill(shown)
                form.locator("button[type=submit]").click()
                status = page.locator("#status")
                status.filter(has_text=f"scale-set {operation} {scale_set}").wait_for()
                assert "refused" not in status.inner_text(), status.inner_text()
            # The policy forms show a scheduledEventsPolicy in ARM's JSON as their example.
            policies = page.locator("#actions textarea[data-example=policy]")
            assert policies.count() >= 1
            form = page.locator("#op-vm-set-scheduled-events-policy")
            form.locator("select[name=target]").select_option("app0")
            field = form.locator("textarea[data-example=policy]")
            shown = field.get_attribute("placeholder") or ""
            assert "automaticallyApprove" in shown
            field.fill(shown)
            form.locator("button[type=submit]").click()
            status = page.locator("#status")
            status.filter(has_text="vm set-scheduled-events-policy app0").wait_for()
            assert "refused" not in status.inner_text(), status.inner_text()
        finally:
            browser.close()

"""The dashboard's events, in a real browser (Debian's chromium driven by Playwright) at the
width of a laptop's screen: an event made from the page's form as ``forewarn events create``
makes it, approved from its own row as one of its VMs, and a page that fits 1280 px with the
Event Grid table inside its panel and no form for a kind of resource the fleet lacks.

Layout is checked by structure, not pixels: the boxes the browser laid out (what is inside
what, what overflows) rather than an image a font change would break.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from e2e_support import serve_with_its_link
from machine_support import require_chromium

if TYPE_CHECKING:
    from playwright.sync_api import ViewportSize

pytestmark = pytest.mark.e2e

#: Two VMs of an availability set, no scale set.
FLEET = """\
availabilitySets:
  - name: west
vms:
  - {name: WestNO_0, address: 127.0.0.2, availabilitySet: west, faultDomain: 0, host: h1}
  - {name: WestNO_1, address: 127.0.0.3, availabilitySet: west, faultDomain: 1, updateDomain: 1, host: h2}
"""
#: A laptop's screen, the width the Event Grid table was cut off at.
VIEWPORT: ViewportSize = {"width": 1280, "height": 800}
#: A subscription whose name, endpoint and error are as long as real ones get.
LONG_NAME = "maintenance-notifications-to-the-operations-team-webhook"


def _token(link: str) -> str:
    return parse_qs(urlsplit(link).query)["token"][0]


def test_create_an_event_from_the_page_and_approve_it_from_its_row(tmp_path: Path) -> None:
    chromium = require_chromium()
    from playwright.sync_api import sync_playwright

    with (
        serve_with_its_link(tmp_path, fleet=FLEET) as (link, control, port),
        sync_playwright() as play,
    ):
        browser = play.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport=VIEWPORT)
            page.goto(link)
            page.locator('button[data-vm="WestNO_0"]').wait_for()

            page.locator("#create-event-box summary").click()
            form = page.locator("#create-event")
            form.locator("select[name=type]").select_option("Redeploy")
            form.locator("select[name=source]").select_option("User")
            form.locator("select[name=resources]").select_option(["WestNO_0", "WestNO_1"])
            form.locator("input[name=noticeSeconds]").fill("900")
            description = (
                "Virtual machine is going to be redeployed as requested by authorized user."
            )
            form.locator("input[name=description]").fill(description)
            form.locator("button[type=submit]").click()
            page.locator("#status", has_text="created Redeploy").wait_for()

            # What the page made is what the control API and a VM see.
            headers = {"Authorization": f"Bearer {_token(link)}"}
            (event,) = httpx.get(f"{control}/api/v1/events", headers=headers).json()["events"]
            assert (event["EventType"], event["EventSource"]) == ("Redeploy", "User")
            assert event["Resources"] == ["WestNO_0", "WestNO_1"]
            assert event["Description"] == description
            vm_url = f"http://127.0.0.3:{port}/metadata/scheduledevents?api-version=2020-07-01"
            (shown,) = httpx.get(vm_url, headers={"Metadata": "true"}).json()["Events"]
            assert shown["EventId"] == event["EventId"]

            # Its row approves as one of its VMs that has not approved: first WestNO_1, chosen.
            row = page.locator(f'#events tr[data-event="{event["EventId"]}"]')
            row.locator("select").select_option("WestNO_1")
            # A VM polls meanwhile: the next snapshot renders the rows again, and the choice
            # made in the old row is still the row's choice (it was reset to the first VM,
            # and the button approved as WestNO_0).
            row.evaluate("node => { node.dataset.before = 'yes'; }")
            httpx.get(vm_url.replace("127.0.0.3", "127.0.0.2"), headers={"Metadata": "true"})
            page.locator(
                f'#events tr[data-event="{event["EventId"]}"]:not([data-before])'
            ).wait_for()
            assert row.locator("select").input_value() == "WestNO_1"
            row.locator("button.approve").click()
            page.locator("#status", has_text="as WestNO_1").wait_for()
            approved = httpx.get(f"{control}/api/v1/events/{event['EventId']}", headers=headers)
            # One VM's approval lets the event proceed for all its Resources (SPEC 3).
            assert approved.json()["EventStatus"] == "Started"
            assert approved.json()["approvedByVms"] == ["WestNO_1"]
            row.locator("td.Started").wait_for()  # the stream's next snapshot
            assert row.locator("button.approve").count() == 0  # nothing left to approve
        finally:
            browser.close()


def test_a_single_waiting_vm_is_named_on_the_button(tmp_path: Path) -> None:
    chromium = require_chromium()
    from playwright.sync_api import sync_playwright

    with (
        serve_with_its_link(tmp_path, fleet=FLEET) as (link, control, _),
        sync_playwright() as play,
    ):
        browser = play.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport=VIEWPORT)
            page.goto(link)
            page.locator('button[data-vm="WestNO_0"]').wait_for()
            headers = {"Authorization": f"Bearer {_token(link)}"}
            made = httpx.post(
                f"{control}/api/v1/events",
                headers=headers,
                json={"type": "Reboot", "resources": ["WestNO_0"], "source": "User"},
            )
            assert made.status_code == 201, made.text
            row = page.locator(f'#events tr[data-event="{made.json()["EventId"]}"]')
            row.locator("button.approve", has_text="Approve as WestNO_0").click()
            page.locator("#status", has_text="as WestNO_0").wait_for()
            row.locator("td.Started").wait_for()
        finally:
            browser.close()


def test_the_page_fits_a_laptop_and_shows_only_what_the_fleet_has(tmp_path: Path) -> None:
    chromium = require_chromium()
    from playwright.sync_api import sync_playwright

    with (
        serve_with_its_link(tmp_path, fleet=FLEET) as (link, control, _),
        sync_playwright() as play,
    ):
        headers = {"Authorization": f"Bearer {_token(link)}"}
        endpoint = "https://127.0.0.1:1/api/updates/" + "maintenance/" * 4 + "scheduled-events"
        subscribed = httpx.post(
            f"{control}/api/v1/eventgrid/subscriptions",
            headers=headers,
            json={"endpoint": endpoint, "schema": "eventgrid", "name": LONG_NAME},
        )
        assert subscribed.status_code == 201, subscribed.text
        browser = play.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport=VIEWPORT)
            page.goto(link)
            page.locator(f'#eventgrid tr[data-subscription="{LONG_NAME}"]').wait_for()
            page.locator("#actions form").first.wait_for()

            # A Scheduled event's row, with its buttons, beside the Event Grid table.
            made = httpx.post(
                f"{control}/api/v1/events",
                headers=headers,
                json={"type": "Reboot", "resources": ["WestNO_0", "WestNO_1"]},
            )
            assert made.status_code == 201, made.text
            page.locator("#events button.approve").wait_for()

            # No sideways scrolling, and every column of both tables inside its panel.
            layout = page.evaluate(
                """() => {
                  const box = node => { const r = node.getBoundingClientRect(); return [r.left, r.right]; };
                  const table = id => ({
                    panel: box(document.getElementById(id).closest("section")),
                    cells: [...document.querySelectorAll(`#${id} th, #${id} td, #${id} td > *`)]
                      .map(c => [c.textContent, ...box(c)]),
                  });
                  return {
                    page: document.documentElement.scrollWidth,
                    window: window.innerWidth,
                    eventgrid: table("eventgrid"),
                    events: table("events"),
                  };
                }"""
            )
            assert layout["page"] <= layout["window"], layout
            for name in ("eventgrid", "events"):
                left, right = layout[name]["panel"]
                cells = layout[name]["cells"]
                outside = [cell for cell in cells if cell[1] < left or cell[2] > right]
                assert outside == [], (name, layout[name]["panel"], outside)
            layout["cells"] = layout["eventgrid"]["cells"]
            headings = [cell[0] for cell in layout["cells"]][:8]
            assert headings[-2:] == ["Pending", "Last error"]

            # The fleet has no scale set: no scale-set form is shown; VM and set forms are.
            forms = page.locator("#actions form[data-target]")
            shown: dict[str, set[bool]] = {}
            for index in range(forms.count()):
                form = forms.nth(index)
                kind = form.get_attribute("data-target") or ""
                shown.setdefault(kind, set()).add(form.is_visible())
            assert shown["scale-set"] == {False}, shown
            assert shown["vm"] == shown["host"] == shown["availability-set"] == {True}, shown
        finally:
            browser.close()

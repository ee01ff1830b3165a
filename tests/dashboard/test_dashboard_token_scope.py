"""The control token stays with its own server in a real browser (Debian's chromium driven by
Playwright) [ours; docs/security.md].

Cookies ignore ports (RFC 6265, section 8.5: "cookies for a given host are shared across all
the ports on that host"), so a token kept in a cookie for 127.0.0.1 went to every other server
on 127.0.0.1 the browser visited, and a second ``forewarn serve`` on another port overwrote the
first one's. Here, after opening the printed links of two servers in one browser, a third
local server sees no token in any request the browser makes to it (a page opened there, and
a request from the first dashboard's page), and both dashboards still work.

Skipped with the reason where chromium or Playwright is missing; CI installs both.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from e2e_support import http_server_in_thread, serve_with_its_link
from machine_support import require_chromium

pytestmark = pytest.mark.e2e

#: Long enough for a loaded machine, short enough to fail soon when the page is locked out.
WAIT_MS = 20_000


@contextmanager
def bystander() -> Iterator[tuple[str, list[dict[str, str]]]]:
    """Another local web server (any developer has a few), keeping each request's headers."""
    seen: list[dict[str, str]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append({"path": self.path, **{k.lower(): v for k, v in self.headers.items()}})
            body = b"<!doctype html><title>another server</title><p>hello"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # quiet

    with http_server_in_thread(Handler) as url:
        yield url, seen


def _token(link: str) -> str:
    (token,) = parse_qs(urlsplit(link).query)["token"]
    return token


def _clock(control: str, token: str) -> str:
    answer = httpx.get(f"{control}/api/v1/clock", headers={"Authorization": f"Bearer {token}"})
    assert answer.status_code == 200, answer.text
    now: str = answer.json()["now"]
    return now


def test_the_token_reaches_no_other_server_and_two_serves_share_one_browser(
    tmp_path: Path,
) -> None:
    chromium = require_chromium()
    from playwright import sync_api

    with (
        serve_with_its_link(tmp_path / "a") as (link_a, control_a, _),
        serve_with_its_link(tmp_path / "b") as (link_b, control_b, _),
        bystander() as (elsewhere, seen),
    ):
        tokens = {_token(link_a), _token(link_b)}
        assert len(tokens) == 2
        with sync_api.sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
            try:
                context = browser.new_context()
                page_a = context.new_page()
                page_a.goto(link_a)
                page_a.locator('button[data-vm="vm0"]').wait_for(timeout=WAIT_MS)
                assert page_a.url == f"{control_a}/", "the token stays out of the address bar"
                page_b = context.new_page()
                page_b.goto(link_b)
                page_b.locator('button[data-vm="vm0"]').wait_for(timeout=WAIT_MS)

                # Both still work, the first one reloaded after the second link was opened.
                page_a.reload()
                for page, control, link in (
                    (page_a, control_a, link_a),
                    (page_b, control_b, link_b),
                ):
                    page.locator('button[data-vm="vm0"]').wait_for(timeout=WAIT_MS)
                    before = _clock(control, _token(link))
                    page.fill("#advance-seconds", "60")
                    page.locator("#advance button[type=submit]").click()
                    page.locator("#status", has_text="clock advanced 60 s").wait_for(
                        timeout=WAIT_MS
                    )
                    assert _clock(control, _token(link)) > before

                # Another server on the same host: visited, and asked from a dashboard's page.
                page_c = context.new_page()
                page_c.goto(f"{elsewhere}/visited")
                page_a.evaluate(
                    "url => fetch(url, {mode: 'no-cors', credentials: 'include'})",
                    f"{elsewhere}/fetched",
                )
                for _ in range(200):
                    if {"/visited", "/fetched"} <= {request["path"] for request in seen}:
                        break
                    page_c.wait_for_timeout(50)
                assert {"/visited", "/fetched"} <= {request["path"] for request in seen}, seen
                cookies = [cookie["name"] for cookie in context.cookies()]
            finally:
                browser.close()
    for request in seen:
        assert "forewarn" not in request.get("cookie", ""), request
        for token in tokens:
            assert not [value for value in request.values() if token in value], request
    assert not [name for name in cookies if "forewarn" in name], cookies

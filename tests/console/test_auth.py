"""The console is behind the sidecar's bearer token: header or the login form's cookie."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest

from console.harness import TOKEN, Console, shoot

# The first test also waits for the session's demo run (a minute or two on a loaded machine).
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def _status(url: str, headers: dict[str, str]) -> tuple[int, str]:
    request = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_requests_without_the_token_are_refused(console: Console) -> None:
    """No token or a wrong one: 401 with a message; the right header: the data."""
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Cookie": "agenttrail_console=wrong"}):
        code, body = _status(f"{console.url}/api/runs", headers)
        assert code == 401, headers
        assert "bearer token" in json.loads(body)["error"]
        code, body = _status(f"{console.url}/runs/{'a' * 32}", headers)
        assert code == 401
        assert "trajectories" not in body
    code, body = _status(f"{console.url}/api/runs?limit=3", {"Authorization": f"Bearer {TOKEN}"})
    assert code == 200
    assert len(json.loads(body)["runs"]) == 3


def test_browser_signs_in_with_the_token_form(browser: Any, console: Console) -> None:
    """A browser without the token lands on the sign-in form; a wrong token is refused, the right one
    sets a cookie and opens the page that was asked for."""
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    try:
        page.goto(f"{console.url}/alerts")
        assert "/console/login" in page.url
        assert page.locator("#run-rows").count() == 0
        page.get_by_label("Token").fill("not-it")
        page.get_by_role("button", name="Sign in").click()
        assert page.get_by_role("alert").inner_text().startswith("✗")
        shoot(page, "login-refused")
        page.get_by_label("Token").fill(TOKEN)
        page.get_by_role("button", name="Sign in").click()
        page.wait_for_url(f"{console.url}/alerts")
        assert page.locator("h1").inner_text() == "Alerts"
        cookie = next(c for c in context.cookies() if c["name"] == "agenttrail_console")
        assert cookie["httpOnly"]
        assert cookie["sameSite"] == "Strict"
    finally:
        context.close()

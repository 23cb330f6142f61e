"""The console in a real headless chromium (Debian's, driven by Playwright) over the demo's data.

The demo runs once per session, in process, on the session's chDB directory (one engine
directory per process), so the pages show what a newcomer sees after `agenttrail demo`.
The console is served by uvicorn on loopback, mounted at /console as `serve` mounts it, with a
bearer token; a real evaluator worker on the same store re-scores runs when a reference changes.
Screenshots go to .screenshots/console/ (git-ignored) for a person to look at.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from console.harness import TOKEN, Console

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def _ensure_chromium() -> None:
    """Install Debian's chromium when missing (as root), else skip with the reason."""
    if os.path.exists(CHROMIUM):
        return
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        pytest.skip(
            f"{CHROMIUM} is missing and cannot be installed here: run `apt-get install -y chromium` as root"
        )
    subprocess.run(["apt-get", "update", "-qq"], check=True)
    subprocess.run(["apt-get", "install", "-y", "-qq", "chromium"], check=True)


@pytest.fixture(scope="session")
def console(chdb_dir: Path) -> Iterator[Console]:
    import uvicorn
    from starlette.applications import Starlette
    from starlette.routing import Mount

    from agenttrail.collector.store import Store, parse_store
    from agenttrail.evaluators.composition import build_sidecar
    from agenttrail.evaluators.console import ConsoleSettings, create_app
    from agenttrail.evaluators.demo.run import run_demo
    from agenttrail.evaluators.monitoring.alerts.config import AlertsConfig
    from agenttrail.evaluators.scoring.worker import EvaluatorConfig, EvaluatorWorker

    output: list[str] = []
    run_demo(runs=120, seed=7, keep=str(chdb_dir), build=build_sidecar, report=None, out=output.append)

    def open_store() -> Store:
        return Store(parse_store(str(chdb_dir), "agenttrail"))

    worker = EvaluatorWorker(open_store, EvaluatorConfig(poll_interval_s=0.2))
    worker.start()
    rules = AlertsConfig.from_file(chdb_dir / "agenttrail-demo.yaml").rules
    settings = ConsoleSettings(
        bearer_token=TOKEN,
        alert_rules=lambda: rules,
        on_references_changed=worker.wake,
    )
    app = Starlette(routes=[Mount("/console", create_app(open_store, settings))])
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline, "the console did not start within 30 s"
        time.sleep(0.05)
    store = open_store()
    try:
        yield Console(f"http://127.0.0.1:{port}/console", store, output)
    finally:
        server.should_exit = True
        thread.join(10)
        worker.stop()
        store.close()


# Package scope, not session: Playwright's sync API runs its asyncio loop in the main thread, and
# while `sync_playwright()` is open that loop counts as running there, so any later test in the
# process that runs a loop itself (`asyncio.run`, `anyio.run`: the MCP stdio server) failed with
# "Cannot run the event loop while another loop is running". It now closes with the last console test.
@pytest.fixture(scope="package")
def browser() -> Iterator[Any]:
    _ensure_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Any, console: Console) -> Iterator[Any]:
    """A signed-in page (the Authorization header on every request), 1280 px wide."""
    context = browser.new_context(
        viewport={"width": 1280, "height": 900}, extra_http_headers={"Authorization": f"Bearer {TOKEN}"}
    )
    opened = context.new_page()
    yield opened
    context.close()

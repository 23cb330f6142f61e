"""Adding a reference through the console re-scores the task's runs (the real evaluator worker)."""

from __future__ import annotations

import re
import time
from typing import Any

import pytest

from console.harness import Console, shoot

# The first test also waits for the session's demo run (a minute or two on a loaded machine).
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def test_editing_a_reference_rescores_the_runs(page: Any, console: Console) -> None:
    """faq's reference gains a required argument: its runs are re-scored against version 2, their
    search_kb call now shows wrong arguments, and exact match fails where it passed."""
    trace, exact = console.store.query(
        "SELECT TraceId, Score FROM scores FINAL WHERE Task = 'faq' AND Metric = 'trajectory_exact_match' "
        "ORDER BY RunStart LIMIT 1"
    )[0]
    assert exact == 1.0
    page.goto(f"{console.url}/references/faq")
    assert page.locator("#task").input_value() == "faq"
    page.locator("#reference").fill(
        "reference_trajectory:\n  - {tool_name: search_kb, tool_input: {query: refund policy}}\n"
    )
    page.get_by_role("button", name="Save reference").click()
    page.wait_for_url(re.compile(r"/references/faq\?saved=updated&rescored=\d+"))
    assert "queued for re-scoring" in page.get_by_role("status").inner_text()
    assert page.locator("table[aria-label='Versions'] tbody tr").count() == 2
    shoot(page, "reference-saved")
    deadline = time.monotonic() + 60
    while True:
        rows = console.store.query(
            "SELECT Score, ReferenceVersion FROM scores FINAL WHERE TraceId = {t:String} "
            "AND Metric = 'trajectory_exact_match'",
            {"t": trace},
        )
        if rows and rows[0][1] == 2:
            break
        assert time.monotonic() < deadline, f"run {trace} was not re-scored within 60 s: {rows}"
        time.sleep(0.5)
    assert rows[0][0] == 0.0
    page.goto(f"{console.url}/runs/{trace}")
    assert "Reference version 2" in page.locator("section.run").first.inner_text()
    step = page.locator("table.align tbody tr").first
    assert step.locator(".kind").inner_text() == "≠ wrong arguments"
    assert "query" in step.locator(".diff").inner_text()
    exact_row = page.locator(
        "table.scores tr", has=page.locator("code", has_text=re.compile("^trajectory_exact_match$"))
    )
    assert "✗ fail" in exact_row.inner_text()
    shoot(page, "run-rescored")


def test_a_bad_reference_is_refused_with_the_reason(page: Any, console: Console) -> None:
    """A reference with an unknown field is not stored; the form says which field."""
    page.goto(f"{console.url}/references/new")
    page.locator("#task").fill("new_task")
    page.locator("#reference").fill("reference_trajectory: [{tool_name: a}]\nmetric: [oops]\n")
    page.get_by_role("button", name="Save reference").click()
    assert "metric" in page.get_by_role("alert").inner_text()
    assert not console.store.query("SELECT 1 FROM references WHERE Task = 'new_task'")
    page.locator("#reference").fill("- {tool_name: search_kb}\n")
    page.get_by_role("button", name="Save reference").click()
    page.wait_for_url(re.compile(r"/references/new_task\?saved=added"))
    assert console.store.query("SELECT Version FROM references WHERE Task = 'new_task'") == [(1,)]

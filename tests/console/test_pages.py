"""Each console page over the demo's data, in a real chromium: what a newcomer clicks through."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest
from trajectory_rows import agent_run, store_runs

from console.harness import TOKEN, Console, shoot

# The first test also waits for the session's demo run (a minute or two on a loaded machine).
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def _one(store: Any, sql: str) -> tuple[Any, ...]:
    rows = store.query(sql)
    assert rows, f"the demo left no row for: {sql}"
    return rows[0]


def test_runs_page_lists_newest_runs_with_copyable_ids_and_pages_by_keyset(
    page: Any, console: Console
) -> None:
    """The runs list shows the newest 50 runs, newest first, and 'Older runs' continues without overlap."""
    newest = [row[0] for row in console.store.query(
        "SELECT TraceId FROM trajectories FINAL WHERE IsDeleted = 0 "
        "ORDER BY Start DESC, TraceId DESC, RootSpanId DESC LIMIT 60"
    )]  # fmt: skip
    page.goto(f"{console.url}/")
    assert page.url.endswith("/console/runs")
    rows = page.locator("#run-rows tr")
    assert rows.count() == 50
    shown = [rows.nth(i).get_attribute("data-trace") for i in range(rows.count())]
    assert shown == newest[:50]
    assert page.locator("button.copy").first.get_attribute("data-copy") == newest[0]
    shoot(page, "runs-1280", full_page=False)
    page.set_viewport_size({"width": 1920, "height": 1080})
    shoot(page, "runs-1920", full_page=False)
    page.get_by_role("link", name="Older runs →").click()
    older = [page.locator("#run-rows tr").nth(i).get_attribute("data-trace") for i in range(10)]
    assert older == newest[50:60]


def test_filtering_runs_keeps_the_filter_in_the_url(page: Any, console: Console) -> None:
    """Status and task filters narrow the list to exactly the matching runs, and the URL holds them."""
    expected = {row[0] for row in console.store.query(
        "SELECT TraceId FROM trajectories FINAL WHERE IsDeleted = 0 AND Failure = 1 AND Task = 'refund'"
    )}  # fmt: skip
    assert 0 < len(expected) < 50
    page.goto(f"{console.url}/runs")
    page.get_by_label("Task", exact=True).fill("refund")
    page.get_by_label("Status").select_option("failed")
    page.get_by_role("button", name="Filter").click()
    page.wait_for_url(re.compile(r"status=failed"))
    assert "task=refund" in page.url
    rows = page.locator("#run-rows tr")
    shown = {rows.nth(i).get_attribute("data-trace") for i in range(rows.count())}
    assert shown == expected
    assert page.locator("#run-rows .badge.ok", has_text="ok").count() == 0
    shoot(page, "runs-filtered")
    # The same link, opened fresh, shows the same runs.
    page.goto(page.url)
    assert page.locator("#run-rows tr").count() == len(expected)
    page.goto(f"{console.url}/runs?tool=issue_refund&status=ok")
    assert page.locator("#run-rows tr").count() > 0
    assert page.locator("#run-rows tr", has_not_text="issue_refund").count() == 0


def test_live_runs_appear_without_reload(page: Any, console: Console) -> None:
    """A run stored while the page is open appears at the top without reloading."""
    page.goto(f"{console.url}/runs")
    before = page.locator("#run-rows tr").count()
    trace = "f" * 31 + "1"
    live = agent_run(
        start=time.time(), trace_id=trace, root_span_id="00000000000000aa", agent="live-agent",
        agent_version="9.9", task="faq", latency_s=0.01, tools=["search_kb"],
    )  # fmt: skip
    store_runs(console.store, [live])
    page.locator(f'#run-rows tr[data-trace="{trace}"]').wait_for(timeout=15_000)
    assert page.locator("#run-rows tr").first.get_attribute("data-trace") == trace
    assert page.locator("#run-rows tr").count() == before + 1
    console.store.command("DELETE FROM trajectories WHERE TraceId = {t:String}", {"t": trace})


def test_run_page_aligns_the_trajectory_with_its_reference_and_shows_scores(
    page: Any, console: Console
) -> None:
    """A failed refund run: lookup and refund matched, the email missing, each score with its meaning."""
    trace, recall = _one(console.store, """
        SELECT t.TraceId, s.Score FROM trajectories AS t FINAL
        INNER JOIN (SELECT TraceId, Score FROM scores FINAL WHERE Metric = 'trajectory_recall') AS s
            ON s.TraceId = t.TraceId
        WHERE t.IsDeleted = 0 AND t.Task = 'refund' AND t.Failure = 1
          AND t.ToolNames = ['lookup_order', 'issue_refund']
        ORDER BY t.Start LIMIT 1""")  # fmt: skip
    page.goto(f"{console.url}/runs?task=refund&status=failed")
    page.locator(f'#run-rows tr[data-trace="{trace}"] a[href$="{trace}"]').click()
    page.wait_for_url(re.compile(trace))
    steps = page.locator("table.align tbody tr")
    kinds = [steps.nth(i).locator(".kind").inner_text() for i in range(steps.count())]
    assert kinds == ["✓ matched", "✓ matched", "− missing"]
    assert "send_email" in steps.nth(2).inner_text()
    assert "PaymentGatewayError" in steps.nth(1).inner_text()
    recall_row = page.locator(
        "table.scores tr", has=page.locator("code", has_text=re.compile("^trajectory_recall$"))
    )
    assert f"{recall:.3f}" in recall_row.inner_text()
    assert "matched pairs" in recall_row.inner_text().lower()  # the metric's explanation
    exact_row = page.locator(
        "table.scores tr", has=page.locator("code", has_text=re.compile("^trajectory_exact_match$"))
    )
    assert "✗ fail" in exact_row.inner_text()
    assert page.locator(".waterfall .span").count() >= 3
    assert page.locator(".waterfall .span.error").count() >= 1
    assert "scored" in page.locator("section", has=page.locator("#audit")).inner_text()
    shoot(page, "run")
    page.locator(".waterfall .span.error summary").first.click()
    assert page.locator(".waterfall .span.error .span-detail").first.is_visible()
    page.set_viewport_size({"width": 1920, "height": 1080})
    shoot(page, "run-1920", full_page=False)


def test_run_page_says_when_a_trace_has_more_spans_than_it_shows(page: Any, console: Console) -> None:
    """A trace of SPAN_LIMIT + 1 spans: the waterfall shows the first SPAN_LIMIT and says so."""
    from agenttrail.collector.otlp_decode import ns_to_clickhouse
    from agenttrail.evaluators.console.run_page import SPAN_LIMIT

    trace, start = "5c" * 16, time.time_ns() - 60 * 1_000_000_000
    rows = [
        (ns_to_clickhouse(start + i * 1_000_000), trace, f"{i + 1:016x}", "" if i == 0 else f"{1:016x}",
         f"step {i}", "big-service", 500_000)
        for i in range(SPAN_LIMIT + 1)
    ]  # fmt: skip
    console.store.insert_rows(
        "otel_traces",
        ("Timestamp", "TraceId", "SpanId", "ParentSpanId", "SpanName", "ServiceName", "Duration"),
        rows,
    )
    page.goto(f"{console.url}/runs/{trace}")
    assert page.locator(".waterfall .span").count() == SPAN_LIMIT
    heading = page.locator("#waterfall").inner_text()
    assert f"first {SPAN_LIMIT}" in heading
    assert (
        f"more than {SPAN_LIMIT} spans"
        in page.locator("section", has=page.locator("#waterfall")).inner_text()
    )
    shoot(page, "run-more-spans", full_page=False)


def test_durations_under_a_millisecond_read_in_microseconds(page: Any, console: Console) -> None:
    """The run page shows a sub-millisecond run's latency, its latency score and its tool calls in
    the unit that fits, as the CLI does ("850 us"), never "0 ms" or a bare 0.001."""
    from agenttrail.collector.durations import format_duration

    trace, latency_s = _one(console.store, (
        "SELECT TraceId, LatencyS FROM trajectories FINAL WHERE IsDeleted = 0 AND LatencyS < 0.001 "
        "AND ToolCount > 0 ORDER BY LatencyS LIMIT 1"
    ))  # fmt: skip
    page.goto(f"{console.url}/runs/{trace}")
    shown = page.locator("dt", has_text="Latency").locator("xpath=following-sibling::dd[1]").inner_text()
    assert shown == format_duration(latency_s)
    assert shown.endswith(" us")
    latency_score = page.locator("table.scores tr").filter(
        has=page.locator("code", has_text=re.compile("^latency$"))
    )
    assert latency_score.locator("td.num").inner_text() == format_duration(latency_s)
    text = page.locator("main").inner_text()
    assert not re.search(r"(?<![\d.])0(\.0+)? ms", text), text
    shoot(page, "run-sub-millisecond")
    page.goto(f"{console.url}/runs")
    assert not re.search(r"(?<![\d.])0(\.0+)? ms", page.locator("#run-rows").inner_text())


def _fired_rules(store: Any) -> list[str]:
    """Rules whose alert went to firing during the demo (which ones depends on the machine's pace)."""
    rows = store.query(
        "SELECT DISTINCT Rule FROM alert_history WHERE Event = 'transition' AND ToState = 'firing'"
    )
    assert rows, "the demo fired no alert"
    return sorted(rule for (rule,) in rows)


def test_agent_overview_charts_mark_the_release_drift_and_alert(page: Any, console: Console) -> None:
    """Four charts, each with both releases marked and the alerts' firing intervals hatched; the drift
    finding and every fired alert are listed with links."""
    fired = _fired_rules(console.store)
    page.goto(f"{console.url}/agents")
    page.get_by_role("link", name="support-agent").first.click()
    charts = page.locator("svg.chart")
    assert charts.count() == 4
    # The runs chart counts runs per bucket in the bucket's unit: no per-minute rate extrapolated
    # from a few seconds (120 runs at ~25/s read "1,500/min" from 1 s buckets).
    title = charts.first.get_attribute("aria-label") or ""
    assert re.fullmatch(r"Runs per \d+[smhd] bucket", title), title
    ticks = charts.first.locator("text.axis").evaluate_all("els => els.map(e => e.textContent)")
    y_ticks = [float(t) for t in ticks if re.fullmatch(r"[\d.e+]+", t)]
    assert y_ticks
    assert max(y_ticks) <= 120
    for i in range(4):
        labels = charts.nth(i).locator(".marker-label").evaluate_all("els => els.map(e => e.textContent)")
        assert "v1.0" in labels
        assert "v1.1" in labels
        assert "drift: failure_rate" in labels
    assert charts.first.locator("rect.band").count() >= 1
    events = page.locator("ul.events").inner_text()
    assert "failure_rate" in events
    for rule in fired:
        assert rule in events
    # Each drift finding says what it rests on as `agenttrail drift` does: a p-value with its
    # adjusted one, or, for a change detector (no p-value), where it alarmed; never "p=–".
    findings = page.locator(
        "ul.events li", has=page.locator("span.badge", has_text="drift")
    ).all_inner_texts()
    assert findings
    for text in findings:
        assert "p=" not in text, text
        if "page_hinkley" in text or "bernoulli_cusum" in text:
            assert re.search(r"alarm at run \d+ of \d+, (up|down); threshold", text), text
        else:
            assert re.search(r"p [\d.e-]+, adj [\d.e-]+", text), text
    tools = page.locator("table[aria-label='Tools by errors'] tbody tr").first.inner_text()
    assert "issue_refund" in tools
    shoot(page, "agent")


def test_following_an_alert_leads_to_its_failed_runs(page: Any, console: Console) -> None:
    """Alerts -> the rule -> 'failed runs' of its firing window: failed runs of the agent, v1.1 among them."""
    rule = _fired_rules(console.store)[0]
    page.goto(f"{console.url}/alerts")
    shoot(page, "alerts")
    page.locator("table[aria-label='Alerts']").get_by_role("link", name=rule).first.click()
    page.wait_for_url(re.compile(rf"/alerts/{rule}$"))
    shoot(page, "alert-rule")
    page.get_by_role("link", name="failed runs").first.click()
    page.wait_for_url(re.compile(r"/runs\?"))
    for part in ("agent=support-agent", "since=", "status=failed"):
        assert part in page.url
    rows = page.locator("#run-rows tr")
    assert rows.count() > 0
    texts = [rows.nth(i).inner_text() for i in range(rows.count())]
    assert all("failed" in text for text in texts)
    assert any("1.1" in text for text in texts)
    shoot(page, "alert-runs")


def test_alerts_page_says_when_no_rule_is_configured(page: Any, console: Console, chdb_dir: Path) -> None:
    """A sidecar without `alerts:` rules: the Alerts page says none is configured and where to add
    them, not only "No alert has fired yet.", which reads as if alerting were set up."""
    import socket
    import threading

    import uvicorn
    from starlette.applications import Starlette
    from starlette.routing import Mount

    from agenttrail.collector.store import Store, parse_store
    from agenttrail.evaluators.console import ConsoleSettings, create_app

    app = Starlette(
        routes=[
            Mount(
                "/console",
                create_app(
                    lambda: Store(parse_store(str(chdb_dir), "agenttrail")),
                    ConsoleSettings(bearer_token=TOKEN),
                ),
            )
        ]
    )
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not server.started:
            assert time.monotonic() < deadline, "the console did not start within 30 s"
            time.sleep(0.05)
        page.goto(f"http://127.0.0.1:{sock.getsockname()[1]}/console/alerts")
        note = page.locator("#no-rules").inner_text()
        assert "No alert rules are configured" in note
        assert "alerts:" in note
        assert "kind. The states below" in note  # the demo's store holds alert states
        shoot(page, "alerts-no-rules", full_page=False)
        page.goto(f"{console.url}/alerts")  # the demo's sidecar has rules: listed, no such note
        assert page.locator("#no-rules").count() == 0
        assert page.locator("ul.rules li").count() > 0
    finally:
        server.should_exit = True
        thread.join(10)


def test_drift_compare_and_references_pages_render(page: Any, console: Console) -> None:
    """Drift lists the failure-rate drift with its test and p-value; Compare shows 1.0 -> 1.1 with the refund
    tool's error rate up; References lists the demo's three tasks."""
    page.goto(f"{console.url}/drift")
    drifted = page.locator("tr.drifted", has_text="failure_rate")
    assert drifted.count() >= 1
    assert "two_proportion_z" in drifted.first.inner_text()
    assert page.locator("tbody tr").count() > drifted.count()  # passing tests are listed too
    shoot(page, "drift")
    # The change detectors (no p-value) say where they alarmed, counted from 1 as the CLI does.
    detectors = page.locator(
        "tr", has=page.locator("td", has_text=re.compile("^(page_hinkley|bernoulli_cusum)$"))
    )
    assert detectors.count() >= 1
    for text in detectors.all_inner_texts():
        assert re.search(r"(alarm at run \d+ of \d+, (up|down)|no alarm \(); threshold \d+", text) or (
            "no alarm (threshold" in text
        ), text
        assert "change at run" not in text
    page.goto(f"{console.url}/compare")
    assert "1.0 → 1.1" in page.locator("h2").first.inner_text()
    refund = page.locator("tr", has=page.locator("a", has_text=re.compile("^issue_refund$")))
    assert "▲" in refund.inner_text()
    shoot(page, "compare")
    page.goto(f"{console.url}/references")
    tasks = page.locator("tbody tr td:first-child").all_inner_texts()
    assert tasks == ["faq", "order_status", "refund"]
    shoot(page, "references")


def test_drift_findings_link_to_example_runs_that_show_the_change(page: Any, console: Console) -> None:
    """Each drifted finding lists example runs of its recent window; the failure-rate finding's are
    failed runs inside that window, and following one opens that run's page."""
    page.goto(f"{console.url}/drift")
    drifted = page.locator("tr.drifted", has_text="failure_rate").first
    links = drifted.locator("a.example-run")
    assert links.count() >= 1
    traces = [
        href.rsplit("/", 1)[1]
        for href in (links.nth(i).get_attribute("href") or "" for i in range(links.count()))
    ]
    assert "failed:" in drifted.locator("ul.examples").inner_text()
    window = console.store.query(
        "SELECT toUnixTimestamp64Milli(WindowStart), toUnixTimestamp64Milli(WindowEnd) FROM drift_events "
        "WHERE Metric = 'failure_rate' AND Drifted ORDER BY DetectedAt DESC LIMIT 1"
    )[0]
    rows = console.store.query(
        "SELECT TraceId, Failure, toUnixTimestamp64Milli(Start) FROM trajectories FINAL "
        "WHERE TraceId IN {ids:Array(String)}",
        {"ids": traces},
    )
    assert {row[0] for row in rows} == set(traces)
    assert all(failure == 1 and window[0] <= start <= window[1] for _, failure, start in rows)
    for row in page.locator("tr.drifted").all():
        assert row.locator("a.example-run").count() >= 1, row.inner_text()
    shoot(page, "drift-examples")
    links.first.click()
    page.wait_for_url(re.compile(f"/runs/{traces[0]}$"))
    assert traces[0] in page.content()
    shoot(page, "drift-example-run")


def test_compare_takes_an_interval_per_side(page: Any, console: Console) -> None:
    """Version 1.1 against itself, before and after the middle of its runs (typed into the form):
    the two sides' run counts are the store's for each interval, the URL holds the intervals, and
    a side's runs link keeps its interval; a bad interval is a clear error."""
    from datetime import UTC, datetime

    first, last = _one(
        console.store,
        "SELECT min(toUnixTimestamp64Milli(Start)), max(toUnixTimestamp64Milli(Start)) "
        "FROM trajectories FINAL WHERE IsDeleted = 0 AND AgentVersion = '1.1'",
    )
    middle = datetime.fromtimestamp((first + last) // 2000, UTC)
    cut = middle.isoformat(timespec="seconds")
    cut_ms = int(middle.timestamp() * 1000)
    before, after = console.store.query(
        "SELECT countIf(toUnixTimestamp64Milli(Start) < {cut:Int64}), "
        "countIf(toUnixTimestamp64Milli(Start) >= {cut:Int64}) FROM trajectories FINAL "
        "WHERE IsDeleted = 0 AND AgentVersion = '1.1' AND Agent = 'support-agent'",
        {"cut": cut_ms},
    )[0]
    assert before > 0
    assert after > 0
    page.goto(f"{console.url}/compare")
    form = page.locator("form.filters")
    form.locator("select[name=a]").select_option("1.1")
    form.locator("select[name=b]").select_option("1.1")
    form.locator("input[name=a_until]").fill(cut)
    form.locator("input[name=b_since]").fill(cut)
    form.locator("input[name=b_since]").press("Enter")
    page.wait_for_url(re.compile(r"b_since="))
    heading = page.locator("h2").first.inner_text()
    assert heading.count("1.1") == 2
    assert middle.strftime("%Y-%m-%d %H:%M") in heading
    runs_row = page.locator("tr", has=page.locator("th", has_text=re.compile("^Runs$")))
    assert runs_row.locator("td").all_inner_texts() == [str(before), str(after)]
    link = runs_row.locator("td a").first.get_attribute("href") or ""
    assert "version=1.1" in link
    assert "until=" in link
    shoot(page, "compare-intervals")
    page.goto(f"{console.url}/compare?a=1.0&b=1.1&b_since=soon")
    assert "compare interval" in page.content()

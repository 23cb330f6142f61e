"""The Run page (`/runs/{trace_id}`) shows every span of its trace and no span of another.

The page is a trace's page: it shows each run of the trace and the whole span waterfall (spans
under no run belong to the trace's runs too, spec/telemetry.md), so its spans are selected by
trace id. The time range beside the id only narrows what ClickHouse reads: it comes from
`otel_traces_trace_id_ts`, whose Start and End are whole seconds (down from the first span,
down from the last, hence the query's second past End), so it must hold every span of the
trace however close to a second's edge, in whatever insert it arrived. Other traces' spans in
the same seconds stay out by the id alone.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from agenttrail.collector.otlp_decode import ns_to_clickhouse
from agenttrail.collector.schema import migrate
from agenttrail.collector.store import Store, parse_store
from agenttrail.evaluators.composition import ALL_MIGRATIONS
from agenttrail.evaluators.console.run_page import SPAN_LIMIT, trace_page

SECOND_NS = 1_000_000_000
T0 = 1_767_225_600 * SECOND_NS  # 2026-01-01 00:00:00 UTC
TRACE = "0a" * 16
OTHER = "0b" * 16
COLUMNS = ("Timestamp", "TraceId", "SpanId", "ParentSpanId", "SpanName", "ServiceName", "Duration")


@pytest.fixture
def store(chdb_dir: Path, database: str) -> Iterator[Store]:
    opened = Store(parse_store(str(chdb_dir), database))
    migrate(opened, ALL_MIGRATIONS)
    yield opened
    opened.close()


def store_spans(store: Store, trace_id: str, spans: list[tuple[str, int]]) -> None:
    """One insert of (span id, start in ns) spans of a trace, each a 1 ms child of span 01."""
    rows = [
        (ns_to_clickhouse(start), trace_id, span_id, "" if span_id.endswith("01") else trace_id[:14] + "01",
         "step", "svc", 1_000_000)
        for span_id, start in spans
    ]  # fmt: skip
    store.insert_rows("otel_traces", COLUMNS, rows)


def test_the_page_shows_exactly_its_traces_spans_at_the_edges_of_seconds(store: Store) -> None:
    """Spans a nanosecond either side of whole seconds, the last one in a later insert (a late
    span), all show; another trace's spans in the same seconds, before and after, do not."""
    store_spans(
        store, OTHER, [("0b0b0b0b0b0b0b01", T0 + SECOND_NS - 1), ("0b0b0b0b0b0b0b02", T0 + SECOND_NS)]
    )
    store_spans(
        store,
        TRACE,
        [
            ("0a0a0a0a0a0a0a01", T0 + SECOND_NS + 1),  # just after a second starts: Start floors to it
            ("0a0a0a0a0a0a0a02", T0 + 2 * SECOND_NS - 1),  # just before the next
        ],
    )
    # A late span, stored alone, just before the end of a later second: its End floors to
    # T0 + 3 s, which the page's upper bound must pass (+1 s) to keep it.
    store_spans(store, TRACE, [("0a0a0a0a0a0a0a03", T0 + 4 * SECOND_NS - 1)])
    store_spans(
        store,
        OTHER,
        [("0b0b0b0b0b0b0b03", T0 + SECOND_NS + 2), ("0b0b0b0b0b0b0b04", T0 + 4 * SECOND_NS - 2),
         ("0b0b0b0b0b0b0b05", T0 + 4 * SECOND_NS)],
    )  # fmt: skip
    page = trace_page(store, TRACE, audit_subjects=[], lookback_s=86_400, default_metrics=[])
    assert page is not None
    assert sorted((span.span_id, span.start_ns) for span in page.spans) == [
        ("0a0a0a0a0a0a0a01", T0 + SECOND_NS + 1),
        ("0a0a0a0a0a0a0a02", T0 + 2 * SECOND_NS - 1),
        ("0a0a0a0a0a0a0a03", T0 + 4 * SECOND_NS - 1),
    ]
    assert page.duration_ms == pytest.approx((3 * SECOND_NS - 2 + 1_000_000) / 1e6)


def test_a_trace_over_the_limit_says_that_it_has_more_spans(store: Store) -> None:
    """At the limit the page shows every span; one span more and it shows the first `SPAN_LIMIT`
    by start and says the trace has more, instead of cutting it silently."""
    spans = [(f"{i + 1:016x}", T0 + i * 1_000) for i in range(SPAN_LIMIT)]
    store_spans(store, TRACE, spans)
    whole = trace_page(store, TRACE, audit_subjects=[], lookback_s=86_400, default_metrics=[])
    assert whole is not None
    assert len(whole.spans) == SPAN_LIMIT
    assert not whole.more_spans
    store_spans(store, TRACE, [("ffffffffffffff01", T0 + SECOND_NS)])
    cut = trace_page(store, TRACE, audit_subjects=[], lookback_s=86_400, default_metrics=[])
    assert cut is not None
    assert cut.more_spans
    assert sorted(span.span_id for span in cut.spans) == sorted(span_id for span_id, _ in spans)

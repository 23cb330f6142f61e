"""The metrics_export config section, label capping and count-once bookkeeping."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agenttrail.collector.errors import ConfigError
from agenttrail.evaluators.monitoring.export_config import MetricsExportConfig
from agenttrail.evaluators.monitoring.exporter import FirstSighting, signal_url
from agenttrail.evaluators.monitoring.instruments import OTHER, LabelLimiter

SHIPPED = Path(__file__).parents[3] / "deploy" / "agenttrail.yaml"


def test_shipped_example_section_loads() -> None:
    """deploy/agenttrail.yaml's metrics_export section parses: Prometheus on, OTLP off."""
    config = MetricsExportConfig.from_file(str(SHIPPED))
    assert config.prometheus
    assert config.otlp_endpoint is None
    assert config.max_label_values == 100


def test_values_are_read_and_typed(tmp_path: Path) -> None:
    """Each key is read with its type; headers become pairs."""
    file = tmp_path / "c.yaml"
    file.write_text(
        "metrics_export:\n  otlp_endpoint: https://otel:4318\n  otlp_protocol: http\n"
        "  otlp_headers: {x-api-key: k}\n  interval_s: 3\n  max_label_values: '7'\n"
    )
    config = MetricsExportConfig.from_file(str(file))
    assert (config.otlp_endpoint, config.otlp_protocol) == ("https://otel:4318", "http")
    assert config.otlp_headers == (("x-api-key", "k"),)
    assert (config.interval_s, config.max_label_values) == (3.0, 7)


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ("promethues: true", r"promethues.*known"),
        ("otlp_protocol: thrift", "otlp_protocol"),
        ("otlp_endpoint: otel:4317", "http"),
        ("prometheus: 'yes please'", "true or false"),
        ("max_label_values: 0", "at least 1"),
        ("interval_s: soon", "interval_s|invalid"),
    ],
)
def test_bad_values_are_refused_naming_the_key_and_file(tmp_path: Path, section: str, message: str) -> None:
    """A wrong key or value is a ConfigError naming it and the file."""
    file = tmp_path / "bad.yaml"
    file.write_text(f"metrics_export:\n  {section}\n")
    with pytest.raises(ConfigError, match=message) as error:
        MetricsExportConfig.from_file(str(file))
    assert "metrics_export" in str(error.value)


def test_signal_url_appends_the_path_once() -> None:
    """OTLP/HTTP endpoints get /v1/<signal> unless they already end with it."""
    assert signal_url("http://c:4318", "metrics") == "http://c:4318/v1/metrics"
    assert signal_url("http://c:4318/v1/logs", "logs") == "http://c:4318/v1/logs"


@given(st.lists(st.sampled_from("abcdefgh"), max_size=60), st.integers(1, 5))
def test_label_limiter_keeps_the_first_values_and_counts_the_rest(values: list[str], limit: int) -> None:
    """At most `limit` distinct values pass; every replaced value is counted as dropped."""
    limiter = LabelLimiter(limit)
    out = [limiter("agent", value) for value in values]
    kept = set(out) - {OTHER}
    assert len(kept) <= limit
    assert kept == set(list(dict.fromkeys(values))[:limit])
    assert limiter.dropped.get("agent", 0) == out.count(OTHER)


@given(st.lists(st.tuples(st.integers(0, 5), st.integers(1, 3), st.integers(1, 3)), max_size=80))
def test_each_trace_is_counted_for_one_revision_only(rows: list[tuple[int, int, int]]) -> None:
    """Whatever revisions arrive (in increasing order per trace), a trace's runs are counted for
    exactly the first revision seen, and every run of that revision is counted."""
    rows = sorted(rows, key=lambda row: row[1])  # revisions of a trace are assembled in order
    sighting = FirstSighting(started_us=0)
    counted: dict[int, set[int]] = {}
    for trace, revision, _run in rows:
        if sighting.count(trace, revision, revision, start_us=1):
            counted.setdefault(trace, set()).add(revision)
    first = {trace: min(rev for t, rev, _ in rows if t == trace) for trace, _, _ in rows}
    assert counted == {trace: {revision} for trace, revision in first.items()}


def test_a_later_revision_of_a_run_from_before_the_start_is_not_counted() -> None:
    """Revision 2 of a run that started before the feed was counted before a restart: skip it."""
    sighting = FirstSighting(started_us=1_000)
    assert not sighting.count("t1", 2, 2, start_us=999)
    assert sighting.count("t2", 2, 2, start_us=1_001)  # its revision 1 was never visible to us
    assert sighting.count("t3", 1, 1, start_us=5)  # a long run assembled after the start

"""The report command's service functions, called without click: the range and bucket it checks,
the read it describes, and the files it writes from the rows of a real chDB store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agenttrail.collector.queries import QueryError
from agenttrail.evaluators.monitoring.service import report_read, write_monitoring_report

from .seed import HOURS


def test_report_read_then_write_one_page_per_store(
    store: Any, seeded: dict[str, Any], tmp_path: Path
) -> None:
    query, read = report_read(since=f"{HOURS + 1}h", bucket="30m", worst=3)
    assert (read.route, read.params["bucket_s"], read.params["worst"]) == ("/api/v1/report", "1800", "3")
    rows = read.local(store)
    written = write_monitoring_report(query, rows, "html", tmp_path / "report.html")
    assert written.paths == [tmp_path / "report.html"]
    assert written.agents == ["bot", "helper"]
    page = written.paths[0].read_text()
    assert page.count("data:image/png;base64,") == 2  # one plot per agent
    pngs = write_monitoring_report(query, rows, "png", tmp_path / "pngs")
    assert sorted(path.name for path in pngs.paths) == ["agenttrail-bot.png", "agenttrail-helper.png"]


def test_an_agent_without_runs_gives_an_empty_report(
    store: Any, seeded: dict[str, Any], tmp_path: Path
) -> None:
    query, read = report_read(since="2h", agent="nobody")
    written = write_monitoring_report(query, read.local(store), "html", tmp_path / "empty.html")
    assert written.agents == []
    assert (written.since, written.until) == (query.since, query.until)
    assert written.paths == [tmp_path / "empty.html"]


@pytest.mark.parametrize(("given", "message"), [({"bucket": "2d"}, "1d"), ({"since": "then"}, "then")])
def test_report_read_refuses_values_it_cannot_read(given: dict[str, str], message: str) -> None:
    with pytest.raises(QueryError, match=message):
        report_read(**given)

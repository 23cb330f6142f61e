"""How many runs each drift window holds per agent: exact counts, which set the windows' hash
limits (drift.load_windows), so the samples and p-values do not depend on how they are counted.

Counting a 7-day span run by run reads every run with FINAL. Instead the whole hours whose
`runs_by_hour` rows still match their runs (hourly.fresh_run_hours: the runs' fingerprint) and
that lie wholly inside or outside each window are counted from those rows, and the rest of the
span (the partial hours at the windows' edges, hours not rolled up yet or changed since) run by
run, as stats does (stats.HourlyPlan). A run's window depends on its start only through the
window ranges, so every run of such an hour falls in the window its hour's start does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from agenttrail.collector.store import Store
from agenttrail.evaluators.monitoring import hourly, sources
from agenttrail.evaluators.monitoring.sources import runs_sql
from agenttrail.evaluators.monitoring.stats import IN_FRESH, HourlyPlan

# The window ranges a run's start is compared with (drift.load_windows' parameters).
_RANGES = (("baseline_start", "baseline_end"), ("recent_start", "recent_end"))


def window_counts(
    store: Store,
    filters: Sequence[str],
    params: dict[str, Any],
    window_sql: Callable[[str], str],
) -> list[tuple[str, int, int]]:
    """(agent, window, runs) of every agent with runs in a window: 0 baseline, 1 recent.

    `window_sql(start)`: the window (-1 for none) of a run starting at the `start` expression;
    `params` holds the windows' ranges and the span holding both (`span_start`, `span_end`)."""
    span = (float(params["span_start"]), float(params["span_end"]))
    in_span = "Start >= {span_start:DateTime64(6)} AND Start < {span_end:DateTime64(6)}"
    plan = _plan(store, params, span)
    if plan is None:
        sql = runs_sql(
            [*filters, in_span, f"({window_sql('Start')}) >= 0"],
            f"Agent, {window_sql('Start')} AS w, count()",
        )
        return [(agent, int(w), int(n)) for agent, w, n in store.query(sql + " GROUP BY Agent, w", params)]
    rolled = " AND ".join((IN_FRESH, *filters))
    raw = runs_sql(
        [*filters, in_span, plan.in_gaps("Start")], f"Agent, {window_sql('Start')} AS w, toUInt64(1) AS n"
    )
    sql = (
        "SELECT Agent, w, sum(n) FROM ("
        f"SELECT Agent, {window_sql('toDateTime64(Hour, 6)')} AS w, Runs AS n "
        f"FROM runs_by_hour WHERE {rolled} "
        f"UNION ALL {raw}) WHERE w >= 0 GROUP BY Agent, w"
    )
    rows = store.query(sql, {**params, **plan.params()})
    return [(agent, int(w), int(n)) for agent, w, n in rows]


def _plan(store: Store, params: dict[str, Any], span: tuple[float, float]) -> HourlyPlan | None:
    """The span's fresh hours that no window edge cuts; None if there are none (or the store
    is read from the base tables, which the equivalence tests do)."""
    if sources.SOURCE is not sources.ROLLUPS:
        return None
    first, last = hourly.whole_hours(*span)
    ranges = [(float(params[start]), float(params[end])) for start, end in _RANGES]
    points = {
        hour: point
        for hour, point in hourly.fresh_run_hours(store, first, last).items()
        if all(_uncut(hour, start, end) for start, end in ranges)
    }
    return HourlyPlan(*span, points) if points else None


def _uncut(hour: int, start: float, end: float) -> bool:
    """The hour lies wholly inside [start, end) or wholly outside it."""
    stop = hour + hourly.HOUR_S
    return (start <= hour and stop <= end) or stop <= start or hour >= end

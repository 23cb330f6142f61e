"""Alert evaluation benchmark: the time of one evaluation of each rule kind, and of a replay.

Stores `BENCH_ALERT_RUNS` runs (default 1,000,000) over the last 24 h for 20 agents on a
temporary embedded store, inserted in time order in batches of 100,000 (as a sidecar writes
them, so the Start min-max index can skip parts outside a window). Then times each rule kind
(one evaluation is one query per rule) and `alerts test` over 1 h at a 1-minute step (61
evaluations). Target: one evaluation of all five kinds far below the default 30 s evaluation
interval. Prints figures; asserts nothing.
"""

from __future__ import annotations

import os
import random
import tempfile
import time

from agenttrail.collector.schema import MIGRATIONS, migrate
from agenttrail.collector.store import Store, parse_store
from agenttrail.evaluators.monitoring.alerts.config import AlertsConfig
from agenttrail.evaluators.monitoring.alerts.replay import ReplayWindow, replay
from agenttrail.evaluators.monitoring.alerts.schema import ALERT_MIGRATIONS
from agenttrail.evaluators.scoring.schema import EVALUATOR_MIGRATIONS

COLUMNS: tuple[str, ...] = (
    "TraceId",
    "RootSpanId",
    "Agent",
    "Task",
    "Start",
    "LatencyS",
    "Failure",
    "ToolNames",
)
COLUMNS += ("ToolStatuses", "AssembledAt", "Version", "IsDeleted")
RULES = [
    {"name": "spike", "kind": "failure_rate_spike"},
    {"name": "recall", "kind": "metric_below", "params": {"metric": "trajectory_recall", "threshold": 0.8}},
    {"name": "latency", "kind": "latency_above", "params": {"threshold_s": 5}},
    {"name": "tools", "kind": "tool_error_rate", "params": {"threshold": 0.2}},
    {"name": "drift", "kind": "drift"},
]


def fill(store: Store, runs: int, now: float) -> None:
    """Runs arrive in time order, as they do from a sidecar: each insert covers a slice of the day."""
    rng = random.Random(7)
    batch = 100_000
    for offset in range(0, runs, batch):
        rows = []
        for i in range(offset, min(offset + batch, runs)):
            failed = rng.random() < 0.05
            rows.append(
                (
                    os.urandom(16).hex(),
                    os.urandom(8).hex(),
                    f"agent-{rng.randrange(20)}",
                    f"task-{rng.randrange(50)}",
                    f"{now - 86400 * (1 - i / runs):.6f}",
                    rng.lognormvariate(0, 0.5),
                    int(failed),
                    ["search", "pay"],
                    ["ok", "error" if failed else "ok"],
                    f"{now:.6f}",
                    1,
                    0,
                )
            )
        store.insert_rows("trajectories", COLUMNS, rows)


def main() -> None:
    runs = int(os.environ.get("BENCH_ALERT_RUNS", "1000000"))
    with tempfile.TemporaryDirectory() as directory:
        store = Store(parse_store(directory, "bench"))
        migrate(store, (*MIGRATIONS, *EVALUATOR_MIGRATIONS, *ALERT_MIGRATIONS))
        now = time.time()
        started = time.perf_counter()
        fill(store, runs, now)
        print(f"stored {runs:,} runs in {time.perf_counter() - started:.1f} s")
        config = AlertsConfig.from_mapping({"rules": RULES}, "bench")
        total = 0.0
        for rule in config.rules:
            rule.condition.observe(store, rule.scope, now)  # warm
            started = time.perf_counter()
            groups = rule.condition.observe(store, rule.scope, now)
            elapsed = time.perf_counter() - started
            total += elapsed
            print(f"{rule.kind:<20} {elapsed * 1000:8.1f} ms  ({len(groups)} groups)")
        print(f"{'one evaluation':<20} {total * 1000:8.1f} ms  (target: far below the 30 s interval)")
        window = ReplayWindow(now - 3600, now, 60.0)
        started = time.perf_counter()
        replay(store, config.rule("spike"), window)
        print(f"replay 1h at 1m      {time.perf_counter() - started:8.2f} s   (61 evaluations)")


if __name__ == "__main__":
    main()

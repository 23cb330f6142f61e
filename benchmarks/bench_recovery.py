"""What the assembler's `recover()` statement costs on a store of many old assembly states.

Builds a store whose `assembled_traces` holds `--states` traces assembled three days ago and
20,000 traces arrived ten minutes ago (half of them assembled since), then runs the recovery
statement in fresh processes and prints their CPU and peak RSS. `--compare` runs the statement
as it was before session 14 (grouping the whole table) beside it, each in its own process.
"""

from __future__ import annotations

import argparse
import hashlib
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# Session 13's statement: every state ever written grouped for the join.
WHOLE_TABLE = """
SELECT a.TraceId, toUnixTimestamp64Micro(a.last_arrival), a.has_agent
FROM (
    SELECT TraceId, max(ArrivedAt) AS last_arrival, max(HasAgent) AS has_agent
    FROM trace_arrivals WHERE ArrivedAt >= now64(6) - toIntervalSecond({lookback:UInt32})
    GROUP BY TraceId
) AS a
LEFT JOIN (
    SELECT TraceId, max(AssembledThrough) AS done FROM assembled_traces GROUP BY TraceId
) AS s ON a.TraceId = s.TraceId
WHERE a.last_arrival > s.done
"""
RECENT = 20_000


def build(path: Path, states: int) -> None:
    from agenttrail.collector.schema import MIGRATIONS, migrate
    from agenttrail.collector.store import Store, parse_store

    store = Store(parse_store(str(path)))
    migrate(store, MIGRATIONS)
    insert = "INSERT INTO assembled_traces (TraceId, AssembledThrough, RunKeys, Revision, Version) "
    store.command(
        insert + "SELECT lower(hex(MD5(toString(number)))), now64(6) - toIntervalDay(3), [], 1, 1 "
        "FROM numbers({n:UInt64})",
        {"n": states},
    )
    store.command(
        "INSERT INTO trace_arrivals (TraceId, ArrivedAt, HasAgent) SELECT lower(hex(MD5(concat('r', "
        "toString(number))))), now64(6) - toIntervalSecond(600), 1 FROM numbers({n:UInt64})",
        {"n": RECENT},
    )
    store.command(
        insert + "SELECT lower(hex(MD5(concat('r', toString(number))))), now64(6), [], 1, 1 "
        "FROM numbers({n:UInt64})",
        {"n": RECENT // 2},
    )
    store.command("OPTIMIZE TABLE assembled_traces FINAL")
    store.close()


def measure(path: Path, which: str) -> None:
    from agenttrail.collector import assembler
    from agenttrail.collector.store import Store, parse_store

    store = Store(parse_store(str(path)))
    sql = WHOLE_TABLE if which == "whole-table" else assembler._RECOVERY_QUERY
    started = time.process_time()
    rows = store.query(sql, {"lookback": 86_400})
    cpu = time.process_time() - started
    digest = hashlib.md5(repr(sorted(rows)).encode()).hexdigest()[:10]
    # VmHWM, not ru_maxrss: Linux carries ru_maxrss over from the parent across fork and exec
    status = Path("/proc/self/status").read_text().splitlines()
    peak = next(int(line.split()[1]) for line in status if line.startswith("VmHWM")) // 1024
    print(f"  {which:12} {cpu * 1000:6.0f} ms CPU  peak RSS {peak:5} MiB  {len(rows):,} to resume ({digest})")


def main() -> None:
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    parser.add_argument("--states", type=int, default=4_000_000, help="old assembly states in the store")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--compare", action="store_true", help="also run the whole-table statement")
    parser.add_argument("--measure", choices=("now", "whole-table"), help=argparse.SUPPRESS)
    parser.add_argument("--store", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        measure(args.store, args.measure)
        return
    with tempfile.TemporaryDirectory(prefix="agenttrail-bench-recovery-") as tmp:
        store = Path(tmp) / "store"
        build(store, args.states)
        print(f"recover()'s statement, {args.states:,} old states, {RECENT:,} recent, one process each")
        for _ in range(args.rounds):
            for which in ("now", "whole-table") if args.compare else ("now",):
                command = [sys.executable, __file__, "--measure", which, "--store", str(store)]
                subprocess.run(command, check=True)


if __name__ == "__main__":
    main()

"""How long `agenttrail` takes to start: `--help`, and a read command answered by a running
sidecar (what the CLI costs before and after the work it asks for).

Prints the median and spread of wall and CPU time over N runs of each command, whole process
(interpreter start-up included), as `/usr/bin/time` would see it. Target: under 0.3 s wall on an
idle machine (issue 14); on a loaded one, CPU time is the steadier figure.

    .venv/bin/python benchmarks/bench_cli_start.py [--runs 15]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_ingest import wait_ready

AGENTTRAIL = [str(Path(sys.executable).parent / "agenttrail")]


def measure(args: list[str], runs: int) -> tuple[list[float], list[float]]:
    """Wall and CPU (user + system) seconds of each run of `agenttrail ARGS`."""
    walls, cpus = [], []
    for _ in range(runs + 1):  # the first run warms the page cache and .pyc files; not counted
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run([*AGENTTRAIL, *args], capture_output=True, check=True)
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        walls.append(wall)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return walls[1:], cpus[1:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    runs = parser.parse_args().runs
    with tempfile.TemporaryDirectory() as directory:
        store = Path(directory) / "store"
        serve = subprocess.Popen(
            [*AGENTTRAIL, "serve", "--store", str(store), "--grpc", "127.0.0.1:0", "--http", "127.0.0.1:0"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "AGENTTRAIL_LOG_LEVEL": "WARNING"},
        )
        try:
            wait_ready(store, serve, timeout_s=120)
            commands = {
                "agenttrail --help": ["--help"],
                "agenttrail trajectories (through serve)": ["trajectories", "--store", str(store)],
                "agenttrail stats (through serve)": ["stats", "--store", str(store)],
            }
            print(f"{'command':<42} {'wall p50':>9} {'min':>7} {'max':>7} {'cpu p50':>8}   ({runs} runs)")
            for name, args in commands.items():
                walls, cpus = measure(args, runs)
                print(
                    f"{name:<42} {statistics.median(walls):>8.3f}s {min(walls):>6.3f}s {max(walls):>6.3f}s "
                    f"{statistics.median(cpus):>7.3f}s"
                )
        finally:
            serve.terminate()
            serve.wait(60)


if __name__ == "__main__":
    main()

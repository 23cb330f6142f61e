"""Run every benchmark and print its figures (`make bench`). Targets are printed, not asserted."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent
SCRIPTS = (
    "bench_instrumentation.py",
    "bench_ingest.py",
    "bench_scoring.py",
    "bench_judges.py",
    "bench_monitoring.py",
    "bench_alerts.py",
    "bench_export.py",
)


def main() -> None:
    failed = []
    for script in SCRIPTS:
        print(f"== {script}", flush=True)
        if subprocess.run([sys.executable, str(HERE / script)], check=False).returncode != 0:
            failed.append(script)
    if failed:
        sys.exit(f"benchmark(s) failed: {', '.join(failed)}")


if __name__ == "__main__":
    main()

"""Online judging benchmark: judged runs/s at a given judge latency and concurrency, and
collector ingest with judging on and off (judging must never slow ingestion).

A local OpenAI-compatible server (tests/llm_server.py) answers every judge call after
`--latency-ms`; one `agenttrail serve` process ingests agent-shaped OTLP (bench_ingest.py)
and judges every run (sample rate 1) with a trajectory-accuracy judge, `--concurrency` calls
in flight. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

from bench_ingest import SPANS_PER_REQUEST, bench_ingest  # noqa: E402
from llm_server import LlmServer, Reply  # noqa: E402


class JudgeCalls:
    """Answers judge calls after a fixed latency and records when each one arrived."""

    def __init__(self, latency_s: float) -> None:
        self.latency_s = latency_s
        self.arrivals: list[float] = []
        self._lock = threading.Lock()

    def __call__(self, request: dict[str, Any]) -> Reply:
        with self._lock:
            self.arrivals.append(time.monotonic())
        return Reply.chat_json({"reasoning": "steps are sensible", "score": 0.8}, delay_s=self.latency_s)

    def count(self) -> int:
        with self._lock:
            return len(self.arrivals)


def judge_config(path: Path, base_url: str, concurrency: int) -> str:
    path.write_text(
        yaml.safe_dump(
            {
                "judges": [
                    {
                        "name": "accuracy",
                        "type": "trajectory_accuracy",
                        "base_url": base_url,
                        "model": "judge-model",
                        "api_key": "bench",
                        "concurrency": concurrency,
                        "sample_rate": 1.0,
                        "options": {"continuous": True},
                    }
                ]
            }
        )
    )
    return str(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--latency-ms", type=float, default=200.0, help="judge model latency")
    parser.add_argument("--concurrency", type=int, default=16, help="judge calls in flight")
    parser.add_argument("--requests", type=int, default=200, help="OTLP requests of 512 spans")
    parser.add_argument("--clients", type=int, default=4, help="concurrent gRPC client threads")
    parser.add_argument("--judge-window-s", type=float, default=15.0, help="how long to count judged runs")
    args = parser.parse_args()

    calls = JudgeCalls(args.latency_ms / 1000)
    judged: dict[str, float] = {}

    def measure_judging(_: dict[str, str]) -> None:
        """Judged runs/s in steady state, after ingestion has finished."""
        time.sleep(2.0)
        before, started = calls.count(), time.monotonic()
        time.sleep(args.judge_window_s)
        judged["runs_per_s"] = (calls.count() - before) / (time.monotonic() - started)

    runs = (args.requests - 1) * SPANS_PER_REQUEST // 8
    latency, flight = f"{args.latency_ms:.0f} ms", args.concurrency
    print(f"judged runs ({latency} judge latency, {flight} calls in flight, {runs:,} runs ingested):")
    off = bench_ingest(args.requests, args.clients)
    with LlmServer(calls) as llm, tempfile.TemporaryDirectory(prefix="agenttrail-bench-judges-") as tmp:
        config = judge_config(Path(tmp) / "judges.yaml", llm.base_url, args.concurrency)
        on = bench_ingest(args.requests, args.clients, config_file=config, after_stored=measure_judging)
    ceiling = args.concurrency / (args.latency_ms / 1000)
    print(
        f"  judged runs/s: {judged.get('runs_per_s', 0):.1f} "
        f"(ceiling concurrency / latency = {ceiling:.0f}/s; judge calls made: {calls.count():,})"
    )
    print("collector ingest while judging (spans/s persisted):")
    for label, figures in (("judging off", off), ("judging on ", on)):
        print(
            f"  {label}: {figures['persisted_spans_per_s']:,.0f}   ack p99 {figures['ack_p99_ms']:.1f} ms"
            f"   ({figures['persisted_spans_per_s'] / off['persisted_spans_per_s']:.0%} of off)"
        )


if __name__ == "__main__":
    main()

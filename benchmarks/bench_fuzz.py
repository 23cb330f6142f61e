"""Fuzzing benchmark (issue 19): thousands of seeded mutated OTLP requests over OTLP/HTTP protobuf,
OTLP/HTTP JSON and OTLP/gRPC, several at a time, with a canary agent run every tenth request,
against a collector on loopback with an embedded (chDB) store.

The generator and the checks are tests/otlp_fuzz.py, the same as the short run in
tests/collector/test_fuzz.py. Prints cases/s, the answers by transport and outcome, contract
violations, canaries acknowledged vs stored, accepted vs stored spans, and exits 1 on any
violation or lost canary (so a long run can gate a release).

    python benchmarks/bench_fuzz.py --cases 5000 --seeds 1 2 3
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent.parent / "tests"))
from otlp_fuzz import TRANSPORTS, FuzzCases, check_sidecar, run_fuzz

from agenttrail.collector.config import SidecarConfig
from agenttrail.collector.ingest import IngestPipeline
from agenttrail.collector.sidecar import Sidecar

KINDS = ("accepted", "partial", "rejected", "refused", "violation")


def run_seed(store: Path, seed: int, cases: int, concurrency: int, python_path: bool) -> bool:
    if python_path:
        IngestPipeline._store_can_decode = lambda self: False  # type: ignore[method-assign]
    sidecar = Sidecar(
        SidecarConfig(
            store=str(store),
            database=f"fuzz_{seed}",
            grpc="127.0.0.1:0",
            http="127.0.0.1:0",
            spool_dir=str(store / f"spool-{seed}"),
            quiet_period_s=0.5,
            idle_timeout_s=2.0,
        )
    )
    sidecar.start()
    try:

        def progress(done: int) -> None:
            if done % 1000 == 0:
                print(f"    {done} cases", file=sys.stderr, flush=True)

        report = run_fuzz(
            sidecar.http.address,  # type: ignore[union-attr]
            sidecar.grpc.address,  # type: ignore[union-attr]
            FuzzCases(seed).cases(cases),
            concurrency=concurrency,
            progress=progress,
        )
        settled = time.perf_counter()
        problems = check_sidecar(sidecar, report, timeout_s=600)
        settle_s = time.perf_counter() - settled
        counters = sidecar.pipeline.counters  # type: ignore[union-attr]
    finally:
        sidecar.stop()
    path = "Python-rendered rows" if python_path else "ClickHouse Protobuf decoding"
    print(f"seed {seed} ({path}): {len(report.outcomes)} cases in {report.elapsed_s:.1f} s")
    print(f"  {len(report.outcomes) / report.elapsed_s:,.0f} cases/s, {concurrency} at a time")
    print(f"  {'':16}" + "".join(f"{kind:>11}" for kind in KINDS))
    table = report.by_transport()
    for transport in TRANSPORTS:
        print(f"  {transport:16}" + "".join(f"{table[(transport, kind)]:>11}" for kind in KINDS))
    canaries = sum(1 for outcome in report.outcomes if outcome.case.canary is not None)
    lost = sum(1 for problem in problems if problem.startswith("canary "))
    print(
        f"  canaries sent {canaries}, acknowledged {len(report.acked_canaries)}, "
        f"lost (acknowledged, not assembled) {lost}"
    )
    print(
        f"  spans accepted {counters.accepted_spans}, stored {counters.stored_spans}, "
        f"rejected {counters.rejected_spans}, normalised {counters.normalized_spans}, "
        f"quarantined {counters.quarantined_spans}; stored and assembled {settle_s:.1f} s after the last case"
    )
    if report.violations:
        print(f"  {len(report.violations)} contract violations, first ones:\n{report.describe_violations()}")
    for problem in problems:
        print(f"  PROBLEM: {problem}")
    return not report.violations and not problems


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cases", type=int, default=3000, help="requests per seed")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2], help="one run per seed")
    parser.add_argument("--concurrency", type=int, default=4, help="requests in flight at once")
    parser.add_argument(
        "--python-path",
        action="store_true",
        help="store through the Python renderer, not ClickHouse's decoder",
    )
    args = parser.parse_args()
    ok = True
    with tempfile.TemporaryDirectory(prefix="agenttrail-fuzz-") as tmp:
        for seed in args.seeds:
            ok = run_seed(Path(tmp), seed, args.cases, args.concurrency, args.python_path) and ok
    print("fuzz: OK" if ok else "fuzz: FAILED")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()

"""Storage per million spans: bench_ingest's agent-shaped spans (8 spans a run: agent, chat,
six tool calls with arguments and results) through a sidecar on an embedded store, then the
compressed bytes on disk per table after merges. Prints figures; asserts nothing.

    python benchmarks/bench_storage.py [--requests 400]   # 512 spans a request
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from bench_ingest import SPANS_PER_REQUEST, agent_request

from agenttrail.collector.config import SidecarConfig
from agenttrail.collector.sidecar import Sidecar

TABLES = ("otel_traces", "otel_traces_trace_id_ts", "trace_arrivals", "trajectories", "assembly_state")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=400, help="requests of 512 spans")
    args = parser.parse_args()
    spans = args.requests * SPANS_PER_REQUEST
    with tempfile.TemporaryDirectory(prefix="agenttrail-storage-") as tmp:
        config = SidecarConfig(
            store=str(Path(tmp) / "store"),
            grpc="127.0.0.1:0",
            http="127.0.0.1:0",
            quiet_period_s=0.5,
            max_queue_spans=max(200_000, spans),
        )
        sidecar = Sidecar(config)
        sidecar.start()
        try:
            assert sidecar.pipeline is not None
            assert sidecar.store is not None
            for index in range(args.requests):
                sidecar.pipeline.accept(agent_request(index))
            if not sidecar.wait_until_assembled(timeout_s=600):
                sys.exit("assembly did not finish in 10 minutes")
            for table in TABLES:
                sidecar.store.command(f"OPTIMIZE TABLE {table} FINAL")
            rows = sidecar.store.query(
                "SELECT table, sum(rows), sum(data_compressed_bytes), sum(data_uncompressed_bytes) "
                "FROM system.parts WHERE active AND database = currentDatabase() GROUP BY table"
            )
        finally:
            sidecar.stop()
    sizes = {table: (int(r), int(c), int(u)) for table, r, c, u in rows}
    print(f"storage after {spans:,} spans ({spans // 8:,} runs of 8 spans), compressed on disk after merges:")
    total = 0
    for table in TABLES:
        stored_rows, compressed, uncompressed = sizes.get(table, (0, 0, 0))
        total += compressed
        print(
            f"  {table:26} {stored_rows:>9,} rows  {compressed / 2**20:8.1f} MiB  "
            f"({uncompressed / max(compressed, 1):.1f}x)  "
            f"{compressed / spans * 1e6 / 2**20:8.1f} MiB per 1M spans"
        )
    print(
        f"  {'all':26} {'':>14}  {total / 2**20:8.1f} MiB  "
        f"{total / spans * 1e6 / 2**20:8.1f} MiB per 1M spans"
    )


if __name__ == "__main__":
    main()

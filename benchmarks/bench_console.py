"""Console benchmark: server time of the Runs page and the Run page over 1,000,000 stored runs.

The store is filled as bench_monitoring fills it (runs over 7 days, 2 % re-assembled, 4 scores
per run), plus 3 spans per run in `otel_traces` so the Run page's span lookup searches a table
of realistic size. The console runs under uvicorn on loopback; each figure is the time of a
GET as a client sees it on the same machine (server time plus a loopback round trip), median
and worst of `--repeat`. Prints figures; asserts nothing. `--runs N` for a smaller store.
"""

from __future__ import annotations

import argparse
import socket
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from bench_monitoring import generate

from agenttrail.collector.schema import migrate
from agenttrail.collector.store import Store, parse_store
from agenttrail.evaluators.composition import ALL_MIGRATIONS

_SPANS = """
INSERT INTO otel_traces (Timestamp, TraceId, SpanId, ParentSpanId, SpanName, SpanKind, ServiceName,
    SpanAttributes, Duration, StatusCode)
SELECT Start + toIntervalMillisecond(i * 3), TraceId,
    if(i = 0, RootSpanId, substring(lower(hex(MD5(concat(TraceId, toString(i))))), 1, 16)),
    if(i = 0, '', RootSpanId),
    ['invoke_agent bench', 'execute_tool search_kb', 'chat model-a'][i + 1], 'SPAN_KIND_INTERNAL', 'bench',
    map('gen_ai.operation.name', ['invoke_agent', 'execute_tool', 'chat'][i + 1], 'agenttrail.task', Task),
    toUInt64(LatencyS * 1e9 / (i + 1)), 'STATUS_CODE_UNSET'
FROM trajectories ARRAY JOIN [0, 1, 2] AS i WHERE Revision = 1
"""


def serve(directory: Path) -> str:
    import uvicorn
    from starlette.applications import Starlette
    from starlette.routing import Mount

    from agenttrail.evaluators.console import create_app

    app = Starlette(routes=[Mount("/console", create_app(lambda: Store(parse_store(str(directory)))))])
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True).start()
    while not server.started:
        time.sleep(0.05)
    return f"http://127.0.0.1:{sock.getsockname()[1]}/console"


def timed(what: str, url: str, repeat: int) -> None:
    times = []
    for _ in range(repeat + 1):  # the first request warms caches and is not counted
        started = time.perf_counter()
        with urllib.request.urlopen(url, timeout=120) as response:
            body = response.read()
            assert response.status == 200, f"{url}: {response.status}"
        times.append((time.perf_counter() - started) * 1000)
    times = times[1:]
    print(
        f"  {what:<44} median {statistics.median(times):7.1f} ms   worst {max(times):7.1f} ms"
        f"   ({len(body) // 1024} KiB)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="agenttrail-bench-console-") as tmp:
        directory = Path(tmp)
        store = Store(parse_store(str(directory)))
        migrate(store, ALL_MIGRATIONS)  # every table serve makes, alerts included (the overview reads them)
        started = time.perf_counter()
        generate(store, args.runs, datetime.now(UTC))
        store.command(_SPANS)
        print(
            f"{args.runs:,} runs, {args.runs * 3:,} spans and {args.runs * 4:,} scores generated "
            f"in {time.perf_counter() - started:.0f} s"
        )
        (trace,) = store.query(
            "SELECT TraceId FROM trajectories WHERE Revision = 2 ORDER BY Start DESC LIMIT 1 OFFSET 100"
        )[0]
        (middle,) = store.query(
            "SELECT concat(toString(toUnixTimestamp64Micro(Start)), ':', TraceId, ':', RootSpanId) "
            "FROM trajectories WHERE Revision = 1 ORDER BY Start LIMIT 1 OFFSET {n:UInt64}",
            {"n": args.runs // 2},
        )[0]
        store.close()
        base = serve(directory)
        print(f"console at {base}; GET times (loopback):")
        timed("runs page (newest 50)", f"{base}/runs", args.repeat)
        timed("runs page, agent + status filter", f"{base}/runs?agent=billing-bot&status=failed", args.repeat)
        timed("runs page, tool + since 1d", f"{base}/runs?tool=escalate&since=1d", args.repeat)
        timed("runs page, half way back (keyset cursor)", f"{base}/runs?before={middle}", args.repeat)
        timed("runs page, text search", f"{base}/runs?q=zzz-not-there", args.repeat)
        timed("run page (re-assembled run, 3 spans)", f"{base}/runs/{trace}", args.repeat)
        timed("agent overview (1 day)", f"{base}/agents/billing-bot?since=1d", args.repeat)


if __name__ == "__main__":
    main()

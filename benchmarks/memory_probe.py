"""Run `agenttrail serve` with a sampler thread that says where its memory is, for
bench_overload's `--memory-log FILE`.

Usage: python memory_probe.py FILE serve --store DIR ...

Every 0.5 s one JSON line goes to FILE: the process's RSS; what ClickHouse (chDB, in-process)
tracks (`MemoryTracking`, merges, each cache's bytes); the memory of each running query by
kind (its first words) and of running merges; the sidecar's backlog from /healthz. The
difference between RSS and ClickHouse's tracked memory is the Python side (request bodies,
decoded batches, assembly in Python) plus allocator retention. `summarise(FILE)` prints the
peak of each series and the breakdown at the RSS peak.
"""

from __future__ import annotations

import ctypes
import json
import re
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

_KIND = re.compile(r"\s+")
# ClickHouse's jemalloc (chDB's C++ allocations): its totals line.
_JEMALLOC_TOTALS = re.compile(
    r"Allocated: (\d+), active: (\d+), metadata: (\d+).*?resident: (\d+), mapped: (\d+)"
)


def _kind(query: str) -> str:
    words = _KIND.sub(" ", query).strip().split(" ")
    if words[0].upper() == "INSERT" and len(words) > 2:
        # INSERT INTO table ...: the table says which path it is.
        return " ".join(words[:3]) + (" SELECT" if " SELECT " in query.upper() else "")
    if "FROM" in (w.upper() for w in words):
        index = [w.upper() for w in words].index("FROM")
        return "SELECT ... FROM " + " ".join(words[index + 1 : index + 2]).strip("(")
    return " ".join(words[:3])


def _rss() -> dict[str, float]:
    """RSS and its parts: anonymous (heaps, stacks) and file-backed (chDB's 550 MB library's
    code pages, touched the first time a code path runs: clean, shared with the page cache)."""
    found: dict[str, float] = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key = line.split(":", 1)[0]
        if key in ("VmRSS", "RssAnon", "RssFile"):
            found[{"VmRSS": "rss_mib", "RssAnon": "rss_anon_mib", "RssFile": "rss_file_mib"}[key]] = (
                int(line.split()[1]) / 1024
            )
        elif key == "Threads":
            found["threads"] = int(line.split()[1])
    return found


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


def _malloc() -> dict[str, float]:
    """glibc malloc's view (Python, protobuf, grpc; chDB has its own allocator): bytes in use,
    and bytes freed but kept by the process (what malloc_trim could give back)."""
    libc = ctypes.CDLL("libc.so.6")
    libc.mallinfo2.restype = _MallInfo2
    info = libc.mallinfo2()
    return {
        "malloc_in_use_mib": (info.uordblks + info.hblkhd) / 2**20,
        "malloc_free_kept_mib": info.fordblks / 2**20,
    }


def _sample(connection: Any, lock_file: Path) -> dict[str, Any]:
    sample: dict[str, Any] = {
        "t": time.time(),
        **_rss(),
        **_malloc(),
        "python_blocks": sys.getallocatedblocks(),
    }
    rows = connection.query(
        "SELECT metric, value FROM system.metrics WHERE metric IN ('MemoryTracking', "
        "'MergesMutationsMemoryTracking') OR (metric LIKE '%Cache%Bytes' AND value > 0)",
        "JSONCompact",
    )
    for metric, value in json.loads(rows.bytes())["data"]:
        sample[metric] = int(value) / 2**20
    rows = connection.query(
        "SELECT query, memory_usage, peak_memory_usage FROM system.processes", "JSONCompact"
    )
    queries: dict[str, float] = {}
    for query, memory, peak in json.loads(rows.bytes())["data"]:
        kind = _kind(query)
        if kind.startswith("SELECT ... FROM system."):
            continue
        queries[kind] = queries.get(kind, 0.0) + max(int(memory), int(peak)) / 2**20
    sample["queries"] = queries
    stats = connection.query("SELECT * FROM system.jemalloc_stats", "TSVRaw").bytes().decode()
    found = _JEMALLOC_TOTALS.search(stats)
    if found:
        for key, value in zip(
            ("allocated", "active", "metadata", "resident", "mapped"), found.groups(), strict=True
        ):
            sample[f"jemalloc_{key}_mib"] = int(value) / 2**20
    rows = connection.query("SELECT table, memory_usage FROM system.merges", "JSONCompact")
    merges = json.loads(rows.bytes())["data"]
    sample["merges_mib"] = sum(int(memory) for _, memory in merges) / 2**20
    sample["merges"] = len(merges)
    for table, memory in merges:  # by table, beside the queries
        kind = f"merge {table}"
        queries[kind] = queries.get(kind, 0.0) + int(memory) / 2**20
    try:
        address = json.loads(lock_file.read_text())["http"]
        with urllib.request.urlopen(f"http://{address}/healthz", timeout=2) as response:
            health = json.loads(response.read())
        for key in ("queued_spans", "inflight_bytes", "pending_traces"):
            sample[key] = health.get(key)
    except Exception:  # start-up and shutdown: the sample goes without it
        pass
    return sample


def _probe(out: Path, store: Path, done: threading.Event) -> None:
    lock_file = store / "agenttrail.agenttrail.lock"
    while not (store / "metadata").exists():
        if done.wait(0.2):
            return
    time.sleep(2)
    import chdb  # only now: serve sets the engine's allocator options before chdb loads

    # Typed or not depending on which of chdb / chdb-core wrote chdb/__init__.py last.
    connect = cast(Callable[[str], Any], chdb.connect)
    connection = connect(str(store))
    with out.open("a") as stream:
        while not done.is_set():
            try:
                stream.write(json.dumps(_sample(connection, lock_file)) + "\n")
                stream.flush()
            except Exception as exc:
                stream.write(json.dumps({"t": time.time(), "error": repr(exc)[:300]}) + "\n")
            done.wait(0.5)
    connection.close()  # an open connection keeps the engine (and the process) from ending


def summarise(path: Path) -> str:
    samples = [s for s in map(json.loads, path.read_text().splitlines()) if "rss_mib" in s]
    if not samples:
        return "memory log: no samples"
    peak = max(samples, key=lambda s: s["rss_mib"])
    lines = [f"memory log {path} ({len(samples)} samples):"]
    scalar = sorted({k for s in samples for k, v in s.items() if isinstance(v, (int, float)) and k != "t"})
    for key in scalar:
        values = [s[key] for s in samples if isinstance(s.get(key), (int, float))]
        lines.append(f"  {key:36} max {max(values):>12,.1f}   at RSS peak {peak.get(key, 0) or 0:>12,.1f}")
    kinds: dict[str, float] = {}
    for s in samples:
        for kind, mib in s.get("queries", {}).items():
            kinds[kind] = max(kinds.get(kind, 0.0), mib)
    lines.append("  query memory by kind (MiB, max of running queries; at RSS peak):")
    for kind, mib in sorted(kinds.items(), key=lambda item: -item[1]):
        lines.append(f"    {kind[:60]:60} {mib:>8,.1f} {peak.get('queries', {}).get(kind, 0.0):>8,.1f}")
    return "\n".join(lines)


def main() -> None:
    out = Path(sys.argv[1])
    args = sys.argv[2:]
    store = Path(args[args.index("--store") + 1]).resolve()
    done = threading.Event()
    probe = threading.Thread(target=_probe, args=(out, store, done), daemon=True)
    probe.start()
    sys.argv = ["agenttrail", *args]
    from agenttrail.collector.store import Store
    from agenttrail.evaluators.cli.entry import main as agenttrail

    close = Store.close

    def close_after_probe(store_client: Store) -> None:
        # The engine ends with the sidecar's last client; the probe's must be gone by then.
        done.set()
        probe.join(30)
        close(store_client)

    Store.close = close_after_probe  # type: ignore[method-assign,assignment]

    try:
        agenttrail()
    finally:
        done.set()
        probe.join(30)


if __name__ == "__main__":
    if sys.argv[1] == "--summarise":
        print(summarise(Path(sys.argv[2])))
    else:
        main()

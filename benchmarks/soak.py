"""Soak: `agenttrail serve` fed at a steady rate for a long time, killed with SIGKILL at intervals
and restarted on the same store, then checked: every acknowledged span stored exactly once.

Clients (half OTLP/HTTP protobuf, half OTLP/gRPC) send agent runs of `--spans` spans at
`--rate` spans/s in all; they honour Retry-After and resend a request whose connection dropped
(a request is "acknowledged" only when its 200 / OK arrived). Every `--sample-s` the script
prints the sidecar's RSS, acknowledged and stored spans and the interval's ack p50/p99; every
`--kill-every` s it kills the sidecar with SIGKILL and starts it again. With `--disk-full-at T`
the spool lives on a size-limited tmpfs (mounting one needs root) that a ballast file keeps full
from T for `--disk-full-s` seconds: requests are then refused with a retry hint (HTTP 503, gRPC
UNAVAILABLE) and must go through again, unchanged, once the ballast is gone. At the end it stops the
sidecar (SIGTERM), opens the store itself and counts, per acknowledged trace, the stored spans:
lost (acknowledged, not stored) and duplicated spans must both be 0 (exit 1 otherwise).
A request resent after a dropped connection may legitimately be stored twice (at-least-once),
so duplicates are counted only on traces sent once.

    python benchmarks/soak.py --disk-full-at 1500  # one hour, a kill every 10 minutes, a full disk
    python benchmarks/soak.py --seconds 90 --kill-every 60   # `make soak-short`
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import http.client
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import grpc

sys.path.insert(0, str(Path(__file__).parent.parent / "tests"))
from bench_ingest import wait_ready
from otlp_fuzz import EXPORT, FuzzCases

SERVE = [sys.executable, "-c", "from agenttrail.evaluators.cli.entry import main; main()"]


class Sidecar:
    """`agenttrail serve` as a child process on one store, restartable."""

    def __init__(self, store: Path, spool_dir: Path | None = None) -> None:
        self.store = store
        self.spool_dir = spool_dir
        self.process: subprocess.Popen[bytes] | None = None
        self.http = self.grpc = ""
        self.ready = threading.Event()

    def start(self) -> float:
        started = time.perf_counter()
        self.process = subprocess.Popen(
            [
                *SERVE,
                "--log-level",
                "WARNING",
                "serve",
                "--store",
                str(self.store),
                "--quiet-period-s",
                "1",
                "--grpc",
                "127.0.0.1:0",
                "--http",
                "127.0.0.1:0",
                *(["--spool-dir", str(self.spool_dir)] if self.spool_dir else []),
            ]
        )
        info = wait_ready(self.store, self.process)
        self.http, self.grpc = info["http"], info["grpc"]
        self.ready.set()
        return time.perf_counter() - started

    def kill(self) -> None:
        self.ready.clear()
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()

    def stop(self) -> None:
        self.ready.clear()
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(600)

    def rss_mib(self) -> float:
        try:
            status = Path(f"/proc/{self.process.pid if self.process else 0}/status").read_text()
        except OSError:
            return 0.0
        for line in status.splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return 0.0

    def stored_spans(self) -> int | None:
        """Stored by the running process since it started (its /healthz counter)."""
        try:
            host, port = self.http.rsplit(":", 1)
            connection = http.client.HTTPConnection(host, int(port), timeout=5)
            connection.request("GET", "/healthz")
            value = json.loads(connection.getresponse().read())["stored_spans"]
            connection.close()
            return int(value)
        except (OSError, ValueError, KeyError, http.client.HTTPException):
            return None


class Clients:
    """Paced senders; what each acknowledged, and how fast."""

    def __init__(self, sidecar: Sidecar, rate: float, spans: int, threads: int) -> None:
        self.sidecar = sidecar
        self.spans = spans
        self.interval_s = threads * spans / rate  # per thread, between request starts
        self.threads = threads
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.acked: dict[str, int] = {}  # trace id -> spans acknowledged
        self.resent: set[str] = set()  # traces resent after a dropped connection
        self.latencies: list[float] = []  # since the last sample
        self.all_latencies: list[float] = []
        self.refused = 0
        self.dropped = 0
        self.disk_full = threading.Event()
        self.refused_while_disk_full = 0

    def run(self) -> list[threading.Thread]:
        workers = [threading.Thread(target=self._client, args=(i,), daemon=True) for i in range(self.threads)]
        for worker in workers:
            worker.start()
        return workers

    def _client(self, index: int) -> None:
        cases = FuzzCases(seed=1000 + index)
        tools = tuple(f"soak-tool-{k}" for k in range(self.spans - 1))
        use_grpc = index % 2 == 1
        channel: grpc.Channel | None = None
        address = ""
        next_start = time.monotonic()
        while not self.stop.is_set():
            cases.now_ns = time.time_ns()
            trace, request = cases.agent_run(tools, agent="soak")
            body = request.SerializeToString()
            while not self.stop.is_set():
                self.sidecar.ready.wait(5)
                if not self.sidecar.ready.is_set():
                    continue
                if use_grpc and (channel is None or address != self.sidecar.grpc):
                    if channel is not None:
                        channel.close()
                    address = self.sidecar.grpc
                    channel = grpc.insecure_channel(address)
                started = time.perf_counter()
                outcome, retry_after = (
                    self._send_grpc(channel, body) if use_grpc and channel else self._send_http(body)
                )
                if outcome == "ok":
                    with self.lock:
                        self.acked[trace.hex()] = self.spans
                        self.latencies.append(time.perf_counter() - started)
                    break
                with self.lock:
                    if outcome == "refused":
                        self.refused += 1
                        self.refused_while_disk_full += self.disk_full.is_set()
                    else:
                        self.dropped += 1
                        self.resent.add(trace.hex())
                time.sleep(retry_after)
            next_start += self.interval_s
            time.sleep(max(0.0, next_start - time.monotonic()))
        if channel is not None:
            channel.close()

    def _send_http(self, body: bytes) -> tuple[str, float]:
        host, port = self.sidecar.http.rsplit(":", 1)
        connection = http.client.HTTPConnection(host, int(port), timeout=60)
        try:
            connection.request(
                "POST", "/v1/traces", body=body, headers={"Content-Type": "application/x-protobuf"}
            )
            response = connection.getresponse()
            response.read()
        except (OSError, http.client.HTTPException):
            return "dropped", 0.5
        finally:
            connection.close()
        if response.status == 200:
            return "ok", 0.0
        return "refused", float(response.getheader("Retry-After") or 1)

    def _send_grpc(self, channel: grpc.Channel, body: bytes) -> tuple[str, float]:
        try:
            channel.unary_unary(EXPORT, request_serializer=None, response_deserializer=None)(body, timeout=60)
        except grpc.RpcError as exc:
            if exc.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.RESOURCE_EXHAUSTED):
                # UNAVAILABLE is also what a killed sidecar looks like: the request is resent.
                return ("refused" if self.sidecar.ready.is_set() else "dropped"), 1.0
            return "dropped", 0.5
        return "ok", 0.0

    def take_latencies(self) -> list[float]:
        with self.lock:
            taken, self.latencies = self.latencies, []
        self.all_latencies.extend(taken)
        return sorted(taken)


class SmallDisk:
    """The spool's filesystem: a size-limited tmpfs that a ballast file can fill."""

    def __init__(self, mount_point: Path, size_mib: int) -> None:
        self.mount_point = mount_point
        self.ballast = mount_point / "ballast"
        mount_point.mkdir()
        result = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size_mib}m", "tmpfs", str(mount_point)],
            capture_output=True,
            text=True,
        )
        if result.returncode != 0:
            raise SystemExit(
                f"--disk-full-at needs a size-limited tmpfs for the spool and mounting one failed "
                f"({result.stderr.strip() or result.returncode}); run as root, or leave the option out"
            )

    def fill(self) -> None:
        """Grow the ballast until the filesystem refuses (ENOSPC): space the writer frees by
        draining segments is taken back at every call."""
        try:
            # Unbuffered, so that nothing is left to write (and fail) when the file is closed.
            with self.ballast.open("ab", buffering=0) as ballast:
                while ballast.write(b"\0" * 65536):
                    pass
        except OSError as exc:
            if exc.errno != errno.ENOSPC:
                raise

    def free(self) -> None:
        self.ballast.unlink(missing_ok=True)

    def unmount(self) -> None:
        subprocess.run(["umount", "-l", str(self.mount_point)], check=False)


@contextlib.contextmanager
def small_disk(root: Path, wanted: bool) -> Iterator[SmallDisk | None]:
    if not wanted:
        yield None
        return
    disk = SmallDisk(root / "spool-disk", size_mib=256)
    try:
        yield disk
    finally:
        disk.unmount()


def pct(values: list[float], q: float) -> float:
    return values[min(len(values) - 1, int(len(values) * q))] * 1000 if values else float("nan")


def soak(
    seconds: float,
    rate: float,
    spans: int,
    threads: int,
    kill_every: float,
    sample_s: float,
    disk_full_at: float | None = None,
    disk_full_s: float = 60.0,
) -> bool:
    with (
        tempfile.TemporaryDirectory(prefix="agenttrail-soak-") as tmp,
        small_disk(Path(tmp), disk_full_at is not None) as disk,
    ):
        store = Path(tmp) / "store"
        sidecar = Sidecar(store, disk.mount_point / "spool" if disk else None)
        episode = (
            f", the spool's disk full from {disk_full_at:.0f} s for {disk_full_s:.0f} s"
            if disk_full_at is not None
            else ""
        )
        print(
            f"soak: {seconds:.0f} s at {rate:,.0f} spans/s ({spans}-span runs, {threads} clients), "
            f"SIGKILL every {kill_every:.0f} s{episode}; sidecar started in {sidecar.start():.1f} s",
            flush=True,
        )
        clients = Clients(sidecar, rate, spans, threads)
        workers = clients.run()
        began = time.monotonic()
        next_kill = began + kill_every
        next_sample = began + sample_s
        stored_before_restarts = 0
        kills = 0
        rss: list[float] = []
        print(
            f"  {'t (s)':>7}{'RSS MiB':>9}{'acked spans':>13}{'stored':>10}{'p50 ms':>9}{'p99 ms':>9}",
            flush=True,
        )
        while time.monotonic() - began < seconds:
            if disk is not None and disk_full_at is not None:
                full = disk_full_at <= time.monotonic() - began < disk_full_at + disk_full_s
                if full and not clients.disk_full.is_set():
                    print(f"  {time.monotonic() - began:7.0f}  spool disk full", flush=True)
                    clients.disk_full.set()
                elif not full and clients.disk_full.is_set():
                    disk.free()
                    clients.disk_full.clear()
                    print(f"  {time.monotonic() - began:7.0f}  spool disk freed", flush=True)
                if full:
                    disk.fill()
            step = 1.0 if disk is not None else sample_s
            time.sleep(min(step, max(0.0, began + seconds - time.monotonic())))
            if time.monotonic() < next_sample and time.monotonic() - began < seconds:
                continue
            next_sample += sample_s
            if time.monotonic() >= next_kill and time.monotonic() - began < seconds - 5:
                stored_before_restarts += sidecar.stored_spans() or 0
                sidecar.kill()
                kills += 1
                print(
                    f"  {time.monotonic() - began:7.0f}  SIGKILL; restarted in {sidecar.start():.1f} s",
                    flush=True,
                )
                next_kill += kill_every
            latencies = clients.take_latencies()
            with clients.lock:
                acked = sum(clients.acked.values())
            stored_now = sidecar.stored_spans()
            stored = "-" if stored_now is None else f"{stored_before_restarts + stored_now:,}"
            rss.append(sidecar.rss_mib())
            print(
                f"  {time.monotonic() - began:7.0f}{rss[-1]:9.0f}{acked:13,}{stored:>10}"
                f"{pct(latencies, 0.5):9.1f}{pct(latencies, 0.99):9.1f}",
                flush=True,
            )
        if disk is not None:
            disk.free()
            clients.disk_full.clear()
        clients.stop.set()
        for worker in workers:
            worker.join(120)
        clients.take_latencies()
        sidecar.stop()
        ok = verify(store, clients, kills, rss, time.monotonic() - began)
        if disk_full_at is not None:
            print(f"  refused while the spool's disk was full: {clients.refused_while_disk_full:,}")
            if clients.refused_while_disk_full == 0:
                print("soak: FAILED (the disk-full episode refused nothing: it did not happen)")
                ok = False
        return ok


def verify(store: Path, clients: Clients, kills: int, rss: list[float], seconds: float) -> bool:
    """Open the store the sidecar left and compare it with what was acknowledged."""
    from agenttrail.collector.store import Store, parse_store

    opened = Store(parse_store(str(store), "agenttrail"))
    try:
        rows = opened.query("SELECT TraceId, count(), uniqExact(SpanId) FROM otel_traces GROUP BY TraceId")
    finally:
        opened.close()
    stored = {trace: (int(count), int(unique)) for trace, count, unique in rows}
    acked_spans = sum(clients.acked.values())
    lost = sum(max(0, spans - stored.get(trace, (0, 0))[1]) for trace, spans in clients.acked.items())
    duplicated = sum(
        count - unique for trace, (count, unique) in stored.items() if trace not in clients.resent
    )
    latencies = sorted(clients.all_latencies)
    print(f"after {seconds:.0f} s and {kills} SIGKILL restarts:")
    print(
        f"  acknowledged {len(clients.acked):,} requests / {acked_spans:,} spans "
        f"({acked_spans / seconds:,.0f} spans/s); stored {sum(c for c, _ in stored.values()):,} spans"
    )
    print(f"  lost (acknowledged, not stored) {lost:,} spans; duplicated {duplicated:,} spans")
    print(
        f"  refused with a retry hint {clients.refused:,}; "
        f"resent after a dropped connection {clients.dropped:,}"
    )
    print(
        f"  ack p50 {pct(latencies, 0.5):.1f} ms, p99 {pct(latencies, 0.99):.1f} ms, "
        f"max {pct(latencies, 1.0):.1f} ms"
    )
    if rss:
        print(f"  RSS min {min(rss):.0f} MiB, max {max(rss):.0f} MiB, last {rss[-1]:.0f} MiB")
    ok = lost == 0 and duplicated == 0 and acked_spans > 0
    print("soak: OK" if ok else "soak: FAILED")
    return ok


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=3600.0, help="how long to run (default 1 h)")
    parser.add_argument("--rate", type=float, default=2000.0, help="spans/s offered in all")
    parser.add_argument("--spans", type=int, default=20, help="spans per request (one agent run)")
    parser.add_argument("--clients", type=int, default=4, help="client threads, half HTTP half gRPC")
    parser.add_argument("--kill-every", type=float, default=600.0, help="seconds between SIGKILL restarts")
    parser.add_argument("--sample-s", type=float, default=30.0, help="seconds between printed samples")
    parser.add_argument(
        "--disk-full-at", type=float, help="second at which the spool's disk fills up (needs root)"
    )
    parser.add_argument("--disk-full-s", type=float, default=60.0, help="how long the disk stays full")
    args = parser.parse_args()
    random.seed(0)
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    ok = soak(
        args.seconds,
        args.rate,
        args.spans,
        args.clients,
        args.kill_every,
        args.sample_s,
        args.disk_full_at,
        args.disk_full_s,
    )
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()

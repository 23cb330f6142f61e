"""The sidecar process: store, spool replay, writer, assembler and both receivers, wired once.

On the embedded store, the sidecar holds an exclusive lock file in the store directory that
names its pid and addresses: a second `serve` on the same directory stops with a message
naming the holder, and read commands find the running sidecar's HTTP API through it.

A ClickHouse server that cannot be reached at start (in Kubernetes it often comes up after the
sidecar) does not stop the start: the receivers listen and acknowledge into the spool, readiness
says what serve waits for, and a thread tries the server again with capped backoff; once it
answers, the store parts start as a normal start would (migrations, replay, writer, assembler,
workers). A server that answers and refuses (password, rights, a migration) ends the wait:
`store_failure`, which `serve` exits with. The embedded store is local and is never waited for.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import random
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import grpc

from agenttrail.collector.assembler import Assembler
from agenttrail.collector.canonical import SpanLimits
from agenttrail.collector.config import SidecarConfig
from agenttrail.collector.errors import AgentTrailError, ConfigError, StoreError, StoreUnavailable
from agenttrail.collector.grpc_process import RECEIVER_SPOOL, GrpcReceiverProcess, adopt_leftovers
from agenttrail.collector.grpc_receiver import GrpcReceiver
from agenttrail.collector.inflight import InFlightBytes
from agenttrail.collector.ingest import IngestPipeline
from agenttrail.collector.queries import TrajectoryFilter, query_trajectories
from agenttrail.collector.schema import MIGRATIONS, Migration, Retention, apply_retention, combine, migrate
from agenttrail.collector.store import Store, StoreLocation, parse_store
from agenttrail.collector.store_lock import LockHolder, StoreLock, read_lock_holder  # noqa: F401  re-exported

if TYPE_CHECKING:  # the HTTP front (uvicorn, Starlette) loads in start(): read commands start fast
    from starlette.types import ASGIApp

    from agenttrail.collector.http_receiver import HttpReceiver, PageRoute, ReadRoute

log = logging.getLogger(__name__)

# How long stop() waits for the assembler's chunk in hand before closing the stores.
ASSEMBLER_STOP_WAIT_S = 30.0
# Waits between tries of a ClickHouse server unreachable at start: doubling from the first to the
# longest (a server that comes up is found within half a minute; a fleet of sidecars waiting
# for one server asks it about twice a minute each), each spread by +-20% so they do not ask at once.
STORE_RETRY_FIRST_S = 1.0
STORE_RETRY_MAX_S = 30.0
# How long stop() waits for a store start in progress (a connect, migrations) to end.
STORE_CONNECT_STOP_WAIT_S = 60.0


@dataclasses.dataclass(slots=True)
class StoreWait:
    """serve's wait for a ClickHouse server it could not reach at start."""

    started_at: float  # monotonic
    timeout_s: float  # 0: wait for ever
    attempts: int = 1
    last_error: str = ""
    next_attempt_at: float = 0.0  # monotonic

    def describe(self, location: StoreLocation) -> dict[str, Any]:
        """The readiness detail: what serve waits for and what it does meanwhile."""
        now = time.monotonic()
        waited = now - self.started_at
        message = (
            f"serve cannot reach its store, {location.describe()} (database {location.database}), and "
            f"is retrying (attempt {self.attempts}, {waited:.0f} s so far"
            + (f", giving up after {self.timeout_s:g} s" if self.timeout_s else "")
            + "): spans are acknowledged into the spool and stored once it answers"
        )
        return {
            "state": "retrying",
            "message": message,
            "url": location.public_url(),
            "database": location.database,
            "attempts": self.attempts,
            "waiting_s": round(waited, 1),
            "next_attempt_in_s": round(max(0.0, self.next_attempt_at - now), 1),
            "timeout_s": self.timeout_s or None,
            "last_error": self.last_error,
        }


def ensure_writable(directory: Path, what: str, option: str) -> None:
    """Create `directory` and write a probe file in it, or raise ConfigError saying what is wrong
    and what to do: a read-only mount or missing permission would otherwise surface as a raw
    OSError from deep inside the lock, the spool or chDB."""
    probe = directory / f".agenttrail-write-probe-{os.getpid()}"
    existing = next((path for path in (directory, *directory.parents) if path.exists()), None)
    if existing is not None and not existing.is_dir():  # no mount or permission would help
        raise ConfigError(
            f"cannot use {directory} as the {what}: {existing} is a file, not a directory. "
            f"Choose another directory with {option}"
        )
    try:
        directory.mkdir(parents=True, exist_ok=True)
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise ConfigError(
            f"cannot write the {what} {directory} ({reason}): agenttrail serve keeps its data there. "
            f"Mount it read-write, give the user running agenttrail (uid {os.geteuid()}) write access "
            f"(chown/chmod), or choose another directory with {option}"
        ) from exc


def ensure_listenable(address: str, what: str, option: str) -> None:
    """Raise the receiver's own ConfigError if `address`'s port is taken, by binding it once and
    closing it: serve checks before it creates or migrates a store, so a port clash leaves no new
    store directory behind. An address this cannot read (a name gRPC resolves its own way) or a
    failure other than the port being taken is left to the receiver, which says what it is."""
    import errno
    import socket

    host, _, port = address.rpartition(":")
    host = host.strip("[]") or "0.0.0.0"
    try:
        number = int(port)
    except ValueError:
        return
    if number == 0:
        return
    try:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        probe = socket.create_server((host, number), family=family)
    except OSError as exc:
        if exc.errno in (errno.EADDRINUSE, errno.EACCES):
            raise ConfigError(
                f"cannot listen for {what} on {address}: {exc.strerror}; give another address with {option}"
            ) from exc
        return
    probe.close()


class Worker(Protocol):
    """A background service the sidecar starts, stops and watches (e.g. the evaluator)."""

    name: str

    def start(self) -> None: ...
    def stop(self, timeout_s: float = 10.0) -> None: ...
    def alive(self) -> bool: ...


class Sidecar:
    def __init__(self, config: SidecarConfig, migrations: Iterable[Migration] = MIGRATIONS) -> None:
        self.config = config
        self.location: StoreLocation = parse_store(config.store, config.database)
        self._lock = (
            StoreLock(self.location.path, self.location.database) if self.location.path is not None else None
        )
        self.store: Store | None = None
        self.pipeline: IngestPipeline | None = None
        self.assembler: Assembler | None = None
        # In-process OTLP/gRPC receiver; with `grpc_process` only serve's internal port for the
        # other gRPC services (the evaluation API), which the receiver process forwards to.
        self.grpc: GrpcReceiver | None = None
        self.grpc_process: GrpcReceiverProcess | None = None
        self.http: HttpReceiver | None = None
        self.workers: list[Worker] = []
        self._read_routes: dict[str, ReadRoute] = {}
        self._page_routes: dict[str, PageRoute] = {}
        self._mounts: list[tuple[str, ASGIApp]] = []
        # (what, path) of the pages and apps a person opens, which `serve` prints with its address.
        self.announced: list[tuple[str, str]] = []
        self._grpc_handlers: list[grpc.GenericRpcHandler[Any, Any]] = []
        # The schema start() applies: the collector's, or the composition root's whole list.
        self.migrations: tuple[Migration, ...] = combine(migrations)
        # Called after trajectories are written (extensions subscribe before start()).
        self.on_assembled: list[Callable[[], None]] = []
        # Extra /healthz entries, e.g. {"judges": fn}; informative, they never fail the check.
        self.health_details: dict[str, Callable[[], Any]] = {}
        # What re-reads its part of the config file without a restart (SIGHUP to serve); each
        # raises AgentTrailError to refuse, keeping what it had in force.
        self.on_reload: list[Callable[[], Any]] = []
        self._stores: list[Store] = []
        # How the store is opened (a seam for tests that need a store to appear late); each call
        # a new client, raising StoreUnavailable while the server cannot be reached.
        self.store_opener: Callable[[], Store] = lambda: Store(self.location, engine_nice=config.engine_nice)
        # Set when the store parts run (writer, assembler, workers): liveness watches them then.
        self._storage_started = False
        self._store_wait: StoreWait | None = None
        self._connector: threading.Thread | None = None
        self._connect_stop = threading.Event()
        self._store_open = threading.Event()
        self._transition = threading.Lock()  # one store start at a time, and stop() after it
        # Why the wait for the store ended without one (refused, timed out): `serve` exits with it.
        self.store_failure: AgentTrailError | None = None
        trajectories_store = self.lazy_store()
        self.add_read_route(
            "/api/v1/trajectories",
            lambda params: query_trajectories(trajectories_store(), TrajectoryFilter.from_params(params)),
        )

    def spool_dir(self) -> Path:
        if self.config.spool_dir:
            return Path(self.config.spool_dir)
        if self.location.path is not None:
            return self.location.path / "spool"
        return Path("agenttrail-spool")

    def add_worker(self, worker: Worker) -> None:
        self.workers.append(worker)

    def add_read_route(self, path: str, route: ReadRoute) -> None:
        self._read_routes[path] = route
        if self.http is not None:
            self.http.add_read_route(path, route)

    def add_page_route(self, path: str, route: PageRoute, *, announce: str | None = None) -> None:
        """A GET page with its own content type (e.g. Prometheus `/metrics`); `announce` as for
        mount_app."""
        self._page_routes[path] = route
        if announce is not None:
            self.announced.append((announce, path))
        if self.http is not None:
            self.http.add_page_route(path, route)

    def mount_app(self, prefix: str, app: ASGIApp, *, announce: str | None = None) -> None:
        """Serve an ASGI app (e.g. a Starlette app) under `prefix` (e.g. "/console") on the HTTP port;
        `announce` names it in the lines `serve` prints at start (e.g. "web console").

        The app gets the requests under `prefix` with `root_path` = prefix, and does its own auth:
        the configured token is `self.config.bearer_token` (None when auth is off); check it with
        `agenttrail.collector.auth.bearer_ok(request.headers.get("authorization"), token)`.
        """
        from agenttrail.collector.http_app import unavailable_while

        app = unavailable_while(app, self.store_not_open)  # a clear 503 while serve waits for it
        self._mounts.append((prefix, app))
        if announce is not None:
            self.announced.append((announce, prefix + "/"))  # the app's root (the bare prefix redirects)
        if self.http is not None:
            self.http.mount(prefix, app)

    def add_grpc_handler(self, handler: grpc.GenericRpcHandler[Any, Any]) -> None:
        """Another gRPC service on the OTLP/gRPC port (e.g. the evaluation API); before start()."""
        self._grpc_handlers.append(handler)

    def new_store(self) -> Store:
        """Another client to the store, for a thread of its own; StoreUnavailable while serve
        waits for its server (read routes answer 503 with the message)."""
        why = self.store_not_open()
        if why is not None:
            raise StoreUnavailable(why)
        return self._clone_store()

    def lazy_store(self) -> Callable[[], Store]:
        """A client of its own for a part's read routes, opened on their first request (the
        store may open after the routes are added: serve waiting for its server)."""
        opened: list[Store] = []

        def get() -> Store:
            if not opened:
                opened.append(self.new_store())
            return opened[0]

        return get

    def store_not_open(self) -> str | None:
        """Why there is no store to read yet (serve waits for its server), or None."""
        if self._store_open.is_set():
            return None
        wait = self._store_wait
        if wait is None:
            return "the sidecar has not opened its store (start() first)"
        return (
            f"{wait.describe(self.location)['message']}; last error: {wait.last_error.rstrip('.')}. "
            "Reads work once it answers; /readyz says when"
        )

    def store_up(self) -> bool:
        """Whether the store is open and answered the writer's last statement (`/metrics`)."""
        return self._store_open.is_set() and self.pipeline is not None and not self.pipeline.store_down

    def wait_for_store(self, timeout_s: float) -> bool:
        """Wait until the store parts run (at once unless start() is waiting for the server)."""
        return self._store_open.wait(timeout_s)

    def start(self) -> None:
        config = self.config
        # Ports first, so a clash creates nothing; a store another serve holds is named by its
        # lock below instead, which says more than its port would.
        path = self.location.path
        if path is None or not path.is_dir() or read_lock_holder(path, self.location.database) is None:
            ensure_listenable(config.grpc, "OTLP/gRPC", "--grpc (AGENTTRAIL_GRPC, collector.grpc)")
            ensure_listenable(config.http, "OTLP/HTTP", "--http (AGENTTRAIL_HTTP, collector.http)")
        if self.location.path is not None:
            ensure_writable(self.location.path, "embedded store directory", "--store (AGENTTRAIL_STORE)")
        ensure_writable(self.spool_dir(), "spool directory", "--spool-dir (AGENTTRAIL_SPOOL_DIR)")
        if self._lock is not None:
            self._lock.acquire({"http": config.http, "grpc": config.grpc, "starting": True})
        try:
            self._start(config)
        except BaseException:
            self.stop()
            raise

    def _start(self, config: SidecarConfig) -> None:
        adopt_leftovers(self.spool_dir())  # an earlier run's receiver process left them
        # Built before the store: it acknowledges into the spool whether or not a server answers.
        self.pipeline = IngestPipeline(
            None,
            self.spool_dir(),
            batch_max_rows=config.batch_max_spans,
            insert_block_rows=config.insert_block_spans,
            flush_interval_s=config.flush_interval_s,
            max_queue_rows=config.max_queue_spans,
            max_wait_s=config.ingest_max_wait_s,
            spool_fsync=config.spool_fsync,
            limits=SpanLimits(max_age_days=config.span_max_age_days, max_future_s=config.span_max_future_s),
        )
        try:
            self._open_store_and_start_on_it()
        except StoreUnavailable as exc:
            if self.location.embedded or self._storage_started:  # local: nothing comes up by waiting
                raise
            self._begin_store_wait(exc)
        self._start_receivers(config)
        if self._store_wait is not None:
            self._connector = threading.Thread(
                target=self._connect_loop, name="agenttrail-store-connect", daemon=True
            )
            self._connector.start()

    def _open_store(self) -> None:
        """Open the store, migrate it and apply retention; raises StoreUnavailable while the
        server cannot be reached, another StoreError when it answers and refuses."""
        config = self.config
        # Only ClickHouse's threads step aside, never a Python thread that may hold the GIL
        # (docs/performance.md, branch ack18): the receivers never query the store.
        store = self.store_opener()
        try:
            _log_engine_allocator(store, config.engine_dirty_decay_ms, config.engine_oversize_threshold_bytes)
            migrate(store, self.migrations)
            apply_retention(
                store,
                Retention(
                    config.retention_spans_days,
                    config.retention_trajectories_days,
                    config.retention_scores_days,
                ),
            )
        except BaseException:
            store.close()
            raise
        self.store = store

    def _open_store_and_start_on_it(self) -> None:
        """`_open_store` then `_start_storage`. A server lost between the two (after the
        migrations, before the writer runs) is undone, so the caller can wait for it again."""
        self._open_store()
        try:
            self._start_storage()
        except StoreUnavailable as exc:
            if not self._storage_started:
                self._abandon_storage(exc)
            raise

    def _abandon_storage(self, exc: StoreUnavailable) -> None:
        """Undo a `_start_storage` that lost the server before anything ran on it: its clients
        closed, the pipeline detached (acknowledging into the spool again)."""
        why = self.location.redact(str(exc))
        log.warning(
            "lost the store after migrating it, before the writer started (%s); waiting for it again", why
        )
        assert self.pipeline is not None
        self.pipeline.detach(why)
        self.assembler = None
        for store in [*self._stores, self.store]:
            if store is not None:
                store.close()
        self._stores.clear()
        self.store = None

    def _start_storage(self) -> None:
        """What runs on the store, in order: assembler, spool replay, writer, workers."""
        config = self.config
        assert self.pipeline is not None
        self.assembler = Assembler(
            self._clone_store(),
            quiet_period_s=config.quiet_period_s,
            idle_timeout_s=config.idle_timeout_s,
            max_query_memory=config.assembly_max_memory_bytes,
            max_traces_per_query=config.assembly_max_traces,
            max_pending_traces=config.assembly_max_pending_traces,
        )
        self.assembler.listeners.extend(self.on_assembled)
        self.pipeline.attach(self._clone_store(), on_stored=self.assembler.notify)
        self.pipeline.replay()
        self.assembler.recover()
        self.pipeline.start()
        self.assembler.start()
        self._store_open.set()  # workers and read routes may open clients from here
        self._storage_started = True
        for worker in self.workers:
            worker.start()

    def _clone_store(self) -> Store:
        """A client while the store parts start (before the store counts as open)."""
        assert self.store is not None, "start() first"
        store = self.store.clone()
        self._stores.append(store)
        return store

    def _begin_store_wait(self, exc: StoreUnavailable) -> None:
        timeout_s = self.config.store_startup_timeout_s
        self._store_wait = StoreWait(
            started_at=time.monotonic(),
            timeout_s=timeout_s,
            last_error=self.location.redact(str(exc)),
            next_attempt_at=time.monotonic() + STORE_RETRY_FIRST_S,
        )
        assert self.pipeline is not None
        self.pipeline.waiting_for_store(self._store_wait.last_error)
        log.warning(
            "cannot reach the store at start (%s); serve starts without it: the receivers acknowledge "
            "into the spool and serve tries again with backoff (at most every %.0f s%s) until it "
            "answers. /readyz reports the wait",
            self._store_wait.last_error,
            STORE_RETRY_MAX_S,
            f", for {timeout_s:g} s (store_startup_timeout_s)" if timeout_s else "",
        )

    def _connect_loop(self) -> None:
        """Try the server until it answers, then start the store parts; or record why not."""
        wait = self._store_wait
        assert wait is not None
        delay = STORE_RETRY_FIRST_S
        while not self._connect_stop.wait(max(0.0, wait.next_attempt_at - time.monotonic())):
            wait.attempts += 1
            try:
                with self._transition:
                    if self._connect_stop.is_set():
                        return
                    self._open_store_and_start_on_it()
            except StoreUnavailable as exc:
                if self._storage_started:  # the store parts run: not undone; a restart waits again
                    self._fail(exc, "lost the store while starting on it")
                    return
                wait.last_error = self.location.redact(str(exc))
                assert self.pipeline is not None
                self.pipeline.waiting_for_store(wait.last_error)
                log.debug("store still unreachable (attempt %d): %s", wait.attempts, wait.last_error)
                waited = time.monotonic() - wait.started_at
                if wait.timeout_s and waited >= wait.timeout_s:
                    self._fail(
                        StoreUnavailable(
                            f"gave up waiting for the store after {waited:.0f} s and {wait.attempts} "
                            f"attempts (store_startup_timeout_s {wait.timeout_s:g}): {wait.last_error}"
                        ),
                        "",
                    )
                    return
                delay = min(delay * 2, STORE_RETRY_MAX_S)
                pause = delay * random.uniform(0.8, 1.2)
                if wait.timeout_s:  # one last try at the deadline
                    pause = min(pause, max(0.0, wait.started_at + wait.timeout_s - time.monotonic()))
                wait.next_attempt_at = time.monotonic() + pause
                continue
            except AgentTrailError as exc:
                self._fail(exc, "the store answered and refused")
                return
            except Exception as exc:  # a bug must end serve, not leave it waiting for ever
                log.exception("starting on the store failed unexpectedly")
                self._fail(StoreError(f"starting on the store failed unexpectedly: {exc}"), "")
                return
            log.info(
                "reached the store, %s, after %d attempts and %.0f s: migrations applied, the writer "
                "stores what was spooled meanwhile",
                self.location.describe(),
                wait.attempts,
                time.monotonic() - wait.started_at,
            )
            return

    def _fail(self, exc: AgentTrailError, what: str) -> None:
        """End the wait with `exc` (its kind kept for serve's exit code), saying `what` happened."""
        message = self.location.redact(str(exc))
        if what:
            message = f"{what}: {message}"
        try:
            failure: AgentTrailError = type(exc)(message)
        except TypeError:  # a kind that takes more than a message
            failure = StoreError(message)
        self.store_failure = failure
        log.error("%s", failure)

    def _start_receivers(self, config: SidecarConfig) -> None:
        from agenttrail.collector.http_receiver import HttpReceiver, ServerLimits

        assert self.pipeline is not None
        cert = Path(config.tls_cert).read_bytes() if config.tls_cert else None
        # One in-flight byte budget for both receivers: memory stays bounded under overload.
        limiter = InFlightBytes(config.max_inflight_bytes)
        key = Path(config.tls_key).read_bytes() if config.tls_key else None
        if config.grpc_process:
            self._start_grpc_process(config, limiter)
        else:
            self.grpc = GrpcReceiver(
                self.pipeline,
                config.grpc,
                max_body_bytes=config.max_body_bytes,
                bearer_token=config.bearer_token,
                tls_cert=cert,
                tls_key=key,
                extra_handlers=self._grpc_handlers,
                limiter=limiter,
            )
        self.http = HttpReceiver(
            self.pipeline,
            config.http,
            max_body_bytes=config.max_body_bytes,
            bearer_token=config.bearer_token,
            tls_cert_file=config.tls_cert,
            tls_key_file=config.tls_key,
            read_routes=self._read_routes,
            page_routes=self._page_routes,
            health=self.health,
            liveness=self.liveness,
            limiter=limiter,
            health_auth=config.health_auth,
            metrics_auth=config.metrics_auth,
            body_timeout_s=config.http_body_timeout_s,
            limits=ServerLimits(
                header_timeout_s=config.http_header_timeout_s,
                keepalive_timeout_s=config.http_keepalive_timeout_s,
                max_connections=config.http_max_connections,
            ),
        )
        for prefix, app in self._mounts:
            self.http.mount(prefix, app)
        if self.grpc is not None:
            self.grpc.start()  # before the receiver process: it forwards to this port
        if self.grpc_process is not None:
            self.grpc_process.start()
        self.http.start()
        if self._lock is not None:
            self._lock.update({"http": self.http.address, "grpc": self.grpc_address})
        log.info(
            "agenttrail collector on %s: OTLP/gRPC %s%s, OTLP/HTTP %s",
            self.location.describe(),
            self.grpc_address,
            " (receiver process)" if self.grpc_process else "",
            self.http.address,
        )

    def _start_grpc_process(self, config: SidecarConfig, limiter: InFlightBytes) -> None:
        """OTLP/gRPC in a process of its own; the other gRPC services on an internal port
        (both started with the other receivers)."""
        from agenttrail.collector.grpc_front import FrontSettings

        assert self.pipeline is not None
        if self._grpc_handlers:
            self.grpc = GrpcReceiver(
                self.pipeline,
                "127.0.0.1:0",
                bearer_token=config.bearer_token,
                extra_handlers=self._grpc_handlers,
                limiter=limiter,
                serve_otlp=False,
            )
        self.grpc_process = GrpcReceiverProcess(
            self.pipeline,
            FrontSettings(
                address=config.grpc,
                spool_dir=str(self.spool_dir() / RECEIVER_SPOOL),
                limits=self.pipeline.limits,
                batch_max_rows=config.batch_max_spans,
                flush_interval_s=config.flush_interval_s,
                max_queue_rows=config.max_queue_spans,
                spool_fsync=config.spool_fsync,
                max_wait_s=config.ingest_max_wait_s,
                max_body_bytes=config.max_body_bytes,
                max_inflight_bytes=config.max_inflight_bytes,
                bearer_token=config.bearer_token,
                tls_cert=config.tls_cert,
                tls_key=config.tls_key,
                forward_to=self.grpc.address if self.grpc is not None else None,
                log_level=logging.getLogger("agenttrail").getEffectiveLevel(),
            ),
        )

    @property
    def grpc_address(self) -> str | None:
        """Where agents send OTLP/gRPC."""
        if self.grpc_process is not None:
            return self.grpc_process.address
        return self.grpc.address if self.grpc is not None else None

    def liveness(self) -> tuple[bool, dict[str, Any]]:
        """Whether the process and its workers run (`/livez`); the store's state is readiness."""
        dead = self.dead_workers()
        return not dead, {"dead_workers": dead}

    def health(self) -> tuple[bool, dict[str, Any]]:
        """Readiness (`/readyz`, `/healthz`): workers alive, the store up, the backlog."""
        dead = self.dead_workers()
        store_down = self.pipeline.store_down if self.pipeline else True
        detail: dict[str, Any] = {
            "store": "down" if store_down else "ok",
            "queued_spans": (self.pipeline.queued_rows if self.pipeline else 0)
            + (self.grpc_process.open_spans if self.grpc_process else 0),
            "inflight_bytes": self.http.limiter.held if self.http else 0,
            "stored_spans": self.pipeline.counters.stored_spans if self.pipeline else 0,
            "rejected_spans": self.pipeline.counters.rejected_spans if self.pipeline else 0,
            "pending_traces": self.assembler.pending_count if self.assembler else 0,
            # Of those, held in memory (assembly_max_pending_traces), and how many new traces
            # were not held since start (read back from trace_arrivals as room freed).
            "pending_traces_held": self.assembler.held_count if self.assembler else 0,
            "traces_not_held": self.assembler.overflowed_traces if self.assembler else 0,
            "dead_workers": dead,
        }
        ready = True
        if self.pipeline is not None:
            # Store reachability, writer backlog, quarantine and disk, each on its own.
            ready, detail["ingest"] = self.pipeline.readiness()
        if self.grpc_process is not None:
            stats = dict(self.grpc_process.stats)
            counters = self.grpc_process.counters()
            detail["rejected_spans"] += counters["rejected_spans"]
            detail["grpc_receiver_process"] = {
                "alive": self.grpc_process.alive(),
                "restarts": self.grpc_process.restarts,
                **stats,
                **counters,
            }
            if stats.get("disk_error"):
                ready = False  # it cannot write its spool: gRPC clients get UNAVAILABLE
        wait = self._store_wait
        if wait is not None and not self._store_open.is_set():
            detail["store"] = "unreachable"
            detail["store_wait"] = wait.describe(self.location)
            return False, detail  # the evaluators' details read the store: not before it opens
        for key, describe in self.health_details.items():
            detail[key] = describe()
        return not dead and not store_down and ready, detail

    def ingest_counters(self) -> dict[str, dict[str, int]]:
        """The receivers' monotonic counters by process, for `/metrics`: "serve" (its pipeline's,
        which with `grpc_process` include the segments the receiver process handed in) and
        "grpc_receiver" (what the receiver processes acknowledged and refused, restarts summed,
        and `receiver_restarts`)."""
        counters: dict[str, dict[str, int]] = {}
        if self.pipeline is not None:
            counters["serve"] = dataclasses.asdict(self.pipeline.counters)
        if self.grpc_process is not None:
            counters["grpc_receiver"] = {
                **self.grpc_process.counters(),
                "receiver_restarts": self.grpc_process.restarts,
            }
        return counters

    def reload(self) -> bool:
        """Each `on_reload` in turn (SIGHUP); a refused one is logged and keeps its old settings.
        True when none refused."""
        return not self.reload_problems()

    def reload_problems(self) -> list[str]:
        """Each `on_reload` in turn (SIGHUP, `POST /-/reload`): what each that refused or failed
        said (logged too; it keeps its old settings), empty when all took their sections."""
        problems = []
        for reload in self.on_reload:
            try:
                reload()
            except AgentTrailError as exc:
                log.error("reload refused, the settings in force stay as they were: %s", exc)
                problems.append(str(exc))
            except Exception as exc:  # a bug in one extension's reload must not end serve (SIGHUP)
                log.exception("reload failed unexpectedly, the settings in force stay as they were")
                problems.append(f"reload failed unexpectedly: {exc!r}")
        return problems

    def dead_workers(self) -> list[str]:
        """What should run and does not; the store parts only once they started (serve may be
        waiting for its server)."""
        parts: list[tuple[str, Any]] = [("http", self.http)]
        if self._storage_started:
            parts += [("writer", self.pipeline), ("assembler", self.assembler)]
        dead = [name for name, part in parts if part and not part.alive()]
        if self.grpc_process is not None and not self.grpc_process.alive():
            dead.append(self.grpc_process.name)
        if not self._storage_started:
            return dead
        return dead + [worker.name for worker in self.workers if not worker.alive()]

    def wait_until_assembled(self, timeout_s: float = 60.0) -> bool:
        """Store everything accepted so far and assemble every trace it touched."""
        assert self.pipeline is not None, "start() first"
        assert self.assembler is not None, "start() first"
        deadline = time.monotonic() + timeout_s
        if not self.flush(timeout_s):
            return False
        return self.assembler.wait_idle(max(0.0, deadline - time.monotonic()))

    def flush(self, timeout_s: float = 30.0) -> bool:
        """Store everything acknowledged so far (the receiver process's too). True if it was
        within the timeout."""
        assert self.pipeline is not None, "start() first"
        deadline = time.monotonic() + timeout_s
        if self.grpc_process is not None and not self.grpc_process.flush(timeout_s):
            return False
        return self.pipeline.flush(max(0.0, deadline - time.monotonic()))

    def stop(self) -> None:
        """Stop accepting, store what was accepted, stop workers; safe to call twice."""
        self._connect_stop.set()
        if self._connector is not None:
            self._connector.join(STORE_CONNECT_STOP_WAIT_S)  # a connect or migration in hand
            self._connector = None
        if self.grpc_process is not None:
            self.grpc_process.stop()  # hands over what it spooled before the writer stops
            self.grpc_process = None
        if self.grpc is not None:
            self.grpc.stop()
            self.grpc = None
        if self.http is not None:
            self.http.stop()
            self.http = None
        for worker in reversed(self.workers):
            worker.stop()
        if self.pipeline is not None:
            self.pipeline.stop()
            self.pipeline = None
        if self.assembler is not None:
            # Before the stores close: the assembler ends at its next chunk, which under load
            # can take longer than a worker's usual 10 s wait. Past this wait the store closes
            # under it and it ends quietly; its traces are assembled after the next start.
            self.assembler.stop(timeout_s=ASSEMBLER_STOP_WAIT_S)
            if self.assembler.alive():
                log.warning(
                    "the assembler did not finish its chunk within %.0f s; its traces are assembled "
                    "after the next start",
                    ASSEMBLER_STOP_WAIT_S,
                )
            self.assembler = None
        for store in self._close_order():
            store.close()
        self._stores.clear()
        self.store = None
        if self._lock is not None:
            self._lock.release()

    def _close_order(self) -> Iterable[Store]:
        yield from self._stores
        if self.store is not None:
            yield self.store


def _log_engine_allocator(store: Store, wanted_ms: int, wanted_oversize: int) -> None:
    """Say, read back from the engine, how long its allocator keeps freed memory: serve sets it
    before chdb loads (allocators.py); a process that loaded chdb earlier keeps its own."""
    from agenttrail.collector.allocators import engine_allocator

    try:
        actual, oversize = engine_allocator(store)
    except StoreError:  # an engine without the table: nothing to report
        return
    if oversize is not None:
        log.info(
            "embedded engine's allocator returns freed blocks of %d bytes and more at once "
            "(engine_oversize_threshold_bytes %d)",
            oversize,
            wanted_oversize,
        )
    if actual is None:
        return
    if actual == wanted_ms:
        log.info("embedded engine's allocator returns freed memory after %d ms", actual)
    else:
        log.info(
            "embedded engine's allocator returns freed memory after %d ms (engine_dirty_decay_ms %d "
            "applies when serve loads the engine, unless JE_MALLOC_CONF is set)",
            actual,
            wanted_ms,
        )

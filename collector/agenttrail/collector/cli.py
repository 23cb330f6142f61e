"""`agenttrail` command line: the collector's commands (serve, trajectories, spool, schema, migrate,
config) and what every command module shares (store options, reading through a running sidecar,
errors).

`make_cli(wiring)` builds the group; the wiring says which sidecar `serve` builds, which
migrations `schema` prints and which config sections belong to others. `cli` here is the
collector alone; the full `agenttrail` (agenttrail.evaluators.cli.main) passes the evaluators'
composition root, so the collector never imports the evaluators.

Read commands work while `serve` holds the embedded store: they find the running sidecar
through the store's lock file and ask its HTTP API instead of opening the directory.

Importing this module must stay cheap (`agenttrail --help` and reads through serve start in a
fraction of a second): the sidecar, the ClickHouse driver and the evaluators' heavy libraries
load inside the commands that use them, never at the top of a command module.

Exit codes, for every command: 0 done; 1 failed otherwise; 2 usage error (a bad option or
argument); 3 bad input (a file or rows that cannot be used); 4 store unavailable (the store or
the sidecar holding it cannot be reached, or another process holds it).
"""

from __future__ import annotations

import contextlib
import importlib
import json
import logging
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import click

from agenttrail.collector.auth import sent_token
from agenttrail.collector.config import DEFAULT_STORE, SETTINGS, SidecarConfig, load_settings
from agenttrail.collector.durations import format_duration
from agenttrail.collector.errors import AgentTrailError, ConfigError, StoreLocked, StoreUnavailable
from agenttrail.collector.queries import QueryError, TrajectoryFilter, parse_time
from agenttrail.collector.schema import MIGRATIONS, Migration, Retention, migrate
from agenttrail.collector.settings import Kind, Section, Setting
from agenttrail.collector.store import Store, parse_store
from agenttrail.collector.store_lock import StoreLock, read_lock_holder

if TYPE_CHECKING:
    from agenttrail.collector.config import Settings
    from agenttrail.collector.sidecar import Sidecar

log = logging.getLogger("agenttrail")

EXIT_BAD_INPUT = 3
EXIT_STORE_UNAVAILABLE = 4


class BadInput(click.ClickException):
    """A file or rows the user gave cannot be used (exit 3)."""

    exit_code = EXIT_BAD_INPUT


class NoStore(click.ClickException):
    """The store, or the sidecar holding it, cannot be reached or is held by another process (exit 4)."""

    exit_code = EXIT_STORE_UNAVAILABLE


def cli_error(exc: AgentTrailError) -> click.ClickException:
    """Our error as the CLI's, with the documented exit code."""
    if isinstance(exc, StoreUnavailable | StoreLocked):
        return NoStore(str(exc))
    if isinstance(exc, ConfigError):
        return BadInput(str(exc))
    return click.ClickException(str(exc))


def store_options(function: Callable[..., Any]) -> Callable[..., Any]:
    """--store/--database/--config, shared by every command that reads or writes data."""
    function = click.option(
        "--config",
        "config_file",
        type=click.Path(dir_okay=False),
        envvar="AGENTTRAIL_CONFIG",
        help="YAML config file (sections collector:, drift:, judges: ...; `agenttrail config show` "
        "prints what it sets) [env AGENTTRAIL_CONFIG; default: none].",
    )(function)
    for setting in reversed([setting for setting in SETTINGS if setting.name in ("store", "database")]):
        option = click.option(setting.flag, setting.name, default=None, help=_option_help(setting))
        function = option(function)
    return function


def config_from(options: dict[str, Any], config_file: str | None) -> SidecarConfig:
    """The collector's settings for a command: its flags > env > the file > defaults. The file's
    other sections are checked against their tables (keys, types); their own parsers run where
    they are used (`serve` builds them all, `config show` runs them all)."""
    return settings_from(options, config_file).config


def settings_from(
    options: dict[str, Any], config_file: str | None, *, check_sections: bool = False
) -> Settings:
    try:
        return load_settings(
            options,
            config_file=config_file,
            sections=current_wiring().config_sections,
            check_sections=check_sections,
        )
    except AgentTrailError as exc:
        raise cli_error(exc) from exc


def emit_rows(
    rows: Sequence[dict[str, Any]],
    output_format: str,
    *,
    empty: str,
    headers: Sequence[str],
    cells: Callable[[dict[str, Any]], Sequence[Any]],
) -> None:
    """Print read-command results: one JSON object per line, or a table (a note on stderr if empty)."""
    if output_format == "json":
        for row in rows:
            click.echo(json.dumps(row, ensure_ascii=False))
    elif not rows:
        click.echo(empty, err=True)
    else:
        click.echo(format_table(headers, [cells(row) for row in rows]))


def format_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [[str(h) for h in headers]] + [["" if v is None else str(v) for v in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = [
        "  ".join(value.ljust(width) for value, width in zip(row, widths, strict=True)).rstrip()
        for row in cells
    ]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)


class SidecarApi:
    """The running sidecar's read API, for when it holds the embedded store."""

    def __init__(self, base_url: str, token: str | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.token = token

    def post_json(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """POST `body` as JSON to the sidecar's write API; its JSON answer."""
        lines = self._call(path, json.dumps(body).encode())
        return lines[0] if lines else {}

    def get_lines(self, path: str, params: dict[str, str]) -> list[dict[str, Any]]:
        import urllib.parse

        return self._call(f"{path}?{urllib.parse.urlencode(params)}", None)

    def _call(self, path: str, data: bytes | None) -> list[dict[str, Any]]:
        import urllib.error  # here, not at the top: `--help` does not need http.client
        import urllib.request

        request = urllib.request.Request(f"{self.base_url}{path}", data=data)
        if data is not None:
            request.add_header("Content-Type", "application/json")
        if self.token:
            request.add_header("Authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                body = response.read().decode()
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode(errors="replace")
            with contextlib.suppress(ValueError):
                detail = json.loads(detail).get("message", detail)
            if exc.code == 400:
                raise click.BadParameter(str(detail)) from exc
            if exc.code == 422:  # the sidecar refused a file the user gave it (e.g. its config)
                raise BadInput(str(detail)) from exc
            hint = ""
            if exc.code == 401:  # read commands have no token option: say where theirs comes from
                hint = (
                    "; give this command serve's token in AGENTTRAIL_BEARER_TOKEN (or bearer_token "
                    "under collector: in its --config file)"
                    if not self.token
                    else "; the token this command sent (AGENTTRAIL_BEARER_TOKEN or collector.bearer_token) "
                    "is not serve's"
                )
            raise click.ClickException(
                f"the sidecar at {self.base_url} answered {exc.code}: {detail}{hint}"
            ) from exc
        except urllib.error.URLError as exc:
            raise NoStore(
                f"cannot reach the sidecar at {self.base_url} ({exc.reason}); is `agenttrail serve` running?"
            ) from exc
        return [json.loads(line) for line in body.splitlines() if line.strip()]


def running_sidecar(config: SidecarConfig, server: str | None) -> SidecarApi | None:
    """The sidecar to ask: an explicit URL, or the one holding the embedded store (None: none)."""
    if server:
        return SidecarApi(server, sent_token(config.bearer_token))
    try:
        location = parse_store(config.store, config.database)
        if location.path is None:
            return None
        holder = read_lock_holder(location.path, location.database)
        deadline = time.monotonic() + 60
        while holder is not None and holder.starting and time.monotonic() < deadline:
            time.sleep(0.2)  # the sidecar is still migrating or replaying its spool
            holder = read_lock_holder(location.path, location.database)
    except AgentTrailError as exc:
        raise cli_error(exc) from exc
    if holder is not None and holder.starting:
        raise NoStore(f"{holder.describe()} is still starting; try again shortly")
    if holder is not None and holder.http:
        scheme = "https" if config.tls_cert else "http"
        return SidecarApi(f"{scheme}://{holder.http}", sent_token(config.bearer_token))
    return None


def read_via(config: SidecarConfig, server: str | None, *, create: bool = False) -> SidecarApi | Store:
    """Where read commands get their data: an explicit sidecar URL, the sidecar holding the
    embedded store, or the store itself (`create`: a missing embedded store is created, for
    commands that write)."""
    api = running_sidecar(config, server)
    if api is not None:
        return api
    try:
        location = parse_store(config.store, config.database)
        if not create and location.path is not None and not location.path.exists():
            # The default store is what a command without serve's --config falls back to.
            from_config = (
                "; if serve runs from a config file, give this command the same one (--config FILE "
                "or AGENTTRAIL_CONFIG): it names serve's store"
                if config.store == DEFAULT_STORE
                else ""
            )
            raise NoStore(
                f"no store at {location.path} (the folder does not exist): check --store, or "
                f"create the store there first (`agenttrail serve --store {location.path}`, or a "
                f"command that writes to it){from_config}"
            )
        return Store(location)
    except AgentTrailError as exc:
        raise cli_error(exc) from exc


def read_rows(
    config: SidecarConfig,
    server: str | None,
    route: str,
    params: dict[str, str],
    local: Callable[[Store], list[dict[str, Any]]],
    migrations: Sequence[Migration] = (),
) -> list[dict[str, Any]]:
    """Rows from the running sidecar's `route` (while it holds the embedded store, or `--server`),
    else from `local` on the store itself, migrated first to `migrations`."""
    source = read_via(config, server)
    try:
        if isinstance(source, SidecarApi):
            return source.get_lines(route, params)
        try:
            if migrations:
                migrate(source, tuple(migrations))
            return local(source)
        finally:
            source.close()
    except QueryError as exc:
        raise click.BadParameter(str(exc)) from exc
    except AgentTrailError as exc:
        raise cli_error(exc) from exc


def short_help(text: str, limit: int) -> str:
    """`text` cut at a word to fit `limit` characters, as click shortens a command's help."""
    if len(text) <= limit:
        return text
    return text[: limit - 3].rsplit(" ", 1)[0].rstrip(",;:") + "..."


# What `--help` lists last, in this order: where a command reads from (as kubectl lists its
# connection flags last). Before them how it prints, and before that, on the commands that read
# runs, the shared run filters; the command's own options first (`scores --metric`).
WHERE_OPTIONS: Final = ("store", "database", "config_file", "server")
_OUTPUT_OPTIONS: Final = ("limit", "output_format", "fmt")
_RUN_FILTERS: Final = ("since", "until", "agent", "task", "trace_id")


def order_options(command: click.Command) -> None:
    """Sort `command`'s options (and its sub-commands') as WHERE_OPTIONS says; a stable sort, so
    arguments and each group keep their own order. serve keeps its settings table's order."""
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            order_options(sub)
    if command.name == "serve":
        return
    reads_runs = any(param.name == "since" for param in command.params)

    def rank(param: click.Parameter) -> int:
        if not isinstance(param, click.Option):
            return 0  # arguments are positional: never reordered
        name = param.name or ""
        if name in WHERE_OPTIONS:
            return 3 + WHERE_OPTIONS.index(name)
        if name in _OUTPUT_OPTIONS:
            return 2
        return 1 if reads_runs and name in _RUN_FILTERS else 0

    command.params.sort(key=rank)


class LazyGroup(click.Group):
    """A group whose heavier commands are imported only when one of them runs: `--help` lists
    them from a short help given at registration (a test keeps it equal to the command's own)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy: dict[str, tuple[str, str]] = {}
        self.wiring: Wiring | None = None  # set by make_cli

    def add_lazy_command(self, name: str, target: str, short_help: str) -> None:
        """`target` is `module:attribute`, the command loaded and added when first asked for."""
        self.lazy[name] = (target, short_help)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in self.lazy:
            module_name, _, attribute = self.lazy[cmd_name][0].partition(":")
            self.add_command(getattr(importlib.import_module(module_name), attribute), cmd_name)
        command = self.commands.get(cmd_name)
        if command is not None:  # here, not at add_command: a group's sub-commands come later
            order_options(command)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        limit = formatter.width - 6 - max((len(name) for name in self.list_commands(ctx)), default=0)
        rows = []
        for name in self.list_commands(ctx):
            command = self.commands.get(name)
            if command is None:
                rows.append((name, short_help(self.lazy[name][1], limit)))
            elif not command.hidden:
                rows.append((name, command.get_short_help_str(limit)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


@dataclass(frozen=True, slots=True)
class Wiring:
    """What a command group serves and prints, given by whoever builds the group."""

    build_sidecar: Callable[[SidecarConfig, str | None], Sidecar]
    schema_migrations: Sequence[Migration] = MIGRATIONS  # what `agenttrail schema` prints
    # The config file's other sections (the evaluators'), their settings and parsers; None: not
    # known here, so other top-level sections are skipped unchecked (the collector alone).
    config_sections: tuple[Section, ...] | None = None


def make_cli(wiring: Wiring) -> LazyGroup:
    """The `agenttrail` group with the collector's commands, wired as `wiring` says; the caller
    adds its own commands (or lazy ones: `add_lazy_command`)."""

    @click.group(
        name="cli",
        cls=LazyGroup,
        context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    )
    @click.option(
        "--log-level",
        default="info",
        envvar="AGENTTRAIL_LOG_LEVEL",
        show_default=True,
        show_envvar=True,
        type=click.Choice(["debug", "info", "warning", "error"], case_sensitive=False),
    )
    # The installed distribution's version (importlib.metadata, read only when asked).
    @click.version_option(package_name="agenttrail", prog_name="agenttrail", message="%(prog)s %(version)s")
    def group(log_level: str) -> None:
        """agenttrail: trace LLM agents with OpenTelemetry, rebuild their trajectories, evaluate them."""
        logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        if log_level.lower() != "debug":
            # The ClickHouse driver and its HTTP pool warn of each failed request that agenttrail
            # reports itself (StoreUnavailable: the URL and what to check), in lines of tracebacks.
            for name in ("urllib3.connectionpool", "clickhouse_connect.driver"):
                logging.getLogger(name).setLevel(logging.ERROR)

    assert isinstance(group, LazyGroup)
    group.wiring = wiring
    for command in (serve, trajectories, spool, schema, migrate_command, config):
        group.add_command(command)
    return group


def current_wiring() -> Wiring:
    """The wiring of the group running the current command (the collector's alone outside one)."""
    context = click.get_current_context(silent=True)
    root = context.find_root().command if context is not None else None
    if isinstance(root, LazyGroup) and root.wiring is not None:
        return root.wiring
    return COLLECTOR_WIRING


def _click_type(kind: Kind) -> click.ParamType[Any, Any]:
    """The click type of a setting's kind: numbers show and check as ranges, files and
    directories as paths, the rest as text."""
    if kind.python is bool:
        return click.BOOL
    if kind.python is int:
        return click.IntRange(min=None if kind.minimum is None else int(kind.minimum))
    if kind.python is float:
        return click.FloatRange(min=kind.minimum)
    if kind.path is not None:
        return click.Path(file_okay=kind.path == "file", dir_okay=kind.path == "dir")
    return click.STRING


def _shown(default: Any) -> str:
    return "none" if default is None else str(default).lower() if isinstance(default, bool) else str(default)


def _option_help(setting: Setting) -> str:
    where = f"env {setting.env}, file collector.{setting.name}"
    return f"{setting.help} [{where}; default: {_shown(setting.default)}]"


def _setting_options(function: Callable[..., Any]) -> Callable[..., Any]:
    """One option per collector setting (but --store/--database, which store_options gives),
    typed from the settings table; unset (None) lets the env, the file, then the default apply."""
    for setting in reversed(SETTINGS):
        if setting.name in ("store", "database"):
            continue
        function = click.option(
            setting.flag,
            setting.name,
            type=_click_type(setting.kind),
            metavar=setting.kind.metavar,
            default=None,
            help=_option_help(setting),
        )(function)
    return function


@click.command()
@store_options
@_setting_options
def serve(config_file: str | None, **options: Any) -> None:
    """Run the sidecar: OTLP receivers, span storage, trajectory assembly, with (in `agenttrail`)
    online scoring, judges, drift, alerts, and on the HTTP port /metrics, the web console
    (/console/) and MCP (/mcp/). Prints its addresses once it listens. A ClickHouse server that
    does not answer yet is waited for while spans are spooled (store_startup_timeout_s)."""
    config = config_from(options, config_file)  # the sections' parsers run as the sidecar is built
    from agenttrail.collector.allocators import configure_python_allocator

    # Before any thread starts: a thread keeps the malloc arena it got first.
    configure_python_allocator(config.malloc_arena_max, config.malloc_mmap_threshold_bytes)
    # The receivers' work is short bursts of Python among long-running background threads
    # (evaluator, metrics feed): each hand-over of the GIL to a receiver waits up to this interval
    # (1 ms, not Python's 5), and each wait for a core behind them is shorter when they run at a
    # lower OS priority (docs/performance.md). serve owns its process, an embedder does not.
    sys.setswitchinterval(config.gil_switch_interval_s)
    from agenttrail.collector.background import set_background_nice

    set_background_nice(config.background_nice)
    from agenttrail.collector.allocators import configure_engine_allocator

    # Before chdb loads: jemalloc reads its options once.
    configure_engine_allocator(config.engine_dirty_decay_ms, config.engine_oversize_threshold_bytes)
    try:
        sidecar = current_wiring().build_sidecar(config, config_file)
    except AgentTrailError as exc:
        raise cli_error(exc) from exc
    stop = threading.Event()
    reload = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    signal.signal(signal.SIGHUP, lambda *_: reload.set())  # as nginx and Prometheus: re-read config
    try:
        sidecar.start()
    except AgentTrailError as exc:
        raise cli_error(exc) from exc
    click.echo(
        f"agenttrail serving on {sidecar.location.describe()}: "
        f"OTLP/gRPC {sidecar.grpc_address or '-'}, "
        f"OTLP/HTTP {sidecar.http.address if sidecar.http else '-'}  (Ctrl-C to stop)",
        err=True,
    )
    if sidecar.http is not None:
        for what, path in sidecar.announced:
            click.echo(f"  {what}: http://{sidecar.http.address}{path}", err=True)
    exposed = [
        address
        for address in (sidecar.grpc_address, sidecar.http.address if sidecar.http else None)
        if address and not _loopback(address)
    ]
    if exposed and not config.bearer_token:
        click.echo(
            f"warning: {' and '.join(exposed)} reach beyond this machine and no bearer_token is set: "
            "anyone who can connect may send spans, read every run (console, /api/v1, the MCP sql "
            "tool) and change references. Set bearer_token (env AGENTTRAIL_BEARER_TOKEN) with "
            "tls_cert and tls_key, or bind 127.0.0.1.",
            err=True,
        )
    if not sidecar.wait_for_store(0):
        click.echo(
            f"  waiting for {sidecar.location.describe()}: spans are spooled until it answers (/readyz)",
            err=True,
        )
    exit_code = 0
    while not stop.wait(1.0):
        if sidecar.store_failure is not None:  # the server answered and refused, or the wait timed out
            sidecar.stop()
            raise cli_error(sidecar.store_failure)
        if reload.is_set():
            reload.clear()
            log.info("SIGHUP: reloading what can change without a restart (the judges and alerts sections)")
            sidecar.reload()
        dead = sidecar.dead_workers()
        if dead:
            log.error("worker(s) %s stopped unexpectedly; exiting so a supervisor can restart us", dead)
            exit_code = 1
            break
    click.echo("stopping: storing what was accepted...", err=True)
    sidecar.stop()
    sys.exit(exit_code)


def _loopback(address: str) -> bool:
    """Whether a bound ``host:port`` is reachable from this machine only."""
    import ipaddress

    host = address.rpartition(":")[0].strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a name: it may resolve to anything
        return False


def build_sidecar(config: SidecarConfig, config_file: str | None = None) -> Sidecar:
    """The collector's sidecar alone (the evaluators' is agenttrail.evaluators.composition's)."""
    from agenttrail.collector.sidecar import Sidecar

    return Sidecar(config)


def _time_option(value: str | None) -> Any:
    if value is None:
        return None
    try:
        return parse_time(value)
    except QueryError as exc:
        raise click.BadParameter(str(exc)) from exc


def run_filter_options(default_limit: int) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The options every read command shares: which runs, how many, in what format, from where."""
    options = [
        click.option(
            "--since", help="Runs started after: ISO 8601 or a duration back from now (15m, 2h, 7d)."
        ),
        click.option("--until", help="Runs started before, same forms as --since."),
        click.option("--agent", help="Only this agent."),
        click.option("--task", help="Only this task."),
        click.option(
            "--trace",
            "trace_id",
            help="Only this trace id, or a unique prefix of it (8+ hex, as tables print).",
        ),
        click.option("--limit", default=default_limit, show_default=True, type=click.IntRange(min=1)),
        click.option(
            "--format",
            "output_format",
            type=click.Choice(["table", "json"]),
            default="table",
            show_default=True,
        ),
        click.option(
            "--server",
            help="Read from a running sidecar's HTTP API at this URL (http://host:4318), "
            "sending serve's token from AGENTTRAIL_BEARER_TOKEN.",
        ),
    ]

    def decorate(function: Callable[..., Any]) -> Callable[..., Any]:
        for option in reversed(options):
            function = option(function)
        return function

    return decorate


def run_filter(
    since: str | None,
    until: str | None,
    agent: str | None,
    task: str | None,
    trace_id: str | None,
    limit: int,
) -> TrajectoryFilter:
    """The read options as a filter; a bad value is a usage error naming the option."""
    try:
        return TrajectoryFilter(_time_option(since), _time_option(until), agent, task, trace_id, limit)
    except QueryError as exc:
        raise click.BadParameter(str(exc)) from exc


def resolve_trace_id(config: SidecarConfig, server: str | None, trace_id: str | None) -> str | None:
    """The full trace id a prefix (8+ hex, as tables print them) stands for. A prefix no run has,
    or of two or more, is a usage error (exit 2, as for any argument that names nothing); a full
    id is taken as given (`check_trace_found` asks only when the command finds nothing, so a run
    that exists costs no second read: on the embedded store that read is a second engine start)."""
    if trace_id is None:
        return None
    from agenttrail.collector.service import trajectories_read

    trace_id = trace_id.strip().lower()
    try:
        read = trajectories_read(trace_id=trace_id, limit=1000)
    except QueryError as exc:
        raise click.BadParameter(str(exc), param_hint="trace id") from exc
    if len(trace_id) == 32:
        return trace_id
    rows = read_rows(config, server, read.route, read.params, read.local)
    found = sorted({row["trace_id"] for row in rows})
    if not found:
        raise _no_run(f"a trace id starting {trace_id}")
    if len(found) > 1:
        listed = "\n  ".join(found[:10]) + ("\n  ..." if len(found) > 10 else "")
        raise click.BadParameter(
            f"{trace_id!r} is the start of {len(found)} trace ids; give more of it:\n  {listed}",
            param_hint="trace id",
        )
    return str(found[0])


def check_trace_found(config: SidecarConfig, server: str | None, trace_id: str | None) -> None:
    """For a command asked about one run that found nothing: the usage error saying no run has
    this trace id, unless one has (its other filters left it out: an empty answer is then right).
    A command asked about one run must not answer with an empty table and success."""
    from agenttrail.collector.service import trajectories_read

    if trace_id is None:
        return
    read = trajectories_read(trace_id=trace_id, limit=1)
    if not read_rows(config, server, read.route, read.params, read.local):
        raise _no_run(f"trace id {trace_id}")


def _no_run(what: str) -> click.BadParameter:
    return click.BadParameter(
        f"no run with {what} (not assembled yet, or never received); list the runs with "
        "`agenttrail trajectories`",
        param_hint="trace id",
    )


@click.command()
@store_options
@run_filter_options(default_limit=100)
def trajectories(
    store: str | None,
    database: str | None,
    config_file: str | None,
    since: str | None,
    until: str | None,
    agent: str | None,
    task: str | None,
    trace_id: str | None,
    limit: int,
    output_format: str,
    server: str | None,
) -> None:
    """List agent runs with their tool calls, newest first."""
    from agenttrail.collector.service import trajectories_read

    config = config_from({"store": store, "database": database}, config_file)
    trace_id = resolve_trace_id(config, server, trace_id)
    try:
        read = trajectories_read(
            since=since, until=until, agent=agent, task=task, trace_id=trace_id, limit=limit
        )
    except QueryError as exc:
        raise click.BadParameter(str(exc)) from exc
    runs = read_rows(config, server, read.route, read.params, read.local)
    if not runs:
        check_trace_found(config, server, trace_id)
    emit_rows(
        runs,
        output_format,
        empty="no trajectories match",
        headers=["start", "trace", "agent", "task", "latency", "status", "tool calls"],
        cells=lambda run: (
            run["start"][:23],
            run["trace_id"][:12],
            run["agent"],
            run["task"],
            format_duration(run["latency_s"]),
            run["error_type"] or "error" if run["failure"] else "ok",
            trajectory_summary(run["tool_calls"]),
        ),
    )


# -- agenttrail spool: the quarantine ---------------------------------------------------------


def _quarantine(options: dict[str, Any], config_file: str | None, spool_dir: str | None) -> Any:
    from agenttrail.collector.service import open_quarantine

    config = None
    if spool_dir is None:
        config = config_from({key: value for key, value in options.items() if value is not None}, config_file)
    try:
        return open_quarantine(spool_dir, config)
    except AgentTrailError as exc:
        raise click.ClickException(str(exc)) from exc


def _spool_dir_option(function: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--spool-dir",
        default=None,
        envvar="AGENTTRAIL_SPOOL_DIR",
        help="Spool directory (default: <store>/spool, as `serve` uses).",
    )(function)


@click.group()
def spool() -> None:
    """Records the store refused even alone, set aside in <spool>/quarantine/ with the reason."""


@spool.command("list")
@store_options
@_spool_dir_option
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
def spool_list(config_file: str | None, spool_dir: str | None, fmt: str, **options: Any) -> None:
    """List quarantined records: id, when, size, reason."""
    quarantine = _quarantine(options, config_file, spool_dir)
    entries = quarantine.entries()
    if fmt == "json":
        for entry in entries:
            click.echo(json.dumps(entry.to_dict()))
        return
    if not entries:
        click.echo(f"no quarantined records in {quarantine.directory}", err=True)
        return
    rows = [
        (
            entry.id,
            time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(entry.quarantined_at)),
            entry.bytes,
            entry.reason if len(entry.reason) <= 90 else entry.reason[:89] + "…",
        )
        for entry in entries
    ]
    click.echo(format_table(["id", "quarantined (UTC)", "bytes", "reason"], rows))


@spool.command("show")
@store_options
@_spool_dir_option
@click.argument("entry_id")
def spool_show(config_file: str | None, spool_dir: str | None, entry_id: str, **options: Any) -> None:
    """Show one quarantined entry: why, and the spans it holds."""
    from agenttrail.collector.service import describe_entry

    quarantine = _quarantine(options, config_file, spool_dir)
    try:
        detail = describe_entry(quarantine, entry_id)
    except AgentTrailError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(json.dumps(detail.entry.to_dict(), indent=1))
    for record in detail.records:
        if record.undecodable is not None:
            click.echo(f"record {record.index}: {record.bytes} bytes, undecodable: {record.undecodable}")
        for span in record.spans:
            click.echo(
                f"record {record.index}: trace {span.trace_id} span {span.span_id} "
                f"{span.name[:60]!r} start {span.start_ns} end {span.end_ns}"
            )


@spool.command("requeue")
@store_options
@_spool_dir_option
@click.argument("entry_ids", nargs=-1)
@click.option("--all", "requeue_all", is_flag=True, help="Re-queue every quarantined entry.")
def spool_requeue(
    config_file: str | None,
    spool_dir: str | None,
    entry_ids: tuple[str, ...],
    requeue_all: bool,
    **options: Any,
) -> None:
    """Put quarantined entries back into the spool once their cause is fixed: a running `serve`
    stores them within a second, otherwise the next start does."""
    from agenttrail.collector.service import CommandUsageError, requeue_entries

    quarantine = _quarantine(options, config_file, spool_dir)
    try:
        requeue_entries(
            quarantine,
            entry_ids,
            every=requeue_all,
            done=lambda entry_id, segment: click.echo(f"re-queued {entry_id} as {segment.name}"),
        )
    except CommandUsageError as exc:
        raise click.UsageError(str(exc)) from exc
    except AgentTrailError as exc:
        raise click.ClickException(str(exc)) from exc


def trajectory_summary(calls: Sequence[dict[str, Any]], width: int = 70) -> str:
    text = " > ".join(call["name"] + ("!" if call["status"] == "error" else "") for call in calls) or "-"
    return text if len(text) <= width else text[: width - 1] + "…"


@click.command()
@click.option("--cluster", default=None, help="Print the DDL for this replicated ClickHouse cluster.")
@click.option(
    "--replicas-only",
    is_flag=True,
    help="With --cluster: one shard, replicated tables under their own names, no Distributed tables.",
)
@click.option("--database", default=None, help="ClickHouse database [env AGENTTRAIL_DATABASE].")
@click.option(
    "--config",
    "config_file",
    type=click.Path(dir_okay=False),
    envvar="AGENTTRAIL_CONFIG",
    help="YAML config file: the database and retention_* settings.",
)
def schema(cluster: str | None, replicas_only: bool, database: str | None, config_file: str | None) -> None:
    """Print the schema's DDL: the migrations as the sidecar runs them, or, with --cluster,
    ReplicatedMergeTree tables ON CLUSTER with Distributed tables over them and the retention TTLs.

    Run the cluster DDL (clickhouse client --multiquery) before the sidecars start; they find the
    migrations recorded and keep to the same SQL.
    """
    from agenttrail.collector.service import CommandUsageError, schema_statements

    config = config_from({"database": database}, config_file)
    retention = Retention(
        config.retention_spans_days, config.retention_trajectories_days, config.retention_scores_days
    )
    try:
        statements = schema_statements(
            current_wiring().schema_migrations,
            config.database,
            retention,
            cluster=cluster,
            replicas_only=replicas_only,
        )
    except CommandUsageError as exc:
        raise click.UsageError(str(exc)) from exc
    except AgentTrailError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(";\n\n".join(statement.strip() for statement in statements) + ";")


@click.command("migrate")
@click.option("--dry-run", is_flag=True, help="List the pending migrations and change nothing.")
@store_options
def migrate_command(dry_run: bool, config_file: str | None, **options: Any) -> None:
    """Apply the schema migrations the store lacks (the collector's and the evaluators'), as serve
    does at start, without starting it; --dry-run lists them.

    For upgrades: run the new version's `agenttrail migrate` (a Kubernetes Job or init container)
    before rolling its sidecars, which then find the migrations recorded. Exits 4 when the store
    cannot be reached or serve holds the embedded store, 3 on a cluster member's database (`schema
    --cluster` migrates those), 1 when a migration fails (the message names it; those before it
    stay applied, and running migrate again resumes).
    """
    from agenttrail.collector.service import migrate_store

    config = config_from(options, config_file)
    migrations = current_wiring().schema_migrations
    try:
        location = parse_store(config.store, config.database)
        lock = None
        if location.path is not None:
            if dry_run and not location.path.exists():
                raise NoStore(f"no store at {location.path} (the folder does not exist): check --store")
            # One process per embedded store: a serve starting meanwhile is refused, not both.
            lock = StoreLock(location.path, location.database)
            try:
                lock.acquire({"starting": True})
            except StoreLocked as exc:
                raise NoStore(f"{exc} (a running serve migrated its store when it started)") from exc
        try:
            store = Store(location)
            try:
                outcome = migrate_store(store, migrations, dry_run=dry_run)
            finally:
                store.close()
        finally:
            if lock is not None:
                lock.release()
    except AgentTrailError as exc:
        raise cli_error(exc) from exc
    where = f"{location.describe()} (database {location.database})"
    if outcome.newer:
        click.echo(
            f"warning: {where} records migration(s) {', '.join(map(str, outcome.newer))} that this "
            "agenttrail does not know: a newer agenttrail migrated it",
            err=True,
        )
    if not outcome.pending:
        click.echo(f"{where}: up to date, no schema migration pending")
        return
    listed = "\n".join(f"  {m.version:>4}  {m.name}" for m in outcome.pending)
    if dry_run:
        click.echo(f"{where}: {len(outcome.pending)} schema migration(s) pending:\n{listed}")
    else:
        click.echo(f"{where}: applied {len(outcome.applied)} schema migration(s):\n{listed}")


# -- agenttrail config show ----------------------------------------------------------------------


@click.group()
def config() -> None:
    """The effective settings: each value and where it came from."""


@config.command("show")
@store_options
@_setting_options
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="text: a table; json: one object per setting (section, key, value, type, source).",
)
def config_show(config_file: str | None, output_format: str, **options: Any) -> None:
    """Print every setting of every section as `serve` would run with these options: its value
    (secrets masked) and its source (flag, env VAR, file PATH or default). Checks the file as
    `serve` does: an unknown key or a bad value is an error naming it."""
    from agenttrail.collector.service import settings_rows

    rows = settings_rows(settings_from(options, config_file, check_sections=True))
    if output_format == "json":
        for row in rows:
            click.echo(json.dumps(row, ensure_ascii=False, default=str))
        return
    click.echo(
        format_table(
            ["setting", "value", "source"],
            [
                (".".join(filter(None, (row["section"], row["key"]))), _cell(row["value"]), row["source"])
                for row in rows
            ],
        )
    )


def _cell(value: Any, width: int = 60) -> str:
    """A value for the text table: scalars as YAML writes them, nested values as short JSON."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return str(value).lower()
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= width else text[: width - 1] + "…"


COLLECTOR_WIRING = Wiring(build_sidecar)
cli = make_cli(COLLECTOR_WIRING)  # the collector alone; `agenttrail` is agenttrail.evaluators.cli.main's


def main() -> None:
    cli()

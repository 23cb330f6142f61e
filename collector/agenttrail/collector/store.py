"""One code path to ClickHouse through clickhouse-connect: embedded chDB or a server by URL.

`--store` is either a directory (the embedded chDB engine, the default) or an
`http(s)://user:password@host:8123/database` URL. Everything above this module is the same
for both. Values always travel as bound parameters or typed inserts, never formatted into SQL.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse, urlunparse

from agenttrail.collector.errors import (
    StoreError,
    StoreLocked,
    StoreOutOfMemory,
    StoreRefused,
    StoreUnavailable,
)


def _driver_errors() -> tuple[type[Exception], type[Exception]]:
    """clickhouse-connect's (DatabaseError, OperationalError). The driver is imported when a
    store is first opened, not with this module: `agenttrail --help` and reads through a
    running sidecar never load it."""
    from clickhouse_connect.driver.exceptions import DatabaseError, OperationalError

    return DatabaseError, OperationalError


# The embedded engine's caches, sized for a process it shares with the sidecar: ClickHouse's
# defaults (5 GiB each for marks and primary indexes) suit a server that owns the machine.
# Engine options, so the first client to open the engine sets them.
EMBEDDED_ENGINE: dict[str, int | str] = {
    "mark_cache_size": 128 * 1024 * 1024,
    "index_mark_cache_size": 64 * 1024 * 1024,
    "primary_index_cache_size": 128 * 1024 * 1024,
}


# MergeTree defaults of the embedded engine (its config file: chDB takes no `merge_tree.*`
# option); a table's own settings win, and a server keeps its own config. docs/performance.md,
# "rss21". Granules of at most 1 MiB, not 10: a merge holds a granule of a column of every part
# it merges, and an 8,192-span granule of the span attributes is several MiB (a merge of 28
# `otel_traces` parts held 145 MiB, 73 with this; a part keeps the granules it was written with).
# Merges of 16,384 rows and more go column by column (ClickHouse: 131,072), as `otel_traces` and
# `trajectories` set for themselves: a row-by-row merge holds a block of every column of every
# part, and `scores`' merges of ~100 small parts held 110 MiB under overload (35 this way).
# Parts are written in compressed blocks of at most 256 KiB (ClickHouse: 1 MiB), and a merge's
# blocks hold at most 1 MiB (ClickHouse: 10 MiB): a merge holds a decompressed block and a block
# of rows of each part it reads, so a merge of 16 span parts held 73 MiB, 48 with both, and one of
# 16 `trajectories` parts 69 MiB, 40 ("rss23"; either alone took off about half of that).
ENGINE_MERGE_TREE: dict[str, int] = {
    "index_granularity_bytes": 1024 * 1024,
    "vertical_merge_algorithm_min_rows_to_activate": 16384,
    "max_compress_block_size": 256 * 1024,
    "merge_max_block_size_bytes": 1024 * 1024,
}


def engine_config_xml(extra: str = "") -> str:
    """The embedded engine's config file: ENGINE_MERGE_TREE, then `extra` (more sections, as a
    benchmark's query log)."""
    merge_tree = "".join(f"<{key}>{value}</{key}>" for key, value in ENGINE_MERGE_TREE.items())
    return f"<clickhouse><merge_tree>{merge_tree}</merge_tree>{extra}</clickhouse>\n"


def engine_config_file() -> str | None:
    """A file holding engine_config_xml(), written once per content in a directory of this
    user's own under the temp directory (not the store's, which may be read-only for a read
    command; not /tmp itself, where another user's file of the same name could not be replaced).
    None, with a warning, where it cannot be written: the engine then merges with ClickHouse's
    defaults, which hold more memory, rather than not opening."""
    import hashlib
    import logging
    import os
    import stat
    import tempfile

    text = engine_config_xml()
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    directory = Path(tempfile.gettempdir()) / f"agenttrail-{os.getuid()}"
    path = directory / f"engine-{digest}.xml"
    try:
        directory.mkdir(mode=0o700, exist_ok=True)
        found = directory.lstat()
        if not stat.S_ISDIR(found.st_mode) or found.st_uid != os.getuid():
            raise OSError(f"{directory} is not a directory of this user's")
        if not path.is_file() or path.read_text() != text:
            partial = path.with_name(f"{path.name}.{os.getpid()}.tmp")
            partial.write_text(text)
            os.replace(partial, path)
    except OSError as exc:
        logging.getLogger(__name__).warning(
            "cannot write the embedded engine's config file (%s): its merges use ClickHouse's "
            "defaults, which hold more memory; point TMPDIR at a directory this user can write",
            exc,
        )
        return None
    return str(path)


def embedded_engine_options(engine_nice: int) -> dict[str, int | str]:
    """The engine options; with `engine_nice` ClickHouse's merge and mutation threads run that
    much lower in the OS's priority (a server's own config sets this). A `config-file` already in
    EMBEDDED_ENGINE (a benchmark's, written with engine_config_xml) is kept."""
    config_file = engine_config_file()
    options: dict[str, int | str] = {
        **({"config-file": config_file} if config_file else {}),
        **EMBEDDED_ENGINE,
    }
    if engine_nice:
        options["os_threads_nice_value_merge_mutate"] = engine_nice
    return options


def engine_nice_settings(engine_nice: int) -> dict[str, int]:
    """A client's session setting that runs the engine threads of each of its statements
    `engine_nice` lower in the OS's priority (ClickHouse sets the nice as a thread joins the
    statement and resets it to 0 as it leaves; without CAP_SYS_NICE it ignores it). One SET when
    the client opens on the embedded engine, free per statement."""
    return {"os_thread_priority": engine_nice} if engine_nice else {}


_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
DEFAULT_DATABASE = "agenttrail"

# What clickhouse-connect escapes in a bound string (binding.must_escape).
_NEEDS_ESCAPE = re.compile(r"[\\'`\t\n]")
_FAST_LIST_MIN = 16


class _RenderedStrings:
    """A list of strings rendered once, as clickhouse-connect renders an Array(String)
    parameter: it escapes each string a character at a time in Python, and an assembly chunk
    binds thousands of trace ids into several queries (a third of assembly's Python time).
    clickhouse-connect writes an object of a type it does not know with `str()`."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __str__(self) -> str:
        return self.text


def _bound(parameters: Mapping[str, Any] | None) -> dict[str, Any]:
    """The parameters with long lists of strings that need no escaping pre-rendered; the
    query text ClickHouse receives is the same either way."""
    bound = dict(parameters or {})
    for key, value in bound.items():
        if (
            type(value) is list
            and len(value) >= _FAST_LIST_MIN
            and all(type(item) is str for item in value)
            and not _NEEDS_ESCAPE.search("".join(value))
        ):
            bound[key] = _RenderedStrings("['" + "', '".join(value) + "']")
    return bound


# ASCII output is markedly faster to produce; ClickHouse decodes the \u escapes.
_json = json.JSONEncoder(ensure_ascii=True, separators=(",", ":")).encode


@dataclass(frozen=True, slots=True)
class StoreLocation:
    """Where the data lives: an embedded directory or a server URL, plus the database."""

    url: str  # http(s)://... for a server, chdb:///abs/path for the embedded engine
    database: str
    path: Path | None  # the embedded store's directory; None for a server

    @property
    def embedded(self) -> bool:
        return self.path is not None

    def describe(self) -> str:
        if self.path is not None:
            return f"embedded store {self.path}"
        return f"ClickHouse {self.public_url()}"

    def public_url(self) -> str:
        """The URL without credentials, path or query: what logs and health checks may show."""
        if self.path is not None:
            return self.url
        parsed = urlparse(self.url)
        return f"{parsed.scheme}://{parsed.hostname}:{parsed.port or 8123}"

    def redact(self, text: str) -> str:
        """`text` with the URL's password, if any, replaced (a driver's message may quote it)."""
        password = urlparse(self.url).password if self.path is None else None
        return text.replace(password, "***") if password else text


def parse_store(value: str, database: str | None = None) -> StoreLocation:
    """Read a `--store` value: a directory path, `chdb:///path`, or an http(s) ClickHouse URL."""
    value = value.strip()
    if not value:
        raise StoreError("the store is empty: give a directory for the embedded store or an http(s):// URL")
    if value.startswith(("http://", "https://")):
        parsed = urlparse(value)
        url_database = parsed.path.strip("/") or None
        chosen = database or url_database or DEFAULT_DATABASE
        server_url = urlunparse(parsed._replace(path="", params="", query=parsed.query, fragment=""))
        return StoreLocation(url=server_url, database=_identifier(chosen, "database"), path=None)
    if value.startswith("chdb://"):
        value = urlparse(value).path
    path = Path(value).expanduser().resolve()
    return StoreLocation(
        url=f"chdb://{path}", database=_identifier(database or DEFAULT_DATABASE, "database"), path=path
    )


def _identifier(name: str, what: str) -> str:
    if not _IDENTIFIER.match(name):
        raise StoreError(f"{what} name {name!r} is not a valid ClickHouse identifier (letters, digits, _)")
    return name


@dataclass(frozen=True, slots=True)
class FileSource:
    """How to read a data file: its ClickHouse input format and column structure."""

    fmt: str
    structure: str


def _sql_string(text: str) -> str:
    """A constant of our own code as a SQL string literal (never a user value)."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def settings_clause(settings: Mapping[str, str | int]) -> str:
    """`SETTINGS name = value, ...` for settings of our own code (names checked as identifiers,
    strings quoted), or "" for none."""
    rendered = []
    for name, value in settings.items():
        literal = str(int(value)) if isinstance(value, int) else _sql_string(str(value))
        rendered.append(f"{_identifier(name, 'setting')} = {literal}")
    return f"SETTINGS {', '.join(rendered)} " if rendered else ""


def insert_select_sql(
    table: str,
    columns: Sequence[str],
    select: Callable[[str], str],
    source: FileSource,
    *,
    embedded: bool,
    settings: Mapping[str, str | int] | None = None,
) -> str:
    """The statement behind `Store.insert_select_file`: the file read in place by the embedded
    engine (a `{path:String}` parameter), or sent to a server as the body (`input()`).
    `settings` go into the statement (`INSERT INTO t (...) SETTINGS ... SELECT`), where
    ClickHouse applies them to the whole insert: its write, its deduplication and the file's
    format."""
    structure = _sql_string(source.structure)
    target = f"INSERT INTO `{_identifier(table, 'table')}` ({', '.join(f'`{c}`' for c in columns)}) "
    target += settings_clause(settings or {})
    if embedded:
        return target + select(f"file({{path:String}}, '{source.fmt}', {structure})")
    return target + select(f"input({structure})") + f" FORMAT {source.fmt}"


# ClickHouse error codes that are about the inserted data, not the server: the same insert would
# fail again (parse errors of every kind, wrong types and sizes, constraints, too many partitions).
_DATA_ERROR_CODES = frozenset(
    {6, 26, 27, 32, 33, 38, 41, 43, 53, 69, 70, 72, 117, 128, 131, 190, 252, 321, 407, 434, 444, 469}
)
_ERROR_CODE = re.compile(r"Code: (\d+)")
_MEMORY_LIMIT_EXCEEDED = 241
_SOCKET_ERROR = re.compile(r"(\[Errno -?\d+\] [^\"')]+|timed out)")
# What a proxy or load balancer in front of ClickHouse answers while no server is behind it
# (clickhouse-connect's text for an HTTP error that carries no ClickHouse error code).
_GATEWAY_STATUS = re.compile(r"received HTTP status (502|503|504)\b")


def _translate(exc: Exception, location: StoreLocation) -> StoreError:
    text = str(exc)
    if "Cannot lock file" in text or "already initialized with path" in text:
        return StoreLocked(
            f"{location.describe()} is in use by another process ({text.splitlines()[0][:200]}); "
            "stop that process or point --store at another directory"
        )
    if isinstance(exc, _driver_errors()[1]) or "Connection refused" in text or "Max retries" in text:
        # The socket's own error (refused, unknown host, timed out) rather than urllib3's wrapping.
        cause = _SOCKET_ERROR.search(text)
        why = cause.group(1) if cause else text.splitlines()[0][:300]
        return StoreUnavailable(
            f"cannot reach {location.describe()}: {why}. Check the URL and that ClickHouse is running."
        )
    message = f"{location.describe()} failed: {text.splitlines()[0][:500]}"
    codes = {int(code) for code in _ERROR_CODE.findall(text)}
    gateway = _GATEWAY_STATUS.search(text)
    if gateway and not codes:
        return StoreUnavailable(
            f"cannot reach {location.describe()}: HTTP status {gateway.group(1)} from a proxy in front of "
            "it, no ClickHouse behind it. Check that ClickHouse is running."
        )
    if _MEMORY_LIMIT_EXCEEDED in codes:
        return StoreOutOfMemory(message)
    if codes and codes <= _DATA_ERROR_CODES:
        return StoreRefused(message)
    return StoreError(message)


class Store:
    """A ClickHouse client bound to agenttrail's database, with errors translated.

    Each thread that talks to the store should hold its own `Store` (see `clone`): a chDB
    handle serialises calls, and session state is per client.

    Per-statement `settings=` are free over HTTP (request parameters) and, on the embedded
    engine, cheap for `query` and the inserts (clickhouse-connect appends a `SETTINGS` clause),
    but not for `command`: there the chDB backend reads the settings' values from
    `system.settings`, SETs each one, runs the statement and SETs each one back, 2 + 2n
    statements (~10 ms + ~1 ms a setting of CPU). A command on a hot path puts its settings in
    its SQL (`settings_clause`), as `insert_select_file` does.
    """

    def __init__(
        self, location: StoreLocation, *, create_database: bool = True, engine_nice: int = 0
    ) -> None:
        self.location = location
        self.engine_nice = engine_nice
        self._lock = threading.Lock()
        import clickhouse_connect

        try:
            if location.path is not None:
                location.path.mkdir(parents=True, exist_ok=True)
                self._client = clickhouse_connect.get_client(
                    dsn=location.url,
                    chdb_options=embedded_engine_options(engine_nice),
                    settings=engine_nice_settings(engine_nice),
                )
            else:
                self._client = clickhouse_connect.get_client(dsn=location.url, connect_timeout=5)
            if create_database:
                self._client.command(f"CREATE DATABASE IF NOT EXISTS `{location.database}`")
            self._client.database = location.database
        except (*_driver_errors(), OSError, RuntimeError) as exc:
            raise _translate(exc, location) from exc

    def clone(self) -> Store:
        """A second client to the same store, for another thread, at this store's `engine_nice`."""
        return Store(self.location, create_database=False, engine_nice=self.engine_nice)

    def command(
        self,
        sql: str,
        parameters: Mapping[str, Any] | None = None,
        *,
        settings: Mapping[str, str | int] | None = None,
    ) -> Any:
        try:
            with self._lock:
                return self._client.command(sql, parameters=_bound(parameters), settings=dict(settings or {}))
        except (*_driver_errors(), OSError) as exc:
            raise _translate(exc, self.location) from exc

    def query(
        self,
        sql: str,
        parameters: Mapping[str, Any] | None = None,
        *,
        settings: Mapping[str, str | int] | None = None,
    ) -> list[tuple[Any, ...]]:
        try:
            with self._lock:
                result = self._client.query(sql, parameters=_bound(parameters), settings=dict(settings or {}))
                return [tuple(row) for row in result.result_rows]
        except (*_driver_errors(), OSError) as exc:
            raise _translate(exc, self.location) from exc

    def query_with_names(
        self, sql: str, *, settings: Mapping[str, str | int] | None = None
    ) -> tuple[list[str], list[tuple[Any, ...]]]:
        """The column names and rows of `sql`, run with these per-query ClickHouse settings.

        A SETTINGS clause in `sql` is applied after `settings` and wins over them (on the embedded
        engine they follow it as a second clause, over HTTP they are request parameters): to
        keep a limit, give `readonly: 1`, and ClickHouse refuses the query's own settings.
        A trailing `;` or comment is fine; a FORMAT clause is not (rows come back decoded)."""
        try:
            with self._lock:
                result = self._client.query(sql, settings=dict(settings or {}))
                return list(result.column_names), [tuple(row) for row in result.result_rows]
        except (*_driver_errors(), OSError) as exc:
            raise _translate(exc, self.location) from exc

    def insert_rows(
        self,
        table: str,
        columns: Sequence[str],
        rows: Iterable[Sequence[Any]],
        *,
        dedup_token: str | None = None,
        settings: Mapping[str, str | int] | None = None,
    ) -> None:
        """Append rows as one JSONCompactColumns block, typed by the table's column types.

        Rows named by a column list: the spans' path (`otel_traces` has no row type, see
        `rows.py`) and tests that write some columns only. Every other table goes through `insert`.

        One C-level JSON encode of the transposed rows is several times faster than the
        driver's Native encoder for map-heavy span rows, and ClickHouse parses it faster than
        row-wise JSON. `dedup_token` makes a replayed block a no-op (tables carry a
        non-replicated deduplication window).
        """
        columns_data = [list(column) for column in zip(*rows, strict=True)]
        if not columns_data:
            return
        payload = _json(columns_data).encode()
        all_settings: dict[str, Any] = dict(settings or {})
        if dedup_token:
            all_settings["insert_deduplication_token"] = dedup_token
        try:
            with self._lock:
                self._client.raw_insert(
                    table, list(columns), payload, settings=all_settings or None, fmt="JSONCompactColumns"
                )
        except (*_driver_errors(), OSError) as exc:
            raise _translate(exc, self.location) from exc

    def insert(
        self,
        table: str,
        rows: Sequence[tuple[Any, ...]],
        *,
        dedup_token: str | None = None,
        settings: Mapping[str, str | int] | None = None,
    ) -> None:
        """Append rows of one NamedTuple type (`collector/rows.py`), its field names as the columns."""
        if not rows:
            return
        row_type = type(rows[0])
        columns: tuple[str, ...] | None = getattr(row_type, "_fields", None)
        if columns is None or any(type(row) is not row_type for row in rows):
            kinds = ", ".join(sorted({type(row).__name__ for row in rows}))
            raise TypeError(f"an insert into {table} takes rows of one NamedTuple type, got {kinds}")
        self.insert_rows(table, columns, rows, dedup_token=dedup_token, settings=settings)

    def insert_select_file(
        self,
        table: str,
        columns: Sequence[str],
        select: Callable[[str], str],
        source: FileSource,
        path: Path,
        *,
        settings: Mapping[str, str | int] | None = None,
        dedup_token: str | None = None,
    ) -> None:
        """`INSERT INTO table SELECT ...` over the rows of a data file, transformed by SQL.

        `select(source_sql)` builds the SELECT around a table expression for the file. The
        embedded engine reads the file in place (`file()`, the path a bound parameter); a
        server gets its bytes as the request body (`input()`).
        """
        all_settings: dict[str, Any] = dict(settings or {})
        if dedup_token:
            all_settings["insert_deduplication_token"] = dedup_token
        try:
            with self._lock:
                if self.location.embedded:
                    # In the statement: as command settings they would cost the embedded
                    # engine ~20 ms of CPU per insert (see the class docstring).
                    sql = insert_select_sql(
                        table, columns, select, source, embedded=True, settings=all_settings
                    )
                    self._client.command(sql, parameters={"path": str(path)})
                else:
                    sql = insert_select_sql(table, columns, select, source, embedded=False)
                    self._client.command(sql, data=path.read_bytes(), settings=all_settings)
        except (*_driver_errors(), OSError) as exc:
            raise _translate(exc, self.location) from exc

    def ping(self) -> bool:
        try:
            with self._lock:
                return bool(self._client.ping())
        except Exception:
            return False

    def close(self) -> None:
        with self._lock:
            self._client.close()

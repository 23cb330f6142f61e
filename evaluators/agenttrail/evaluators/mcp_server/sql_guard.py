"""The SQL tool's gate: one read-only SELECT on agenttrail's tables, checked before it runs.

The check is a tokenizer, not a parser: comments, string literals and quoted identifiers are
taken out first, so a keyword inside a string neither trips nor hides anything (where the
tokenizer and ClickHouse disagree it refuses: a `#` comment, a comment nested in a `/* */` one
and a dollar-quoted string `$tag$...$tag$` (each could make this tokenizer see a string where
ClickHouse sees code), an unterminated quote). The query then runs on a client of its own with
`readonly=1` (no writes and no settings of the query's own: the server, not the query, sets
the limits), a timeout and a row limit, so what the check misses the store still refuses. What
readonly does not stop is refused here: settings-exposing `system` tables, `getSetting` and
friends, and functions that reach outside the store (`file`, `url`, ...).
"""

from __future__ import annotations

import re

from agenttrail.collector.errors import AgentTrailError

# system tables a query may read: schema and sizes, nothing about users, grants or settings.
ALLOWED_SYSTEM_TABLES = frozenset(
    {"tables", "columns", "parts", "parts_columns", "functions", "table_functions", "one", "numbers"}
)
# Statements and clauses that write, change state, or override the server's settings.
_REFUSED_WORDS = frozenset(
    {
        "insert", "alter", "drop", "create", "truncate", "rename", "optimize", "kill", "grant",
        "revoke", "set", "attach", "detach", "exchange", "delete", "update", "outfile", "settings",
        "format", "system", "use", "backup", "restore", "undrop", "move", "replace",
    }
)  # fmt: skip
# Functions (scalar or table) that read outside the store or expose the server's configuration.
_REFUSED_FUNCTIONS = frozenset(
    {
        "file", "filecluster", "url", "urlcluster", "s3", "s3cluster", "gcs", "hdfs", "hdfscluster",
        "azureblobstorage", "azureblobstoragecluster", "remote", "remotesecure", "cluster",
        "clusterallreplicas", "mysql", "postgresql", "jdbc", "odbc", "mongodb", "redis", "sqlite",
        "executable", "input", "iceberg", "icebergs3", "deltalake", "hudi", "python", "merge",
        "mergetreeindex", "dictionary", "getsetting", "getsettingordefault", "getserversetting",
        "getmergetreesetting", "getmacro", "currentprofiles", "enabledprofiles", "defaultprofiles",
        "currentroles", "enabledroles", "defaultroles", "currentuser", "user", "getclientsetting",
        "filesystemavailable", "filesystemcapacity", "filesystemunreserved", "getoskernelversion",
    }
)  # fmt: skip
_FIRST_WORDS = ("select", "with")

_TOKENS = re.compile(
    r"""
    (?P<comment>--[^\n]*|/\*.*?\*/)
  | (?P<string>'(?:[^'\\]|\\.|'')*')
  | (?P<quoted>`(?:[^`\\]|\\.|``)*`|"(?:[^"\\]|\\.|"")*")
  | (?P<word>[A-Za-z_][A-Za-z0-9_$]*)
  | (?P<space>\s+)
  | (?P<other>.)
    """,
    re.S | re.X,
)


class RefusedQuery(AgentTrailError, ValueError):
    """The query is not a single read-only SELECT the tool may run; the message says why."""


def _tokens(sql: str) -> list[tuple[str, str]]:
    """(kind, text) with comments and spaces dropped, strings blanked, quoted names unquoted."""
    tokens: list[tuple[str, str]] = []
    position = 0
    for match in _TOKENS.finditer(sql):
        if match.start() != position:  # an unterminated quote or comment
            break
        position = match.end()
        kind = match.lastgroup or "other"
        text = match.group()
        if kind == "comment" and "/*" in text[2:]:
            # ClickHouse nests block comments: it would read on past this `*/` as a comment and
            # what this tokenizer then takes for a string could be code to ClickHouse
            raise RefusedQuery("nested /* comments */ are not allowed here")
        if kind in ("comment", "space"):
            continue
        if kind == "other" and text in "'\"`":
            raise RefusedQuery("the query has an unterminated quote")
        if kind == "other" and text == "#":
            # ClickHouse reads `# ` and `#!` to the end of the line as a comment, this tokenizer as code
            raise RefusedQuery("# comments are not allowed here: write -- or /* */ comments")
        if kind == "other" and text == "$":
            # ClickHouse reads `$tag$ ... $tag$` as a string, where this tokenizer would see code
            # (a `--` inside it would hide the rest of the line from the check, not from ClickHouse)
            raise RefusedQuery("dollar-quoted strings ($$...$$) are not allowed here: write '...' strings")
        if kind == "string":
            tokens.append(("string", "''"))
        elif kind == "quoted":
            tokens.append(("word", text[1:-1].replace(text[0] * 2, text[0])))
        else:
            tokens.append((kind, text))
    if position != len(sql):
        raise RefusedQuery("the query has an unterminated quote or comment")
    return tokens


def check_select(sql: str) -> str:
    """The query without a trailing semicolon, if it is one read-only SELECT; else RefusedQuery."""
    text = sql.strip()
    while text.endswith(";"):
        text = text[:-1].rstrip()
    if not text:
        raise RefusedQuery("the query is empty: give one SELECT statement")
    tokens = _tokens(text)
    if any(kind == "other" and value == ";" for kind, value in tokens):
        raise RefusedQuery("multiple statements: give exactly one SELECT (no ';' inside the query)")
    first = next((value.lower() for kind, value in tokens if kind == "word" or value != "("), "")
    if first not in _FIRST_WORDS:
        raise RefusedQuery(f"only SELECT (or WITH ... SELECT) queries may run here, not {first.upper()!r}")
    for index, (kind, value) in enumerate(tokens):
        if kind != "word":
            continue
        word = value.lower()
        following = tokens[index + 1][1] if index + 1 < len(tokens) else ""
        previous = tokens[index - 1][1] if index else ""
        if previous == ".":
            continue  # a column or table name after a qualifier, checked with its qualifier
        if word == "system" and following == ".":
            table = tokens[index + 2][1].lower() if index + 2 < len(tokens) else ""
            if table not in ALLOWED_SYSTEM_TABLES:
                allowed = ", ".join(f"system.{name}" for name in sorted(ALLOWED_SYSTEM_TABLES))
                raise RefusedQuery(
                    f"system.{table} is not readable here (it may expose settings, users or grants); "
                    f"readable system tables: {allowed}"
                )
            continue
        if following == "(" and word in _REFUSED_FUNCTIONS:
            raise RefusedQuery(f"{value}() is not allowed here: it reads outside the store or its settings")
        if word in _REFUSED_WORDS and following != "(":
            raise RefusedQuery(
                f"{value.upper()} is not allowed: this tool runs one read-only SELECT with the server's "
                "settings (row limit and timeout are set for you)"
            )
    return text

"""What Grafana and the grafana-clickhouse-datasource plugin do to a panel's SQL before it
reaches ClickHouse: dashboard variables first (`${var}`, `${var:singlequote}`, `$var`), then
the plugin's macros, expanded as its README documents them. Anything left with a `$` is an
unknown macro or variable, which fails the test rather than reaching ClickHouse."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

Variables = Mapping[str, str | Sequence[str]]


def substitute_variables(sql: str, variables: Variables) -> str:
    def value(match: re.Match[str]) -> str:
        name, fmt = match.group(1) or match.group(3), match.group(2)
        if name.startswith("__"):
            return match.group(0)  # a macro, not a variable
        if name not in variables:
            raise KeyError(f"dashboard variable ${name} is not defined")
        given = variables[name]
        values = [given] if isinstance(given, str) else list(given)
        if fmt == "singlequote":
            return ",".join("'" + v.replace("'", "\\'") + "'" for v in values)
        if fmt not in (None, "raw"):
            raise KeyError(f"variable format {fmt!r} is not handled by this test")
        return ",".join(values)

    return re.sub(r"\$\{(\w+)(?::(\w+))?\}|\$(\w+)", value, sql)


def expand_macros(sql: str, *, from_s: int, to_s: int, interval_s: int) -> str:
    def column_macro(name: str, template: str, text: str) -> str:
        return re.sub(rf"\$__{name}\(([^()]+)\)", lambda m: template.format(c=m.group(1).strip()), text)

    sql = column_macro(
        "timeFilter_ms",
        f"{{c}} >= fromUnixTimestamp64Milli({from_s * 1000}) AND "
        f"{{c}} <= fromUnixTimestamp64Milli({to_s * 1000})",
        sql,
    )
    sql = column_macro("timeFilter", f"{{c}} >= toDateTime({from_s}) AND {{c}} <= toDateTime({to_s})", sql)
    sql = column_macro(
        "timeInterval", f"toStartOfInterval(toDateTime({{c}}), INTERVAL {interval_s} second)", sql
    )
    sql = sql.replace("$__interval_s", str(interval_s))
    sql = sql.replace("$__fromTime", f"toDateTime({from_s})").replace("$__toTime", f"toDateTime({to_s})")
    if "$" in sql:
        raise ValueError(f"unexpanded macro or variable in: {sql}")
    return sql


def render(sql: str, variables: Variables, *, from_s: int, to_s: int, interval_s: int = 60) -> str:
    return expand_macros(
        substitute_variables(sql, variables), from_s=from_s, to_s=to_s, interval_s=interval_s
    )

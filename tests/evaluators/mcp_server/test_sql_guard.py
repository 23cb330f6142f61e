"""The SQL tool's gate: one read-only SELECT passes; writes, several statements, settings,
settings-exposing system tables and outside-reaching functions are refused, wherever they hide
(case, comments, quoting), while the same words inside string literals do not trip it."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agenttrail.evaluators.mcp_server.sql_guard import RefusedQuery, check_select


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT 1",
        "select Agent, count() from trajectories group by Agent;",
        "WITH x AS (SELECT 1 AS a) SELECT a FROM x",
        "(SELECT 1)",
        "SELECT 'drop table x; insert' AS s",
        "SELECT name FROM system.tables WHERE database = currentDatabase()",
        "SELECT * FROM information_schema.columns LIMIT 3",
        "SELECT IsDeleted, replace(Task, 'a', 'b') FROM trajectories -- delete later\n",
        "SELECT `Agent` FROM `trajectories`",
        "SELECT 1 AS a$b, 'a $$ -- $$ # /*' AS c /* a * / note */",
    ],
)
def test_a_single_select_passes(sql: str) -> None:
    """Plain reads pass, and the text that runs has no trailing semicolon."""
    assert not check_select(sql).endswith(";")


@pytest.mark.parametrize(
    ("sql", "reason"),
    [
        ("INSERT INTO scores SELECT * FROM scores", "only SELECT"),
        ("ALTER TABLE trajectories DELETE WHERE 1", "only SELECT"),
        ("SELECT 1; DROP TABLE trajectories", "multiple statements"),
        ("SELECT 1; SELECT 2", "multiple statements"),
        ("SELECT 1 /* ; */ ; SELECT 2", "multiple statements"),
        ("SELECT * FROM system.settings", "system.settings"),
        ("select * from SYSTEM . Users", "system.users"),
        ("SELECT * FROM `system`.`grants`", "system.grants"),
        ('SELECT * FROM "system"."quotas"', "system.quotas"),
        ("SELECT getSetting('max_threads')", "getSetting"),
        ("SELECT * FROM file('/etc/passwd', 'LineAsString')", "file"),
        ("SELECT * FROM url('http://x', CSV)", "url"),
        ("SELECT * FROM merge('system', '.*')", "merge"),
        ("SELECT 1 SETTINGS readonly = 0", "SETTINGS"),
        ("SELECT 1 FORMAT JSON", "FORMAT"),
        ("SELECT 1 INTO OUTFILE 'x'", "OUTFILE"),
        ("WITH 1 AS a INSERT INTO t VALUES (a)", "INSERT"),
        ("SET readonly = 0", "only SELECT"),
        ("SELECT 'unterminated", "unterminated"),
        # a dollar-quoted string ClickHouse reads where the tokenizer sees a comment starting
        ("SELECT $$ -- $$ AS a, number FROM numbers(9) SETTINGS max_result_rows = 1000 -- ", r"\$"),
        ("SELECT $t$ -- $t$ AS a, * FROM file('/etc/passwd', 'LineAsString') -- ", r"\$"),
        ("SELECT $t$ x $t$ AS a", r"\$"),
        # a `#` comment and a nested comment, which ClickHouse reads where the tokenizer sees a string
        ("SELECT 1 AS a # '\n, name FROM system.settings -- '", "# comments"),
        ("SELECT 1 AS a\n#!x\n, 2", "# comments"),
        ("SELECT 1 AS a /* /* */ ' */ , name FROM system.settings -- '", "nested"),
        ("   ;  ", "empty"),
    ],
)
def test_refused(sql: str, reason: str) -> None:
    """Each refusal names what was refused."""
    with pytest.raises(RefusedQuery, match=reason):
        check_select(sql)


@given(st.text(alphabet=st.characters(blacklist_characters="'\\", blacklist_categories=("Cs",)), max_size=40))
def test_string_literals_hide_nothing_and_trip_nothing(content: str) -> None:
    """Whatever a string literal holds, a SELECT of it passes and stays byte for byte as given."""
    sql = f"SELECT '{content}'"
    assert check_select(sql) == sql.strip().rstrip(";").rstrip()

"""Every command's `--help` in an order a reader expects: the command's own options, then the
shared run filters, then how it prints, then where it reads (store, database, config, sidecar);
and every option with a default shows it."""

from __future__ import annotations

import click

from agenttrail.collector.cli import WHERE_OPTIONS
from agenttrail.evaluators.cli.main import cli

FILTERS = ("since", "until", "agent", "task", "trace_id")
OUTPUT = ("limit", "output_format", "fmt")


def commands(group: click.Command = cli, path: str = "agenttrail") -> list[tuple[str, click.Command]]:
    """Every command and sub-command, lazy ones loaded."""
    found = [(path, group)]
    if isinstance(group, click.Group):
        for name in group.list_commands(click.Context(group)):
            sub = group.get_command(click.Context(group), name)
            assert sub is not None
            found += commands(sub, f"{path} {name}")
    return found


def has_default(option: click.Option) -> bool:
    """A value used when the option is not given (click's "no default" is a sentinel, not None)."""
    default = option.default
    return isinstance(default, str | int | float | tuple) and default not in ("", ())


def help_order(command: click.Command) -> list[str]:
    """The options' names in the order `--help` lists them."""
    context = click.Context(command)
    helps = command.get_help_option(context)
    return [param.name or "" for param in command.get_params(context) if param is not helps]


def rank(name: str, *, reads_runs: bool) -> int:
    if name in WHERE_OPTIONS:
        return 3
    if name in OUTPUT:
        return 2
    return 1 if reads_runs and name in FILTERS else 0


def test_options_list_own_then_filters_then_output_then_where_to_read() -> None:
    """`scores --metric` comes before the run filters, `--limit`/`--format` after them, and
    `--store`, `--database`, `--config`, `--server` together at the end (serve keeps its settings
    table's order)."""
    misordered = {}
    for path, command in commands():
        if path == "agenttrail serve":
            continue
        names = help_order(command)
        ranks = [rank(name, reads_runs="since" in names) for name in names]
        where = [name for name in names if name in WHERE_OPTIONS]
        if ranks != sorted(ranks) or where != [name for name in WHERE_OPTIONS if name in where]:
            misordered[path] = names
    assert misordered == {}
    assert help_order(cli.get_command(click.Context(cli), "scores"))[:2] == ["metric", "since"]  # type: ignore[arg-type]


def test_every_option_with_a_default_shows_it() -> None:
    """An option with a default shows it in `--help` (`audit --format` did not)."""
    hidden = [
        f"{path} {option.opts[0]}"
        for path, command in commands()
        for option in command.params
        if isinstance(option, click.Option)
        and not option.is_flag
        and not option.hidden
        and has_default(option)
        and not option.show_default
        and "default" not in (option.help or "").lower()
    ]
    assert hidden == []


def test_every_server_option_says_where_its_token_comes_from() -> None:
    """Each command that talks to a running sidecar (`--server`) says in its help that it sends
    serve's token from AGENTTRAIL_BEARER_TOKEN (the commands have no token option of their own)."""
    with_server = {
        path: option.help or ""
        for path, command in commands()
        for option in command.params
        if isinstance(option, click.Option) and "--server" in option.opts
    }
    assert len(with_server) >= 10
    assert {path for path, text in with_server.items() if "AGENTTRAIL_BEARER_TOKEN" not in text} == set()

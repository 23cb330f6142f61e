"""`agenttrail criteria`: discover, review, check and save evaluation criteria (AgentEval).

    propose      a critic proposes criteria from a task description (and example runs)
    consolidate  merge the proposals of several critic runs by embedding similarity
    quantify     score runs against a criteria set; one stored score per criterion
    robustness   quantify k times: spread per criterion, success-vs-failure separation
    verify       do scores drop when steps or sentences are removed from a run?
    save/list/show  reviewed sets in the store, versioned; a saved set runs online as a judge

The sidecar's side (the criteria table, the `/api/v1/criteria-sets` read route) is
judges/criteria/install.py, which the composition root installs; it also gives the sidecar's
judges the store their saved sets are read from.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
import yaml

from agenttrail.collector.cli import (
    SidecarApi,
    config_from,
    emit_rows,
    format_table,
    read_via,
    store_options,
)
from agenttrail.collector.errors import AgentTrailError
from agenttrail.collector.schema import migrate
from agenttrail.collector.store import Store
from agenttrail.evaluators.cli.common import open_store
from agenttrail.evaluators.composition import ALL_MIGRATIONS
from agenttrail.evaluators.judges.base import BudgetExhausted, ChatJudgeClient
from agenttrail.evaluators.judges.criteria.consolidate import DEFAULT_THRESHOLD, consolidate
from agenttrail.evaluators.judges.criteria.critic import propose_criteria
from agenttrail.evaluators.judges.criteria.embeddings import make_embedder
from agenttrail.evaluators.judges.criteria.install import SETS_ROUTE, read_sets
from agenttrail.evaluators.judges.criteria.model import (
    CriteriaSet,
    Criterion,
    dump_document,
    load_criteria_file,
    parse_criteria_list,
    parse_criteria_set,
    read_document,
)
from agenttrail.evaluators.judges.criteria.robustness import (
    DEFAULT_MAX_SPREAD,
    DEFAULT_MIN_GAP,
    repeat_quantify,
    robustness_report,
)
from agenttrail.evaluators.judges.criteria.runs import Run, split_runs
from agenttrail.evaluators.judges.criteria.service import (
    CriteriaUsageError,
    RunsQuery,
    load_runs,
    quantify_runs,
    resolve_set,
    scores_by_trace,
)
from agenttrail.evaluators.judges.criteria.sets import (
    save_set,
)
from agenttrail.evaluators.judges.criteria.verify import DEFAULT_SHARE, verify

# --- shared options ---------------------------------------------------------------------------


def _decorate(options: Sequence[Callable[..., Any]]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def decorate(function: Callable[..., Any]) -> Callable[..., Any]:
        for option in reversed(options):
            function = option(function)
        return function

    return decorate


format_option = click.option(
    "--format", "output_format", type=click.Choice(["table", "json"]), default="table", show_default=True
)

runs_options = _decorate(
    [
        click.option(
            "--runs-file",
            type=click.Path(dir_okay=False, exists=True),
            help="Trajectories in the `agenttrail trajectories --format json` shape, instead of the store.",
        ),
        click.option("--since", help="Runs started after: ISO 8601 or a duration back from now (2h, 7d)."),
        click.option("--until", help="Runs started before, same forms as --since."),
        click.option("--agent", help="Only runs of this agent."),
        click.option("--task", help="Only runs of this task."),
        click.option("--trace", "trace_id", help="Only this trace id or a unique prefix (8+ hex)."),
        click.option("--limit", default=50, show_default=True, type=click.IntRange(min=1)),
        click.option(
            "--success-metric",
            help="Tell successful runs by this stored metric (>= --success-threshold), not the failure flag.",
        ),
        click.option("--success-threshold", default=1.0, show_default=True, type=float),
    ]
)

judge_options = _decorate(
    [
        click.option(
            "--judge-model", envvar="AGENTTRAIL_JUDGE_MODEL", help="Chat model [env AGENTTRAIL_JUDGE_MODEL]."
        ),
        click.option(
            "--judge-base-url",
            envvar="AGENTTRAIL_JUDGE_BASE_URL",
            help="OpenAI-compatible endpoint [env AGENTTRAIL_JUDGE_BASE_URL; default api.openai.com]. "
            "The key comes from OPENAI_API_KEY.",
        ),
        click.option(
            "--concurrency", default=4, show_default=True, type=click.IntRange(min=1), help="Calls in flight."
        ),
    ]
)

set_options = _decorate(
    [
        click.option(
            "--criteria-file",
            type=click.Path(dir_okay=False, exists=True),
            help="A criteria set file (JSON/YAML).",
        ),
        click.option("--criteria-set", "set_name", help="A saved criteria set's name."),
        click.option(
            "--set-version", type=click.IntRange(min=1), help="That set's version number (default: newest)."
        ),
    ]
)

# What quantify, robustness and verify take: a set, the runs, where to read, a judge model.
scoring_options = _decorate([set_options, runs_options, store_options, judge_options, format_option])


@dataclass(frozen=True, slots=True)
class StoreArgs:
    store: str | None
    database: str | None
    config_file: str | None

    @classmethod
    def pick(cls, options: dict[str, Any]) -> StoreArgs:
        return cls(options.pop("store"), options.pop("database"), options.pop("config_file"))

    def source(self) -> SidecarApi | Store:
        """The store for reading, or the running sidecar's API while it holds the store."""
        source = read_via(
            config_from({"store": self.store, "database": self.database}, self.config_file), None
        )
        if isinstance(source, Store):
            _migrate(source)
        return source

    def writable(self) -> Store:
        """The store itself; refuses politely while `serve` holds it (see `open_store`)."""
        store = open_store(self.store, self.database, self.config_file)
        _migrate(store)
        return store


def _migrate(store: Store) -> None:
    try:
        migrate(store, ALL_MIGRATIONS)  # the one schema, as every command that opens the store
    except AgentTrailError as exc:
        raise click.ClickException(str(exc)) from exc


@dataclass(frozen=True, slots=True)
class SetArgs:
    criteria_file: str | None
    set_name: str | None
    set_version: int | None

    @classmethod
    def pick(cls, options: dict[str, Any]) -> SetArgs:
        """Take (and remove) the set options from a command's keyword arguments."""
        return cls(*(options.pop(name) for name in cls.__dataclass_fields__))

    def resolve(self, source: Callable[[], Any]) -> tuple[CriteriaSet, str]:
        return resolve_set(self.criteria_file, self.set_name, self.set_version, source)


@dataclass(frozen=True, slots=True)
class JudgeArgs:
    judge_model: str | None
    judge_base_url: str | None
    concurrency: int

    @classmethod
    def pick(cls, options: dict[str, Any]) -> JudgeArgs:
        """Take (and remove) the judge options from a command's keyword arguments."""
        return cls(*(options.pop(name) for name in cls.__dataclass_fields__))

    def client(self) -> ChatJudgeClient:
        if not self.judge_model:
            raise click.UsageError("a judge model is needed: --judge-model or AGENTTRAIL_JUDGE_MODEL")
        from agenttrail.evaluators.judges.client import JudgeSettings, OpenAIJudgeClient

        settings = JudgeSettings(
            model=self.judge_model, base_url=self.judge_base_url, concurrency=self.concurrency
        )
        try:
            return OpenAIJudgeClient(settings)
        except AgentTrailError as exc:
            raise click.ClickException(str(exc)) from exc


def _number(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _errors_to_click(function: Callable[..., None]) -> Callable[..., None]:
    """Our errors and a spent budget become clean CLI errors, never tracebacks."""
    import functools

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        try:
            function(*args, **kwargs)
        except CriteriaUsageError as exc:  # a bad combination of options: click's usage exit (2)
            if exc.option:
                raise click.BadParameter(str(exc), param_hint=f"'{exc.option}'") from exc
            raise click.UsageError(str(exc)) from exc
        except (AgentTrailError, BudgetExhausted) as exc:
            raise click.ClickException(str(exc)) from exc

    return wrapper


# --- commands ---------------------------------------------------------------------------------


@click.group()
def criteria() -> None:
    """Discover evaluation criteria for an agent (AgentEval), check them, and save reviewed sets."""


@criteria.command()
@click.option("--description", help="What the agent's task is (the critic's main input).")
@click.option(
    "--description-file", type=click.Path(dir_okay=False, exists=True), help="The same, from a file."
)
@click.option(
    "--examples",
    default=0,
    show_default=True,
    type=click.IntRange(min=0),
    help="Show the critic up to N successful and N failed runs (solution-based); 0: task-based.",
)
@click.option("--runs", "critic_runs", default=1, show_default=True, type=click.IntRange(min=1, max=20))
@click.option(
    "--count", default=5, show_default=True, type=click.IntRange(min=1, max=30), help="Criteria per run."
)
@click.option("--name", "set_name", default="criteria", show_default=True, help="Name of the criteria set.")
@click.option(
    "--output", required=True, type=click.Path(dir_okay=False), help="Proposals file (.json or .yaml)."
)
@runs_options
@store_options
@judge_options
@format_option
@_errors_to_click
def propose(
    description: str | None,
    description_file: str | None,
    examples: int,
    critic_runs: int,
    count: int,
    set_name: str,
    output: str,
    output_format: str,
    **options: Any,
) -> None:
    """Ask a critic for criteria; several runs go to one proposals file for `consolidate`."""
    query, where, judge = RunsQuery.pick(options), StoreArgs.pick(options), JudgeArgs.pick(options)
    if description_file:
        description = Path(description_file).read_text(encoding="utf-8")
    if not description or not description.strip():
        raise click.UsageError("the critic needs the task: --description or --description-file")
    successful: list[Run] = []
    failed: list[Run] = []
    if examples:
        source = None if query.runs_file and not query.success_metric else where.source()
        runs = load_runs(query, source)
        labelled = split_runs(runs, query.rule, scores_by_trace(source, query, runs))
        successful, failed = labelled.successful[:examples], labelled.failed[:examples]
        if not successful and not failed:
            raise click.ClickException("no example runs matched; widen the filter or use --examples 0")
    client = judge.client()
    proposals = propose_criteria(
        client,
        description,
        [r.judge_input for r in successful],
        [r.judge_input for r in failed],
        runs=critic_runs,
        count=count,
    )
    mode = "solution-based" if successful or failed else "task-based"
    document = {
        "name": set_name,
        "task": description.strip(),
        "mode": mode,
        "examples": {"successful": [r.trace_id for r in successful], "failed": [r.trace_id for r in failed]},
        "proposals": [
            {"run": p.index + 1, "criteria": [c.to_json() for c in p.criteria], "error": p.error}
            for p in proposals
        ],
    }
    dump_document(document, output)
    rows = [
        {"run": p.index + 1, "criterion": c.name, "values": " < ".join(c.labels), "error": ""}
        for p in proposals
        for c in p.criteria
    ] + [{"run": p.index + 1, "criterion": "", "values": "", "error": p.error} for p in proposals if p.error]
    emit_rows(
        rows,
        output_format,
        empty="the critic proposed nothing",
        headers=["run", "criterion", "accepted values", "error"],
        cells=lambda r: (r["run"], r["criterion"], r["values"], r["error"]),
    )
    good = sum(1 for p in proposals if not p.error)
    click.echo(f"{mode}: {good} of {critic_runs} critic run(s) answered; wrote {output}", err=True)
    if not good:
        raise click.ClickException("every critic run failed (see the errors above)")


def read_proposals(path: str) -> tuple[str, str, list[Criterion]]:
    """(name, task, criteria) from a proposals file, or a criteria set file."""
    document = read_document(path)
    if isinstance(document, dict) and "proposals" in document:
        criteria: list[Criterion] = []
        for proposal in document["proposals"] or []:
            if proposal.get("criteria"):
                criteria.extend(
                    parse_criteria_list(proposal["criteria"], f"{path} run {proposal.get('run')}")
                )
        return str(document.get("name") or ""), str(document.get("task") or ""), criteria
    criteria_set = parse_criteria_set(document, path)
    return criteria_set.name, criteria_set.task, list(criteria_set.criteria)


@criteria.command("consolidate")
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False, exists=True))
@click.option("--output", required=True, type=click.Path(dir_okay=False), help="Criteria set file to review.")
@click.option("--name", "set_name", help="Name of the set (default: the first file's).")
@click.option(
    "--threshold", default=DEFAULT_THRESHOLD, show_default=True, type=click.FloatRange(0, 1, min_open=True)
)
@click.option(
    "--embeddings",
    "backend",
    type=click.Choice(["local", "openai"]),
    default="local",
    show_default=True,
    help="local: offline all-MiniLM-L6-v2 (the `embeddings` extra); openai: an embeddings endpoint.",
)
@click.option("--embedding-model", envvar="AGENTTRAIL_EMBEDDING_MODEL", help="Model for --embeddings openai.")
@click.option(
    "--embedding-base-url",
    envvar="AGENTTRAIL_EMBEDDING_BASE_URL",
    help="Endpoint for --embeddings openai (key from OPENAI_API_KEY).",
)
@format_option
@_errors_to_click
def consolidate_command(
    files: tuple[str, ...],
    output: str,
    set_name: str | None,
    threshold: float,
    backend: str,
    embedding_model: str | None,
    embedding_base_url: str | None,
    output_format: str,
) -> None:
    """Merge criteria from critic runs: similar "name: description" pairs become one criterion."""
    names, tasks, proposed = [], [], []
    for path in files:
        name, task, criteria_list = read_proposals(path)
        names.append(name)
        tasks.append(task)
        proposed.extend(criteria_list)
    embedder = make_embedder(backend, model=embedding_model, base_url=embedding_base_url)
    result = consolidate(proposed, embedder, threshold)
    criteria_set = result.to_set(
        set_name or next((n for n in names if n), "criteria"), next((t for t in tasks if t), "")
    )
    dump_document(criteria_set.to_json(), output)
    rows = [
        {
            "criterion": group.kept.name,
            "merged": [c.name for c in group.merged],
            "min_similarity": None if not group.merged else round(group.min_similarity, 4),
            "description": group.kept.description,
        }
        for group in result.groups
    ]
    emit_rows(
        rows,
        output_format,
        empty="no criteria to consolidate",
        headers=["kept criterion", "merged from", "min similarity", "description"],
        cells=lambda r: (
            r["criterion"],
            ", ".join(r["merged"]) or "-",
            _number(r["min_similarity"]),
            r["description"][:60],
        ),
    )
    click.echo(
        f"{len(proposed)} proposed -> {len(result.criteria)} criteria ({embedder.name}, "
        f"threshold {threshold:g}); wrote {output} for review",
        err=True,
    )


@criteria.command()
@scoring_options
@click.option("--no-save", is_flag=True, help="Print the scores only; do not store them.")
@_errors_to_click
def quantify(output_format: str, no_save: bool, **options: Any) -> None:
    """Score runs against a criteria set: one stored score (label + number) per criterion."""
    query, where = RunsQuery.pick(options), StoreArgs.pick(options)
    wanted, judge = SetArgs.pick(options), JudgeArgs.pick(options)
    store = None if no_save else where.writable()
    try:
        source: SidecarApi | Store | None = store
        if store is None and (wanted.set_name or not query.runs_file):
            source = where.source()
        criteria_set, version = wanted.resolve(lambda: source)
        runs = load_runs(query, source)
        outcome = quantify_runs(judge.client(), criteria_set, version, runs, judge.concurrency, store)
        if store is not None:
            click.echo(
                f"stored {outcome.stored} score(s) for {len(runs)} run(s) ({criteria_set.name} {version})",
                err=True,
            )
    finally:
        if store is not None:
            store.close()
    rows = outcome.rows
    emit_rows(
        rows,
        output_format,
        empty="no runs matched",
        headers=["trace", "metric", "label", "score", "error"],
        cells=lambda r: (r["trace_id"][:12], r["metric"], r["label"], _number(r["score"]), r["error"][:60]),
    )


@dataclass(frozen=True, slots=True)
class Checked:
    """What robustness and verify start from: a set, the runs to check it on and the judge options."""

    query: RunsQuery
    source: SidecarApi | Store | None  # None: a set file and a runs file need no store
    criteria_set: CriteriaSet
    version: str
    runs: list[Run]
    judge: JudgeArgs

    @classmethod
    def pick(cls, options: dict[str, Any]) -> Checked:
        """Take the scoring options from a command's keyword arguments and read what they name."""
        query, where = RunsQuery.pick(options), StoreArgs.pick(options)
        wanted, judge = SetArgs.pick(options), JudgeArgs.pick(options)
        only_files = query.runs_file and not wanted.set_name and not query.success_metric
        source = None if only_files else where.source()
        criteria_set, version = wanted.resolve(lambda: source)
        runs = load_runs(query, source)
        return cls(query, source, criteria_set, version, runs, judge)


@criteria.command()
@scoring_options
@click.option(
    "--repeat", default=3, show_default=True, type=click.IntRange(min=2), help="Quantify each run k times."
)
@click.option(
    "--max-spread",
    default=DEFAULT_MAX_SPREAD,
    show_default=True,
    type=float,
    help="Flag a criterion unstable above this std across repetitions (share of its value range).",
)
@click.option(
    "--min-gap",
    default=DEFAULT_MIN_GAP,
    show_default=True,
    type=float,
    help="Flag a criterion that does not separate when successful minus failed mean is below this "
    "(share of its value range).",
)
@_errors_to_click
def robustness(output_format: str, repeat: int, max_spread: float, min_gap: float, **options: Any) -> None:
    """Quantify the same runs k times: mean and spread per criterion, and success/failure separation."""
    job = Checked.pick(options)
    query, runs = job.query, job.runs
    labelled = split_runs(runs, query.rule, scores_by_trace(job.source, query, runs))
    client = job.judge.client()
    results = repeat_quantify(client, job.criteria_set, job.version, runs, repeat, job.judge.concurrency)
    report = robustness_report(
        job.criteria_set,
        runs,
        results,
        {r.trace_id for r in labelled.successful},
        {r.trace_id for r in labelled.failed},
        max_spread=max_spread,
        min_gap=min_gap,
    )
    emit_rows(
        [item.to_json() for item in report],
        output_format,
        empty="no criteria",
        headers=["criterion", "values", "errors", "mean", "spread", "success", "failed", "gap", "p", "flags"],
        cells=lambda r: (
            r["criterion"],
            r["values"],
            r["errors"],
            _number(r["mean"]),
            _number(r["spread"]),
            _number(r["success_mean"]),
            _number(r["failure_mean"]),
            _number(r["gap"]),
            _number(r["p_value"]),
            ", ".join(r["flags"]) or "ok",
        ),
    )
    click.echo(
        f"{len(runs)} run(s) x {repeat}: {len(labelled.successful)} successful, "
        f"{len(labelled.failed)} failed "
        f"({query.rule.describe()}), {len(labelled.unlabelled)} without a score",
        err=True,
    )


@criteria.command("verify")
@scoring_options
@click.option("--mode", type=click.Choice(["steps", "sentences"]), default="steps", show_default=True)
@click.option(
    "--share",
    default=DEFAULT_SHARE,
    show_default=True,
    type=click.FloatRange(0, 1, min_open=True, max_open=True),
)
@click.option("--seed", default=0, show_default=True, type=int, help="Seed for choosing what to remove.")
@_errors_to_click
def verify_command(output_format: str, mode: str, share: float, seed: int, **options: Any) -> None:
    """Remove a share of steps (or final-response sentences): how often does the original score higher?"""
    job = Checked.pick(options)
    runs = job.runs
    result = verify(
        job.judge.client(),
        job.criteria_set,
        job.version,
        runs,
        mode="steps" if mode == "steps" else "sentences",
        share=share,
        seed=seed,
        concurrency=job.judge.concurrency,
    )
    emit_rows(
        [item.to_json() for item in result.criteria],
        output_format,
        empty="no criteria",
        headers=["criterion", "compared", "original higher", "same", "original lower", "higher share"],
        cells=lambda r: (
            r["criterion"],
            r["compared"],
            r["original_higher"],
            r["same"],
            r["original_lower"],
            _number(r["higher_share"]),
        ),
    )
    click.echo(
        f"{len(runs) - result.skipped} of {len(runs)} run(s) disturbed ({share:.0%} of {mode}, seed {seed}); "
        f"{result.skipped} had fewer than two {mode} to remove from",
        err=True,
    )


@criteria.command("save")
@click.argument("file", type=click.Path(dir_okay=False, exists=True))
@click.option("--name", "set_name", help="Save under this name (default: the file's).")
@store_options
@_errors_to_click
def save_command(file: str, set_name: str | None, **options: Any) -> None:
    """Store a reviewed criteria set; changed content gets the next version number."""
    criteria_set = load_criteria_file(file, name=set_name)
    store = StoreArgs.pick(options).writable()
    try:
        result = save_set(store, criteria_set, source=file)
    finally:
        store.close()
    stored = result.stored
    if result.added:
        click.echo(f"saved {stored.criteria_set.name} version {stored.number} ({stored.version})")
    else:
        click.echo(
            f"{stored.criteria_set.name} unchanged: "
            f"version {stored.number} ({stored.version}) has this content"
        )


def _sets(options: dict[str, Any], params: dict[str, str]) -> list[dict[str, Any]]:
    source = StoreArgs.pick(options).source()
    if isinstance(source, SidecarApi):
        return source.get_lines(SETS_ROUTE, params)
    try:
        return read_sets(source, params)
    finally:
        source.close()


@criteria.command("list")
@store_options
@format_option
@_errors_to_click
def list_command(output_format: str, **options: Any) -> None:
    """The newest version of every saved criteria set."""
    emit_rows(
        _sets(options, {}),
        output_format,
        empty="no criteria sets saved yet (agenttrail criteria save FILE --name NAME)",
        headers=["name", "version", "criteria", "saved from"],
        cells=lambda r: (
            r["name"],
            r["version"],
            ", ".join(c["name"] for c in r["definition"]["criteria"]),
            r["source"],
        ),
    )


@criteria.command("show")
@click.argument("name")
@click.option("--version", "number", type=click.IntRange(min=1), help="Version number (default: newest).")
@store_options
@format_option
@_errors_to_click
def show_command(name: str, number: int | None, output_format: str, **options: Any) -> None:
    """One saved set: its criteria and accepted values (YAML, the form `save` reads)."""
    rows = _sets(options, {"name": name, **({"version": str(number)} if number else {})})
    if not rows:
        raise click.ClickException(f"no criteria set named {name!r}")
    row = rows[0]
    if output_format == "json":
        click.echo(json.dumps(row, ensure_ascii=False))
        return
    click.echo(f"# {row['name']} {row['version']} (saved from {row['source']})")
    click.echo(yaml.safe_dump(row["definition"], sort_keys=False, allow_unicode=True, width=100).rstrip())
    if len(rows) > 1:
        click.echo(f"# older versions: {', '.join(str(r['number']) for r in rows[1:])}", err=True)


__all__ = ["criteria", "format_table"]

"""The evaluators' tables, as migrations appended to the collector's (versions from 100;
online judges 110-114; 116 and 119 the monitoring rollups, monitoring/rollups.py)."""

from __future__ import annotations

from typing import NamedTuple

from agenttrail.collector.schema import Migration
from agenttrail.evaluators.monitoring.rollups import ROLLUP_MIGRATIONS, SCORES_VERSION


class ScoreRow(NamedTuple):
    """A `scores` row: one metric or judge verdict on one run revision. The field names are the
    columns (`Store.insert`); the judge fields (migration 110) keep their DDL defaults for metrics."""

    TraceId: str
    RootSpanId: str
    Metric: str
    Evaluator: str
    EvaluatorVersion: str
    Score: float | None  # None: no value (an error, or a label-only verdict)
    Label: str
    Explanation: str
    Agent: str
    Task: str
    RunStart: str  # `seconds.fraction` text
    Revision: int
    ReferenceVersion: int
    Error: str
    CreatedAt: str
    Model: str = ""
    PromptTokens: int = 0
    CompletionTokens: int = 0
    LatencyMs: int = 0
    Cost: float = 0.0
    Details: str = ""  # JSON object, or ""
    # The scored revision's agent version (migration 122), which the scores' rollups carry for
    # drift; None where the writer does not know it: the rollups' view looks the run up then.
    AgentVersion: str | None = None


class ScoredRunRow(NamedTuple):
    """A `scores_runs` row: one run revision's metrics as arrays, which the table's view expands
    into `scores` rows (one per metric; Explanation and Error empty, judge fields at their
    defaults). The online evaluator writes these: a fifth of the rows to encode and parse."""

    TraceId: str
    RootSpanId: str
    Evaluator: str
    EvaluatorVersion: str
    Agent: str
    Task: str
    RunStart: str  # `seconds.fraction` text
    Revision: int
    ReferenceVersion: int
    CreatedAt: str
    AgentVersion: str | None
    Metrics: list[str]
    Scores: list[float]
    Labels: list[str]


class ReferenceRow(NamedTuple):
    """A `references` row: one version of one task's reference (reference_store)."""

    Task: str
    Version: int
    Entry: str  # ReferenceEntry.to_json as JSON text
    ContentHash: str
    Source: str
    LoadedAt: str  # `seconds.fraction` text


class HeartbeatRow(NamedTuple):
    """An `evaluator_heartbeats` row: a worker is alive on one queue key (run_queue)."""

    WorkerId: str
    EvaluatorVersion: str  # the queue key
    SeenAt: str  # `seconds.fraction` text


# Per task, every loaded version of its reference; the newest version applies.
REFERENCES = """
CREATE TABLE IF NOT EXISTS references (
    Task String,
    Version UInt32,
    Entry String,
    ContentHash String,
    Source String,
    LoadedAt DateTime64(3)
) ENGINE = ReplacingMergeTree
ORDER BY (Task, Version)
"""

# One row per (run, metric, evaluator version); re-scoring a new revision replaces it.
SCORES = """
CREATE TABLE IF NOT EXISTS scores (
    TraceId String,
    RootSpanId String,
    Metric LowCardinality(String),
    Evaluator LowCardinality(String),
    EvaluatorVersion LowCardinality(String),
    Score Nullable(Float64),
    Label String,
    Explanation String,
    Agent LowCardinality(String),
    Task String,
    RunStart DateTime64(6),
    Revision UInt32,
    ReferenceVersion UInt32,
    Error String,
    CreatedAt DateTime64(6),
    INDEX idx_created CreatedAt TYPE minmax GRANULARITY 1,
    INDEX idx_run_start RunStart TYPE minmax GRANULARITY 1
) ENGINE = ReplacingMergeTree(CreatedAt)
ORDER BY (TraceId, RootSpanId, Metric, EvaluatorVersion)
"""

# What each evaluator decided about each run revision: scored, sampled out, filtered, error.
# The worker's queue is "recent runs with no decision", so nothing depends on a watermark.
DECISIONS = """
CREATE TABLE IF NOT EXISTS evaluation_decisions (
    TraceId String,
    RootSpanId String,
    Evaluator LowCardinality(String),
    EvaluatorVersion LowCardinality(String),
    Revision UInt32,
    Decision LowCardinality(String),
    Detail String,
    WorkerId String,
    DecidedAt DateTime64(6)
) ENGINE = ReplacingMergeTree(DecidedAt)
ORDER BY (EvaluatorVersion, TraceId, RootSpanId, Revision)
"""

# Live workers announce themselves; they split runs between them by trace-id hash.
HEARTBEATS = """
CREATE TABLE IF NOT EXISTS evaluator_heartbeats (
    WorkerId String,
    EvaluatorVersion LowCardinality(String),
    SeenAt DateTime64(3)
) ENGINE = ReplacingMergeTree(SeenAt)
ORDER BY (EvaluatorVersion, WorkerId)
TTL toDateTime(SeenAt) + INTERVAL 1 DAY
"""

# What an LLM judge's verdict carries beyond a metric value (spec/judges.md). Deterministic
# metrics leave these at their defaults. Details holds a JSON object (e.g. sub_scores).
ADD_JUDGE_COLUMNS = tuple(
    f"ALTER TABLE scores ADD COLUMN IF NOT EXISTS {column}"
    for column in (
        "Model LowCardinality(String) DEFAULT ''",
        "PromptTokens UInt32 DEFAULT 0",
        "CompletionTokens UInt32 DEFAULT 0",
        "LatencyMs UInt32 DEFAULT 0",
        "Cost Float64 DEFAULT 0",
        "Details String DEFAULT ''",
    )
)

# Migration 123: the online evaluator's entry to `scores`, a run a row (ScoredRunRow). A Null
# table keeps nothing; its view writes the expanded rows into `scores`, whose own views (the
# rollups) fire on them as on any insert. Per run of five metrics, a batch of 2,000: ~49 us of
# CPU as five rows, ~29 as one (docs/performance.md, asm21).
SCORES_RUNS = """
CREATE TABLE IF NOT EXISTS scores_runs (
    TraceId String,
    RootSpanId String,
    Evaluator LowCardinality(String),
    EvaluatorVersion LowCardinality(String),
    Agent LowCardinality(String),
    Task String,
    RunStart DateTime64(6),
    Revision UInt32,
    ReferenceVersion UInt32,
    CreatedAt DateTime64(6),
    AgentVersion LowCardinality(Nullable(String)),
    Metrics Array(LowCardinality(String)),
    Scores Array(Nullable(Float64)),
    Labels Array(String)
) ENGINE = Null
"""
SCORES_RUNS_MV = """
CREATE MATERIALIZED VIEW IF NOT EXISTS scores_runs_mv TO scores
AS SELECT TraceId, RootSpanId, Metric, Evaluator, EvaluatorVersion, Score, Label, '' AS Explanation,
    Agent, Task, RunStart, Revision, ReferenceVersion, '' AS Error, CreatedAt, AgentVersion
FROM scores_runs ARRAY JOIN Metrics AS Metric, Scores AS Score, Labels AS Label
"""

EVALUATOR_MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        100,
        "references, scores, evaluation decisions, worker heartbeats",
        (REFERENCES, SCORES, DECISIONS, HEARTBEATS),
    ),
    Migration(110, "judge results in scores: model, tokens, latency, cost, details", ADD_JUDGE_COLUMNS),
    *ROLLUP_MIGRATIONS,
    # SCORES_VERSION again (IF NOT EXISTS): the view writes the column 122 adds.
    Migration(
        123,
        "scores written a run a row (arrays), expanded by a view",
        (SCORES_VERSION, SCORES_RUNS, SCORES_RUNS_MV),
    ),
)

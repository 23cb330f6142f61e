"""ListScores: filters by run time, agent, task, metric and trace; keyset pages that stay stable."""

from __future__ import annotations

import json
import time
from typing import Any

import grpc
import pytest
from google.protobuf.timestamp_pb2 import Timestamp
from otlp_builders import new_span_id, new_trace_id

from agenttrail.api.v1 import evaluation_pb2 as pb
from agenttrail.evaluators.scoring.schema import ScoreRow

NOW = time.time()
METRICS = ("trajectory_recall", "latency", "failure")


def score_rows(count: int, *, start: float = NOW - 3600, step_s: float = 60.0) -> list[ScoreRow]:
    """`count` runs (one trace each) with three scores each; agents and tasks alternate.

    Every third run shares its start time with the one before, so paging must order ties."""
    rows = []
    for i in range(count):
        trace, root = new_trace_id(), new_span_id()
        run_start = start + step_s * (i - i % 3 // 2)
        for metric in METRICS:
            score = None if metric == "trajectory_recall" and i % 4 == 0 else i / 10
            rows.append(
                ScoreRow(
                    trace,
                    root,
                    metric,
                    "trajectory",
                    "trajectory-abc",
                    score,
                    "",
                    "",
                    f"agent-{i % 2}",
                    f"task-{i % 3}",
                    f"{run_start:.6f}",
                    1,
                    1,
                    "",
                    f"{NOW:.6f}",
                )
            )
    return rows


@pytest.fixture
def stored(api: Any) -> list[ScoreRow]:
    rows = score_rows(12)
    api.sidecar.store.insert("scores", rows)
    return rows


def at(seconds: float) -> Timestamp:
    stamp = Timestamp()
    stamp.FromMicroseconds(int(seconds * 1e6))
    return stamp


def key(score: pb.Score) -> tuple[str, str]:
    return score.trace_id, score.result.metric


def list_all(api: Any, **filters: Any) -> list[pb.Score]:
    return list(api.stub.ListScores(pb.ListScoresRequest(page_size=1000, **filters), timeout=30).scores)


def test_filters_select_the_matching_scores(api: Any, stored: list[tuple[Any, ...]]) -> None:
    """agent, task, metric, trace_id and the run-start range each select exactly their rows."""
    everything = list_all(api)
    assert len(everything) == len(stored)
    assert {key(s) for s in list_all(api, agent="agent-1")} == {
        (r[0], r[2]) for r in stored if r[8] == "agent-1"
    }
    assert {key(s) for s in list_all(api, task="task-2", metric="latency")} == {
        (r[0], r[2]) for r in stored if r[9] == "task-2" and r[2] == "latency"
    }
    trace = stored[5][0]
    assert {key(s) for s in list_all(api, trace_id=trace)} == {(trace, metric) for metric in METRICS}
    since, until = NOW - 3600 + 90, NOW - 3600 + 330  # between run starts (a minute apart)
    in_range = {(r[0], r[2]) for r in stored if since <= float(r[10]) < until}
    assert 0 < len(in_range) < len(stored)
    assert {key(s) for s in list_all(api, since=at(since), until=at(until))} == in_range


def test_scores_carry_their_run_and_a_missing_score_stays_missing(
    api: Any, stored: list[tuple[Any, ...]]
) -> None:
    """Each score names its run; a NULL score is an unset field, not 0; newest runs come first."""
    scores = list_all(api)
    starts = [s.run_start.ToMicroseconds() for s in scores]
    assert starts == sorted(starts, reverse=True)
    first = next(r for r in stored if r[2] == "trajectory_recall" and r[5] is None)
    found = next(s for s in scores if key(s) == (first[0], first[2]))
    assert not found.result.HasField("score")
    assert (found.root_span_id, found.agent, found.task, found.revision) == (first[1], first[8], first[9], 1)
    assert found.result.evaluator_version == "trajectory-abc"
    row = stored[3 * 7 + METRICS.index("latency")]  # the eighth run's latency: 0.7
    latency = next(s for s in scores if key(s) == (row[0], "latency"))
    assert latency.result.score == row[5] == pytest.approx(0.7)


@pytest.mark.parametrize("page_size", [1, 4, 7, 36])
def test_pages_cover_every_score_once_in_order(
    api: Any, stored: list[tuple[Any, ...]], page_size: int
) -> None:
    """Following next_page_token visits every score exactly once, in the unpaged order."""
    pages: list[list[pb.Score]] = []
    token = ""
    while True:
        response = api.stub.ListScores(
            pb.ListScoresRequest(page_size=page_size, page_token=token), timeout=30
        )
        pages.append(list(response.scores))
        token = response.next_page_token
        if not token:
            break
    assert all(len(page) == page_size for page in pages[:-1])
    assert 1 <= len(pages[-1]) <= page_size
    assert [key(s) for page in pages for s in page] == [key(s) for s in list_all(api)]


def test_pages_do_not_shift_when_newer_scores_arrive(api: Any, stored: list[tuple[Any, ...]]) -> None:
    """A score for a newer run written between two pages neither repeats nor skips anything."""
    first = api.stub.ListScores(pb.ListScoresRequest(page_size=10), timeout=30)
    api.sidecar.store.insert("scores", score_rows(2, start=NOW - 60))
    rest = list_all_from(api, first.next_page_token, page_size=10)
    seen = [key(s) for s in first.scores] + [key(s) for s in rest]
    assert seen == [key(s) for s in list_all(api) if s.trace_id in {r[0] for r in stored}]


def list_all_from(api: Any, token: str, *, page_size: int, **filters: Any) -> list[pb.Score]:
    scores: list[pb.Score] = []
    while token:
        request = pb.ListScoresRequest(page_size=page_size, page_token=token, **filters)
        response = api.stub.ListScores(request, timeout=30)
        scores.extend(response.scores)
        token = response.next_page_token
    return scores


def test_filters_and_paging_combine(api: Any, stored: list[tuple[Any, ...]]) -> None:
    """Paging a filtered listing pages only the filtered scores."""
    first = api.stub.ListScores(pb.ListScoresRequest(page_size=2, metric="failure"), timeout=30)
    rest = list_all_from(api, first.next_page_token, page_size=2, metric="failure")
    assert [key(s) for s in [*first.scores, *rest]] == [key(s) for s in list_all(api, metric="failure")]
    assert len(rest) + len(first.scores) == 12


@pytest.mark.parametrize(
    ("request_", "field"),
    [
        (pb.ListScoresRequest(page_size=1001), "page_size"),
        (pb.ListScoresRequest(page_size=-1), "page_size"),
        (pb.ListScoresRequest(trace_id="not-hex"), "trace_id"),
        (pb.ListScoresRequest(page_token="garbage!"), "page_token"),
    ],
)
def test_bad_listing_requests_name_the_field(api: Any, request_: pb.ListScoresRequest, field: str) -> None:
    """A bad page size, trace id or token is INVALID_ARGUMENT naming the field."""
    with pytest.raises(grpc.RpcError) as caught:
        api.stub.ListScores(request_, timeout=30)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert caught.value.details().startswith(field)


def test_a_token_is_refused_with_other_filters(api: Any, stored: list[tuple[Any, ...]]) -> None:
    """A page token from one listing is refused for a listing with other filters."""
    token = api.stub.ListScores(
        pb.ListScoresRequest(page_size=2, agent="agent-0"), timeout=30
    ).next_page_token
    assert token
    with pytest.raises(grpc.RpcError) as caught:
        api.stub.ListScores(pb.ListScoresRequest(page_size=2, agent="agent-1", page_token=token), timeout=30)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "other filters" in caught.value.details()


def test_judge_scores_carry_model_tokens_and_details(api: Any) -> None:
    """A stored judge verdict lists with its model, token counts, latency, cost and details."""
    trace = new_trace_id()
    row = (trace, new_span_id(), "task_done", "task_done", "v1", None, "", "", "bot", "t", f"{NOW:.6f}", 1, 0)
    judge_columns = ("gpt-x", 120, 30, 900, 0.002, json.dumps({"sub_scores": {"book": "unsure"}}))
    api.sidecar.store.insert("scores", [ScoreRow(*row, "model timed out", f"{NOW:.6f}", *judge_columns)])
    (score,) = list_all(api, trace_id=trace)
    result = score.result
    assert (result.model, result.prompt_tokens, result.completion_tokens) == ("gpt-x", 120, 30)
    assert result.latency_ms == 900
    assert result.cost == pytest.approx(0.002)
    assert json.loads(result.details_json) == {"sub_scores": {"book": "unsure"}}
    assert result.error == "model timed out"
    assert not result.HasField("score")

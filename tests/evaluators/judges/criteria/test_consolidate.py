"""Consolidation: the real offline MiniLM model and an embeddings endpoint, through the API and the CLI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from llm_server import Reply

from agenttrail.evaluators.cli.criteria import criteria
from agenttrail.evaluators.judges.criteria.consolidate import consolidate, cosine_matrix
from agenttrail.evaluators.judges.criteria.embeddings import EmbeddingError, EndpointEmbedder, LocalEmbedder
from agenttrail.evaluators.judges.criteria.model import parse_criterion

# Importing torch and sentence-transformers for the offline model took over 120 s on a loaded
# 2-core machine running the suite on several workers.
pytestmark = pytest.mark.timeout(600)

SCALE = [{"label": "poor", "value": 0}, {"label": "good", "value": 1}]
PROPOSED = [
    ("Politeness", "The agent is polite to the customer."),
    ("Politeness", "The agent is polite and courteous to the customer."),
    ("Courtesy", "The agent is polite to the customer."),
    ("Tool efficiency", "The agent avoids unnecessary tool calls."),
    ("Efficiency", "The agent avoids unnecessary tool calls."),
    ("Refund correctness", "The refunded amount matches the order total."),
    ("Refund accuracy", "The refunded amount matches the total of the order."),
    ("Response language", "The reply is written in the customer's language."),
]


def proposed() -> list[Any]:
    return [
        parse_criterion({"name": n, "description": d, "accepted_values": SCALE}, f"proposal {i}")
        for i, (n, d) in enumerate(PROPOSED)
    ]


@pytest.fixture(scope="module")
def local() -> LocalEmbedder:
    return LocalEmbedder()


def test_local_model_merges_paraphrases_and_keeps_unrelated_apart(local: LocalEmbedder) -> None:
    """With the real offline model at 0.85, paraphrases form one criterion each, unrelated stay alone."""
    result = consolidate(proposed(), local)
    groups = [[group.kept.name, *(c.name for c in group.merged)] for group in result.groups]
    assert [sorted(group) for group in groups] == [
        ["Courtesy", "Politeness", "Politeness"],
        ["Efficiency", "Tool efficiency"],
        ["Refund accuracy", "Refund correctness"],
        ["Response language"],
    ]
    assert len(result.criteria) == 4
    assert all(group.min_similarity >= 0.85 for group in result.groups)
    assert result.embedder == "local:all-MiniLM-L6-v2"


def test_local_model_similarity_is_cosine_of_normalised_vectors(local: LocalEmbedder) -> None:
    """The model gives 384-d vectors; a text is identical to itself and far from an unrelated one."""
    vectors = local.embed(["Politeness: be polite.", "Politeness: be polite.", "Refund amount matches."])
    assert [len(v) for v in vectors] == [384, 384, 384]
    matrix = cosine_matrix(vectors)
    assert matrix[0][1] == pytest.approx(1.0, abs=1e-6)
    assert matrix[0][2] < 0.5


def test_a_higher_threshold_merges_less(local: LocalEmbedder) -> None:
    """Raising the threshold to 0.99 leaves only near-identical texts merged."""
    result = consolidate(proposed(), local, threshold=0.99)
    assert len(result.criteria) == len(PROPOSED)


def axis_vectors(request: dict[str, Any]) -> Reply:
    """An endpoint embedding each text on the axis of its first word (so same-first-word texts merge)."""
    axes = {"Politeness": 0, "Courtesy": 0, "Tool": 1, "Efficiency": 1, "Refund": 2, "Response": 3}
    vectors = []
    for text in request["input"]:
        vector = [0.0] * 4
        vector[axes[text.split()[0].rstrip(":")]] = 1.0
        vectors.append(vector)
    return Reply.embeddings(vectors)


def test_endpoint_backend_groups_by_returned_vectors(serve: Any) -> None:
    """The openai backend sends "name: description" texts to /embeddings and groups by its vectors."""
    llm = serve(axis_vectors)
    embedder = EndpointEmbedder("embed-model", base_url=llm.base_url, api_key="test")
    result = consolidate(proposed(), embedder)
    assert len(result.criteria) == 4
    request = llm.requests[0]
    assert request["_path"].endswith("/embeddings")
    assert request["model"] == "embed-model"
    assert request["input"][0] == "Politeness: The agent is polite to the customer."


def test_endpoint_failure_is_a_clear_error(serve: Any) -> None:
    """An endpoint error becomes an EmbeddingError naming the backend."""
    llm = serve(lambda request: Reply.error(400, "no such model"))
    embedder = EndpointEmbedder("embed-model", base_url=llm.base_url, api_key="test")
    with pytest.raises(EmbeddingError, match="openai:embed-model"):
        consolidate(proposed(), embedder)


def proposals_file(path: Path, criteria: list[tuple[str, str]], run: int = 1) -> str:
    document = {
        "name": "refunds",
        "task": "Refund an order",
        "proposals": [
            {
                "run": run,
                "criteria": [{"name": n, "description": d, "accepted_values": SCALE} for n, d in criteria],
            }
        ],
    }
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    return str(path)


def test_cli_consolidates_several_files_and_says_what_was_merged(tmp_path: Path, serve: Any) -> None:
    """`criteria consolidate` merges two critic files into a reviewable set whose notes list merges."""
    llm = serve(axis_vectors)
    first = proposals_file(tmp_path / "a.yaml", [PROPOSED[i] for i in (0, 2, 3, 5)])
    second = proposals_file(tmp_path / "b.yaml", [PROPOSED[i] for i in (1, 4, 6, 7)], run=2)
    output = tmp_path / "set.json"
    result = CliRunner().invoke(
        criteria,
        ["consolidate", first, second, "--output", str(output), "--embeddings", "openai",
         "--embedding-model", "embed-model", "--embedding-base-url", llm.base_url, "--format", "json"],
        env={"OPENAI_API_KEY": "test"},
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert [row["criterion"] for row in rows] == ["Politeness", "Tool efficiency", "Refund correctness",
                                                  "Response language"]  # fmt: skip
    assert rows[1]["merged"] == ["Efficiency"]
    document = json.loads(output.read_text())
    assert document["name"] == "refunds"
    assert len(document["criteria"]) == 4
    assert {"kept": "Tool efficiency", "merged": ["Efficiency"], "min_similarity": 1.0} in document["notes"][
        "merged"
    ]
    assert "8 proposed -> 4 criteria" in result.stderr


def test_cli_needs_a_model_for_the_endpoint_backend(tmp_path: Path) -> None:
    """--embeddings openai without a model is refused with a message naming the option."""
    first = proposals_file(tmp_path / "a.yaml", PROPOSED[2:4])
    result = CliRunner().invoke(
        criteria, ["consolidate", first, "--output", str(tmp_path / "o.yaml"), "--embeddings", "openai"]
    )
    assert result.exit_code == 1
    assert "--embedding-model" in result.output


def test_missing_extra_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without sentence-transformers importable, the local backend names torch's CPU build and the extra."""
    monkeypatch.setitem(__import__("sys").modules, "sentence_transformers", None)
    with pytest.raises(EmbeddingError, match=r"torch==2\.13\.0.*agenttrail\[embeddings\]"):
        LocalEmbedder()

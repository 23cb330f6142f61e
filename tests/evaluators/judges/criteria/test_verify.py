"""Verification: disturbed copies (steps or sentences removed) against a length-sensitive server."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st
from llm_server import Reply

from agenttrail.evaluators.cli.criteria import criteria
from agenttrail.evaluators.judges.criteria.runs import run_from_json
from agenttrail.evaluators.judges.criteria.verify import disturb, split_sentences

from .support import judge_args, run_doc, step_count, user_text, write_runs, write_set

LENGTHS = [{"label": str(n), "value": n} for n in range(11)]
LENGTH_SET = {
    "name": "size",
    "criteria": [
        {"name": "steps", "description": "How many steps the run took.", "accepted_values": LENGTHS},
        {
            "name": "sentences",
            "description": "How many sentences the answer has.",
            "accepted_values": LENGTHS,
        },
        {"name": "constant", "description": "Always the same.", "accepted_values": LENGTHS[:2]},
    ],
}


def final_response(request: dict[str, Any]) -> str:
    match = re.search(r"<<<DATA name=final_response>>>\n(.*?)\n<<<END DATA>>>", user_text(request), re.S)
    assert match is not None
    return match.group(1)


def by_length(request: dict[str, Any]) -> Reply:
    """Scores are the run's step count and its answer's sentence count: shorter copies score lower."""
    sentences = len(split_sentences(final_response(request)))
    return Reply.chat_json(
        {
            "steps": {"label": str(min(step_count(request), 10)), "explanation": ""},
            "sentences": {"label": str(min(sentences, 10)), "explanation": ""},
            "constant": {"label": "1", "explanation": ""},
        }
    )


ANSWER = "Your order was found. The refund is issued. It takes three days. Thank you!"


def verify_cli(llm: Any, tmp_path: Path, *args: str) -> dict[str, dict[str, Any]]:
    runs = write_runs(
        tmp_path / "runs.jsonl",
        [run_doc(["a", "b", "c", "d"], output=ANSWER), run_doc(list("abcdefgh"), output="One. Two."),
         run_doc(["a"], output="Only one sentence."), run_doc(["a", "b"], output=ANSWER)],
    )  # fmt: skip
    result = CliRunner().invoke(
        criteria,
        ["verify", "--criteria-file", write_set(tmp_path / "set.json", LENGTH_SET), "--runs-file", runs,
         "--format", "json", *args, *judge_args(llm)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    return {row["criterion"]: row for row in map(json.loads, result.stdout.splitlines())}


def test_removing_steps_lowers_the_step_criterion_only(serve: Any, tmp_path: Path) -> None:
    """With 25% of steps removed, originals score higher on steps every time and the same elsewhere."""
    llm = serve(by_length)
    report = verify_cli(llm, tmp_path)
    assert report["steps"] == {"criterion": "steps", "compared": 3, "original_higher": 3, "same": 0,
                               "original_lower": 0, "higher_share": 1.0}  # fmt: skip
    assert (report["sentences"]["same"], report["constant"]["same"]) == (3, 3)
    assert len(llm.chat_requests()) == 6  # the one-step run is skipped: nothing can go


def test_removing_sentences_lowers_the_sentence_criterion(serve: Any, tmp_path: Path) -> None:
    """--mode sentences shortens final responses; the sentence criterion notices, steps do not."""
    llm = serve(by_length)
    report = verify_cli(llm, tmp_path, "--mode", "sentences", "--share", "0.5")
    assert (report["sentences"]["compared"], report["sentences"]["original_higher"]) == (3, 3)
    assert report["steps"]["same"] == 3


def test_same_seed_same_copies(serve: Any, tmp_path: Path) -> None:
    """Two verifications with one seed send the model identical disturbed copies."""
    llm = serve(by_length)
    verify_cli(llm, tmp_path, "--seed", "3")
    first = [user_text(r) for r in llm.chat_requests()]
    verify_cli(llm, tmp_path, "--seed", "3")
    second = [user_text(r) for r in llm.chat_requests()[len(first) :]]
    assert sorted(first) == sorted(second)


@given(
    count=st.integers(min_value=0, max_value=30),
    share=st.floats(min_value=0.01, max_value=0.99),
    seed=st.integers(min_value=0, max_value=1000),
)
def test_disturbed_steps_are_an_ordered_subsequence(count: int, share: float, seed: int) -> None:
    """round(share*n) steps (at least 1, never all) go; the rest keep their order; a seed repeats."""
    run = run_from_json(run_doc([f"t{i}" for i in range(count)])).judge_input
    copy = disturb(run, "steps", share, random.Random(seed))
    if count < 2:
        assert copy is None
        return
    assert copy is not None
    kept = [call["name"] for call in copy.tool_calls]
    assert len(kept) == count - min(max(1, round(share * count)), count - 1)
    assert kept == sorted(kept, key=lambda name: int(name[1:]))
    again = disturb(run, "steps", share, random.Random(seed))
    assert again is not None
    assert [call["name"] for call in again.tool_calls] == kept

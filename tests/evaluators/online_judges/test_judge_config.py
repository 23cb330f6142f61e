"""The `judges:` config section: online keys parsed, model settings inherited, bad input named."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from agenttrail.collector.config import load_config
from agenttrail.collector.errors import ConfigError
from agenttrail.evaluators.judges.config import JudgesConfig, JudgeSpec
from agenttrail.evaluators.judges.registry import ClientPool
from agenttrail.evaluators.judges.setup import build_online_judges
from agenttrail.evaluators.scoring.worker import sample_fraction

SHIPPED = Path(__file__).parents[3] / "deploy" / "agenttrail.yaml"


def uncommented_example() -> dict[str, object]:
    """deploy/agenttrail.yaml with its judges example switched on."""
    text = SHIPPED.read_text()
    start = text.index("# judge_defaults:")
    lines = text[start:].splitlines()
    end = next((i for i, line in enumerate(lines) if not line.startswith("#")), len(lines))
    block = "\n".join(re.sub(r"^# ?", "", line) for line in lines[:end])  # up to the next section
    document = yaml.safe_load(text[:start] + block)
    assert isinstance(document, dict)
    return document


def test_shipped_example_parses(tmp_path: Path) -> None:
    """The commented example in deploy/agenttrail.yaml, switched on, is a valid judges section that
    leaves the collector settings alone."""
    document = uncommented_example()
    config = JudgesConfig.from_document(document, "example")
    assert [spec.name for spec in config.judges] == ["task_done", "final_answer", "trajectory"]
    assert [spec.name for spec in config.enabled] == ["task_done", "final_answer"]
    task_done, final_answer, _ = config.judges
    assert (task_done.sample_rate, task_done.agents, task_done.tasks) == (0.1, ("support-bot",), ())
    assert task_done.options["options"] == {"scope": "session"}
    assert task_done.options["model"] == "gpt-4o-mini"
    assert final_answer.options["model"] == "gpt-4o"
    assert final_answer.failure == "succeeded"
    assert "sample_rate" not in final_answer.options
    assert config.judges[2].version == "2026-11-01"
    built = build_online_judges(config)
    assert [(j.name, j.session, j.concurrency) for j in built] == [
        ("task_done", True, 4),
        ("final_answer", False, 4),
    ]
    path = tmp_path / "agenttrail.yaml"
    path.write_text(yaml.safe_dump(document))
    assert load_config({}, config_file=path, environ={}).store == "/var/lib/agenttrail"


def test_registry_errors_name_the_judge(tmp_path: Path) -> None:
    """Keys the judge registry does not know, or a bad type, are ConfigErrors naming file and judge."""
    path = tmp_path / "agenttrail.yaml"
    path.write_text(yaml.safe_dump({"judges": [{"name": "j", "type": "rubric", "model": "m", "colour": 1}]}))
    with pytest.raises(ConfigError, match=r"agenttrail.yaml.*judge j.*colour"):
        build_online_judges(JudgesConfig.from_file(str(path)))
    path.write_text(yaml.safe_dump({"judges": [{"name": "j", "type": "oracle", "model": "m"}]}))
    with pytest.raises(ConfigError, match=r"agenttrail.yaml.*unknown type 'oracle'"):
        build_online_judges(JudgesConfig.from_file(str(path)))


@pytest.mark.parametrize(
    ("item", "message"),
    [
        ({"type": "rubric"}, r"judges\[0\]: key 'name' is required"),
        ({"name": "j"}, r"judge 'j': key 'type' is required"),
        ({"name": "j", "type": "rubric", "sample_rate": 1.5}, r"judge 'j': key 'sample_rate' must be"),
        ({"name": "j", "type": "rubric", "sample_rate": "half"}, r"key 'sample_rate'"),
        ({"name": "j", "type": "rubric", "failure": "maybe"}, r"judge 'j': key 'failure' must be one of"),
        ({"name": "j", "type": "rubric", "agents": "bot"}, r"judge 'j': key 'agents' must be a list"),
        (
            {"name": "j", "type": "rubric", "enabled": "yes"},
            r"judge 'j': key 'enabled' must be true or false",
        ),
        ({"name": "a@b", "type": "rubric"}, r"key 'name' must not contain"),
    ],
)
def test_bad_judges_are_named(tmp_path: Path, item: dict[str, object], message: str) -> None:
    """A bad judge definition is a ConfigError naming the file, the judge and the key."""
    path = tmp_path / "agenttrail.yaml"
    path.write_text(yaml.safe_dump({"judges": [item]}))
    with pytest.raises(ConfigError, match=message) as caught:
        JudgesConfig.from_file(str(path))
    assert str(path) in str(caught.value)


def test_section_shapes_are_checked() -> None:
    """Duplicate names, a non-list section and per-judge keys in judge_defaults are refused."""
    judge = {"name": "j", "type": "rubric"}
    with pytest.raises(ConfigError, match="used twice"):
        JudgesConfig.from_document({"judges": [judge, judge]}, "f")
    with pytest.raises(ConfigError, match="'judges' must be a list"):
        JudgesConfig.from_document({"judges": judge}, "f")
    with pytest.raises(ConfigError, match=r"judge_defaults key\(s\) \['sample_rate'\] are per judge"):
        JudgesConfig.from_document({"judges": [judge], "judge_defaults": {"sample_rate": 1}}, "f")
    with pytest.raises(ConfigError, match="no judge named 'x'"):
        JudgesConfig.from_document({"judges": [judge]}, "f").get("x")


def test_filters_name_the_filter() -> None:
    """filtered_by says which filter keeps a run out, and '' when none does."""
    spec = JudgeSpec("j", agents=("a",), tasks=("t",), failure="succeeded")
    assert spec.filtered_by("a", "t", False) == ""
    assert "agent 'b'" in spec.filtered_by("b", "t", False)
    assert "task 'u'" in spec.filtered_by("a", "u", False)
    assert spec.filtered_by("a", "t", True) == "failure: succeeded, and the run failed"


@given(st.text(alphabet="0123456789abcdef", min_size=32, max_size=32), st.floats(0, 1), st.floats(0, 1))
def test_sampling_is_monotonic_in_the_rate(trace_id: str, low: float, high: float) -> None:
    """A run sampled at some rate is sampled at every higher rate, so judges share their samples."""
    low, high = min(low, high), max(low, high)
    if JudgeSpec("a", sample_rate=low).sampled(trace_id):
        assert JudgeSpec("b", sample_rate=high).sampled(trace_id)
    assert JudgeSpec("c", sample_rate=high).sampled(trace_id) == (sample_fraction(trace_id) < high)


def test_the_readme_judges_example_builds() -> None:
    """The judges block in README's judge section loads and builds as shown (session idle time,
    tool correctness parameters, a response judge, a saved criteria set)."""
    readme = (Path(__file__).parents[3] / "README.md").read_text()
    block = readme.split("```yaml\njudges:\n", 1)[1].split("```", 1)[0]
    document = {**yaml.safe_load("judges:\n" + block), "judge_defaults": {"model": "m", "api_key": "k"}}
    pool = ClientPool(store_factory=lambda: pytest.fail("a saved set is read on first use"))
    built = {
        judge.name: judge
        for judge in build_online_judges(JudgesConfig.from_document(document, "README"), pool)
    }
    assert (built["conversation_done"].session, built["conversation_done"].session_idle_s) == (True, 900.0)
    assert built["picks"].judge.tool_correctness == {"threshold": 0.7}
    assert getattr(built["answer"].judge, "response_quality", False)

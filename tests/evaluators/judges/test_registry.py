"""Judges built from configuration: types, options, definitions, shared clients."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from llm_server import LlmServer, Reply

from agenttrail.collector.errors import ConfigError
from agenttrail.evaluators.judges import (
    JUDGE_TYPES,
    ClientPool,
    JudgeInput,
    JudgeSettings,
    TrajectoryAccuracyJudge,
    build_judge,
    judge_types,
    parse_judge_definitions,
)
from agenttrail.evaluators.judges.client import OpenAIJudgeClient

Serve = Callable[..., LlmServer]
ClientFor = Callable[..., OpenAIJudgeClient]


def test_judge_types_have_help() -> None:
    """Every type has a one-line description for help text."""
    types = judge_types()
    assert list(types) == [
        "rubric",
        "final_response",
        "trajectory_accuracy",
        "task_completion",
        "tool_selection",
        "criteria",
    ]
    assert all(text and "\n" not in text for text in types.values())


def test_unknown_type_and_option_are_named(serve: Serve, client_for: ClientFor) -> None:
    """An unknown type lists the valid ones; an unknown option is named with the judge and source."""
    client = client_for(serve(Reply.chat_json({})))
    with pytest.raises(ConfigError, match="unknown type 'vibes'; types: rubric, final_response"):
        build_judge("j", {"type": "vibes"}, client, "judges.yaml")
    with pytest.raises(ConfigError, match=r"judges.yaml: judge j: unknown option\(s\) \['continous'\]"):
        build_judge("j", {"type": "trajectory_accuracy", "continous": True}, client, "judges.yaml")
    with pytest.raises(ConfigError, match="option continuous: expected true or false"):
        build_judge("j", {"type": "trajectory_accuracy", "continuous": "yes"}, client, "judges.yaml")


def test_a_new_type_is_one_entry(
    serve: Serve, client_for: ClientFor, run: JudgeInput, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Registering a factory under a name makes build_judge and the help know it."""

    def strict(name: str, options: Any, client: Any, source: str) -> TrajectoryAccuracyJudge:
        """Trajectory accuracy that always uses the reference."""
        return TrajectoryAccuracyJudge(client, name=name, use_reference=True)

    monkeypatch.setitem(JUDGE_TYPES, "strict_accuracy", strict)
    llm = serve(Reply.chat_json({"reasoning": "ok", "score": True}))
    judge = build_judge("s", {"type": "strict_accuracy"}, client_for(llm), "t")
    assert judge.evaluate(run)[0].score == 1.0
    assert judge_types()["strict_accuracy"] == "Trajectory accuracy that always uses the reference."


def test_definitions_take_defaults_options_and_extra_keys() -> None:
    """A definition's own settings win over defaults; caller-known extra keys are kept apart."""
    document = {
        "judges": [
            {"name": "acc", "type": "trajectory_accuracy", "model": "big", "options": {"continuous": True}},
            {
                "name": "done",
                "type": "task_completion",
                "sample_rate": 0.1,
                "budget": {"tokens_per_day": 1000},
            },
        ]
    }
    defaults = {"model": "small", "base_url": "http://127.0.0.1:9/v1"}
    acc, done = parse_judge_definitions(document, "cfg.yaml", defaults=defaults, extra_keys={"sample_rate"})
    assert (acc.settings.model, acc.settings.base_url, acc.options) == (
        "big",
        defaults["base_url"],
        {"continuous": True},
    )
    assert (done.settings.model, done.settings.budget.tokens_per_day, done.extra) == (
        "small",
        1000,
        {"sample_rate": 0.1},
    )


def test_definition_mistakes_are_named() -> None:
    """Unknown keys, missing names, duplicate names and bad types say where they are."""
    base = {"model": "m"}
    with pytest.raises(
        ConfigError, match=r"cfg.yaml judges\[0\]: judge a: unknown key\(s\) \['sample_rate'\]"
    ):
        parse_judge_definitions(
            [{"name": "a", "type": "rubric", "sample_rate": 1}], "cfg.yaml", defaults=base
        )
    with pytest.raises(ConfigError, match="every judge needs a name"):
        parse_judge_definitions([{"type": "rubric"}], "cfg.yaml", defaults=base)
    with pytest.raises(ConfigError, match=r"used more than once: \['a'\]"):
        parse_judge_definitions(
            [{"name": "a", "type": "rubric"}, {"name": "a", "type": "task_completion"}],
            "cfg.yaml",
            defaults=base,
        )
    with pytest.raises(ConfigError, match="judge a: unknown type 'x'"):
        parse_judge_definitions([{"name": "a", "type": "x"}], "cfg.yaml", defaults=base)
    with pytest.raises(ConfigError, match="model: required"):
        parse_judge_definitions([{"name": "a", "type": "rubric"}], "cfg.yaml")


def test_client_pool_shares_a_client_per_settings() -> None:
    """Judges with equal settings share one client (budget and concurrency); others get their own."""
    made: list[JudgeSettings] = []

    def make(settings: JudgeSettings) -> Any:
        made.append(settings)
        return OpenAIJudgeClient(settings)

    pool = ClientPool(make)
    definitions = parse_judge_definitions(
        [
            {"name": "a", "type": "task_completion"},
            {"name": "b", "type": "trajectory_accuracy"},
            {"name": "c", "type": "task_completion", "model": "other"},
        ],
        "cfg",
        defaults={"model": "m", "base_url": "http://127.0.0.1:9/v1"},
    )
    judges = [pool.build(definition, "cfg") for definition in definitions]
    assert [judge.name for judge in judges] == ["a", "b", "c"]
    assert [settings.model for settings in made] == ["m", "other"]

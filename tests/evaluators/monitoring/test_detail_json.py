"""A drift event's JSON detail column is read by one function (display.json_object) wherever it is
shown: `agenttrail drift`'s evidence, an alert's summary and the console's Drift page, each with
its own fallback for text that holds no JSON object."""

from __future__ import annotations

import json

import pytest

from agenttrail.evaluators.console import app
from agenttrail.evaluators.monitoring import display, drift_events
from agenttrail.evaluators.monitoring.display import format_evidence, json_object
from agenttrail.evaluators.monitoring.drift_events import event_detail_text

ALARM = {"change_at_run": 37, "direction": "up", "threshold": 12.0}
STORED = json.dumps(
    {"status": "drift", "p_adjusted": None, "effect": "", "baseline": "", "note": json.dumps(ALARM)}
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"a": 1}', {"a": 1}),
        ("not json", None),
        ('{"a": 1', None),
        ("[1, 2]", None),
        ('"text"', None),
        ("", None),
        (None, None),
        (3, None),
    ],
)
def test_json_object_is_the_object_or_none(text: object, expected: object) -> None:
    """An object is returned as parsed; anything else (bad JSON, another JSON value, no text) is None."""
    assert json_object(text) == expected


def test_every_reader_of_the_detail_uses_the_one_function() -> None:
    """The CLI's evidence, the alert summary and the console share display.json_object."""
    assert drift_events.json_object is display.json_object
    assert app.json_object is display.json_object


def test_each_reader_keeps_its_fallback_for_text_that_is_no_json_object() -> None:
    """Evidence falls back to nothing, the alert summary and the console show the text as it is."""
    row = {"test": "page_hinkley", "p_value": None, "recent_n": 120}
    assert format_evidence({**row, "detail": "not json"}) == "no alarm"
    assert format_evidence({**row, "detail": STORED}).startswith("alarm at run 38 of 120, up")
    assert event_detail_text("not json", "page_hinkley") == "not json"
    assert event_detail_text("[1]") == "[1]"
    assert event_detail_text(STORED, "page_hinkley").startswith("alarm at run 38, up")
    assert app._detail("not json") == "not json"
    assert app._detail("") == {}
    assert app._detail(STORED)["note"] == ALARM  # the note's own JSON is read too
    assert app._detail(json.dumps({"note": "plain words"}))["note"] == "plain words"

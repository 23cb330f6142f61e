"""What every prompt-based judge shares: messages, version hash, the call, and result shapes.

A judge is an instruction text, the sections of the run it sees (rendered as data), a JSON
schema for its answer, optional few-shot examples, and `interpret` turning a validated answer
into results. `PromptJudge.evaluate` does the rest:

- a run that lacks what the judge needs (no reference, no tools) is *missing*: score None, no
  error, no model call, the reason in `details["missing"]`;
- a failed call is an error result: score None, `error` set, never a 0;
- `BudgetExhausted` propagates, so the caller pauses instead of recording anything.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final, TypeVar

from agenttrail.collector.errors import ConfigError
from agenttrail.evaluators.judges.base import ChatJudgeClient, JudgeCall, JudgeInput, JudgeResult
from agenttrail.evaluators.judges.render import (
    SECTIONS,
    Section,
    render_run,
    system_message,
    user_message,
)
from agenttrail.evaluators.judges.validation import check_schema

T = TypeVar("T")


def judge_version(*parts: Any) -> str:
    """A short hash of everything that changes what a judge's scores mean."""
    text = json.dumps(parts, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def client_identity(client: ChatJudgeClient) -> dict[str, Any]:
    """The model and temperature behind a client, where it exposes them (they change the meaning)."""
    settings = getattr(client, "settings", None)
    return {key: getattr(settings, key, None) for key in ("model", "temperature")}


def result_from_call(call: JudgeCall, **fields: Any) -> dict[str, Any]:
    """The usage fields of a JudgeResult taken from the call that produced it."""
    return {
        "model": call.model,
        "prompt_tokens": call.prompt_tokens,
        "completion_tokens": call.completion_tokens,
        "latency_s": call.latency_s,
        "cost": call.cost,
        **fields,
    }


class Options:
    """Reads a judge's options, converting and checking each; `done()` rejects the keys not read."""

    def __init__(self, options: Mapping[str, Any], source: str, judge_type: str) -> None:
        if not isinstance(options, Mapping):
            raise ConfigError(f"{source}: options must be a mapping, got {type(options).__name__}")
        self._options = options
        self._source = source
        self._type = judge_type
        self._read: set[str] = set()

    def get(self, key: str, default: T, convert: Callable[[Any], T] | None = None) -> T:
        self._read.add(key)
        if key not in self._options or self._options[key] is None:
            return default
        value = self._options[key]
        try:
            return convert(value) if convert is not None else value
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"{self._source}: option {key}: {exc}") from exc

    def done(self) -> None:
        unknown = sorted(set(self._options) - self._read)
        if unknown:
            raise ConfigError(
                f"{self._source}: unknown option(s) {unknown} for judge type {self._type}; "
                f"known: {sorted(self._read)}"
            )


def as_bool(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"expected true or false, got {value!r}")
    return value


def as_str(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError(f"expected a string, got {value!r}")
    return value


def as_choice(*choices: str) -> Callable[[Any], str]:
    def convert(value: Any) -> str:
        if value not in choices:
            raise ValueError(f"expected one of {list(choices)}, got {value!r}")
        return str(value)

    return convert


def as_sections(value: Any) -> tuple[Section, ...]:
    items = [value] if isinstance(value, str) else list(value)
    sections = tuple(section for item in items for section in SECTIONS if item == section)
    if len(sections) != len(items) or not items:
        raise ValueError(f"expected a list of {list(SECTIONS)}, got {value!r}")
    return sections


def as_str_mapping(value: Any) -> dict[str, str]:
    if not isinstance(value, Mapping) or not value:
        raise ValueError(f"expected a non-empty mapping of name -> text, got {value!r}")
    return {str(key): str(text) for key, text in value.items()}


def as_str_list(value: Any) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise ValueError(f"expected a list of strings, got {value!r}")
    return tuple(str(item) for item in value)


def as_examples(value: Any) -> tuple[Mapping[str, Any], ...]:
    if isinstance(value, (str, Mapping)) or not isinstance(value, Iterable):
        raise ValueError(f"expected a list of example mappings, got {value!r}")
    examples = tuple(value)
    if not all(isinstance(example, Mapping) for example in examples):
        raise ValueError("every few-shot example must be a mapping of run fields and verdict fields")
    return examples


_RUN_KEYS: Final = frozenset(
    {"input", "output", "tool_calls", "reference_trajectory", "expected_response", "available_tools"}
)


class PromptJudge:
    """Base of the judges: subclasses set the prompt pieces and implement `interpret`."""

    name: str
    version: str
    schema_name: str = "verdict"

    def __init__(
        self,
        client: ChatJudgeClient,
        *,
        name: str,
        instructions: str,
        schema: Mapping[str, Any],
        sections: Sequence[Section],
        examples: Sequence[Mapping[str, Any]] = (),
        meaning: Mapping[str, Any] | None = None,
    ) -> None:
        self.client = client
        self.name = name
        self.instructions = instructions
        self.schema = schema
        self.sections = tuple(sections)
        self.examples = tuple(self._check_example(i, example) for i, example in enumerate(examples, 1))
        self.version = judge_version(
            type(self).__name__,
            instructions,
            schema,
            self.sections,
            [{"run": run, "verdict": verdict} for run, verdict in self.examples],
            dict(meaning or {}),
            client_identity(client),
        )

    def _check_example(self, number: int, example: Mapping[str, Any]) -> tuple[JudgeInput, dict[str, Any]]:
        """Split an example into its run and its verdict (the answer's keys); the verdict must fit."""
        answer_keys = set(self.schema.get("properties", {}))
        unknown = sorted(set(example) - answer_keys - _RUN_KEYS)
        if unknown:
            raise ConfigError(
                f"judge {self.name}: few-shot example {number} has unknown key(s) {unknown}; "
                f"run keys: {sorted(_RUN_KEYS)}, verdict keys: {sorted(answer_keys)}"
            )
        verdict = {key: value for key, value in example.items() if key in answer_keys}
        try:
            check_schema(verdict, self.schema)
            self.validate(verdict)
        except ValueError as exc:
            raise ConfigError(f"judge {self.name}: few-shot example {number}: verdict {exc}") from exc
        run = JudgeInput.from_trajectory({key: value for key, value in example.items() if key in _RUN_KEYS})
        return run, verdict

    # -- what subclasses provide -------------------------------------------------------------

    def missing_reason(self, run: JudgeInput) -> str:
        """Why this run cannot be judged (then it is missing, not an error); "" to judge it."""
        return ""

    def validate(self, value: Any) -> None:
        """Checks beyond the schema; raise ValueError (sent back to the model for one repair)."""

    def interpret(self, value: Any, call: JudgeCall) -> list[JudgeResult]:
        raise NotImplementedError

    def render(self, run: JudgeInput) -> str:
        return render_run(run, self.sections)

    def images(self, run: JudgeInput) -> Sequence[str]:
        return ()

    # -- shared ------------------------------------------------------------------------------

    def messages(self, run: JudgeInput) -> list[dict[str, Any]]:
        parts = []
        for number, (example, verdict) in enumerate(self.examples, start=1):
            sections = render_run(example, self.sections, f"example_{number}.")
            parts.append(
                f"Example {number} (a graded run):\n\n{sections}\n\n"
                f"Verdict for example {number}: {json.dumps(verdict, ensure_ascii=False)}"
            )
        intro = "Evaluate the run below." if not parts else "Now evaluate the run below in the same way."
        parts.append(f"{intro}\n\n{self.render(run)}")
        return [system_message(self.instructions), user_message("\n\n".join(parts), self.images(run))]

    @property
    def outputs(self) -> tuple[str, ...]:
        """The metric names this judge's results carry."""
        return (self.name,)

    def result(self, metric: str | None = None, **fields: Any) -> JudgeResult:
        return JudgeResult(judge=self.name, version=self.version, metric=metric or self.name, **fields)

    def evaluate(self, run: JudgeInput) -> list[JudgeResult]:
        reason = self.missing_reason(run)
        if reason:
            return [self.result(explanation=reason, details={"missing": reason})]
        call = self.client.complete_json(
            self.messages(run),
            self.schema,
            schema_name=self.schema_name,
            validate=self.validate,
            judge=self.name,
        )
        if call.error:
            return [self.result(**result_from_call(call, error=call.error))]
        return self.interpret(call.value, call)

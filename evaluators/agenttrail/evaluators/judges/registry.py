"""Build judges from configuration: the judge types, and judge definitions with their model settings.

A judge definition (a list item of the config file's `judges:` section, or of a judges file for
`agenttrail evaluate --judge FILE`)::

    - name: answer_correct          # the metric name its scores are stored under
      type: final_response          # see JUDGE_TYPES
      model: gpt-4o-mini            # JudgeSettings keys, flat (defaults come from elsewhere)
      base_url: http://localhost:8000/v1
      budget: {tokens_per_day: 2000000}
      options: {}                   # the type's options

Adding a judge type is one line in `JUDGE_TYPES`: a factory ``(name, options, client, source)``
whose docstring's first line is its help text. A type that reads saved data from the store
(criteria sets) is also in `STORE_JUDGE_TYPES` and is given the builder's ``store_factory``
(`ClientPool(store_factory=...)`, set by whoever builds the judges), never a global.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Protocol, TypeAlias

from agenttrail.collector.errors import ConfigError
from agenttrail.evaluators.judges.base import ChatJudgeClient, Judge
from agenttrail.evaluators.judges.client import JudgeSettings, OpenAIJudgeClient
from agenttrail.evaluators.judges.criteria.judge import criteria_judge_factory
from agenttrail.evaluators.judges.rubric import RubricJudge, final_response_judge
from agenttrail.evaluators.judges.task_completion import TaskCompletionJudge
from agenttrail.evaluators.judges.tool_selection import ToolSelectionJudge
from agenttrail.evaluators.judges.trajectory_accuracy import TrajectoryAccuracyJudge

if TYPE_CHECKING:
    from agenttrail.collector.store import Store

JudgeFactory: TypeAlias = Callable[[str, Mapping[str, Any], ChatJudgeClient, str], Judge]
StoreFactory: TypeAlias = Callable[[], "Store"]


class StoreJudgeFactory(Protocol):
    """A judge type that reads saved data (criteria sets) from the store it is given."""

    def __call__(
        self,
        name: str,
        options: Mapping[str, Any],
        client: ChatJudgeClient,
        source: str,
        *,
        store_factory: StoreFactory | None = None,
    ) -> Judge: ...


JUDGE_TYPES: dict[str, JudgeFactory] = {
    "rubric": RubricJudge.from_options,
    "final_response": final_response_judge,
    "trajectory_accuracy": TrajectoryAccuracyJudge.from_options,
    "task_completion": TaskCompletionJudge.from_options,
    "tool_selection": ToolSelectionJudge.from_options,
    "criteria": criteria_judge_factory,
}
STORE_JUDGE_TYPES: dict[str, StoreJudgeFactory] = {"criteria": criteria_judge_factory}

_DEFINITION_KEYS: Final = frozenset({"name", "type", "options"})
SCHEDULING_KEYS: Final = frozenset(
    {
        "sample_rate",
        "rules",
        "filters",
        "agent",
        "task",
        "agents",
        "tasks",
        "failure",
        "always_sample_failures",
        "session_idle_s",
    }
)
"""Keys of a judge definition that only the online scheduler reads; offline evaluation ignores them."""


def judge_types() -> dict[str, str]:
    """Each judge type with one line of help (its factory's docstring)."""
    return {name: (factory.__doc__ or "").strip().splitlines()[0] for name, factory in JUDGE_TYPES.items()}


def build_judge(
    name: str,
    options: Mapping[str, Any],
    client: ChatJudgeClient,
    source: str,
    *,
    store_factory: StoreFactory | None = None,
) -> Judge:
    """A judge of ``options["type"]`` configured by the other keys; ConfigError names what is wrong.
    `store_factory`: where a judge that reads saved data (a saved criteria set) reads it from."""
    kind = options.get("type")
    factory = JUDGE_TYPES.get(str(kind))
    if factory is None:
        raise ConfigError(f"{source}: judge {name}: unknown type {kind!r}; types: {', '.join(JUDGE_TYPES)}")
    rest = {key: value for key, value in options.items() if key != "type"}
    reader = STORE_JUDGE_TYPES.get(str(kind))
    if reader is not None:
        return reader(name, rest, client, f"{source}: judge {name}", store_factory=store_factory)
    return factory(name, rest, client, f"{source}: judge {name}")


@dataclass(frozen=True, slots=True)
class JudgeDefinition:
    """One configured judge: its name, type, model settings and options (not built yet)."""

    name: str
    type: str
    settings: JudgeSettings
    options: Mapping[str, Any] = field(default_factory=dict)
    extra: Mapping[str, Any] = field(default_factory=dict)  # keys the caller reads (e.g. sampling)

    @classmethod
    def from_mapping(
        cls,
        mapping: Mapping[str, Any],
        source: str,
        *,
        defaults: Mapping[str, Any] | None = None,
        extra_keys: Collection[str] = (),
    ) -> JudgeDefinition:
        """Parse one definition; settings missing from it come from `defaults` (e.g. env, CLI)."""
        if not isinstance(mapping, Mapping):
            raise ConfigError(f"{source}: a judge definition must be a mapping, got {type(mapping).__name__}")
        name, kind = mapping.get("name"), mapping.get("type")
        if not isinstance(name, str) or not name:
            raise ConfigError(f"{source}: every judge needs a name (the metric its scores are stored under)")
        where = f"{source}: judge {name}"
        if kind not in JUDGE_TYPES:
            raise ConfigError(f"{where}: unknown type {kind!r}; types: {', '.join(JUDGE_TYPES)}")
        known = _DEFINITION_KEYS | JudgeSettings.setting_names() | set(extra_keys)
        unknown = sorted(set(mapping) - known)
        if unknown:
            raise ConfigError(f"{where}: unknown key(s) {unknown}; known: {sorted(known)}")
        options = mapping.get("options") or {}
        if not isinstance(options, Mapping):
            raise ConfigError(f"{where}: options must be a mapping")
        settings = {key: value for key, value in mapping.items() if key in JudgeSettings.setting_names()}
        return cls(
            name=name,
            type=str(kind),
            settings=JudgeSettings.from_mapping({**(defaults or {}), **settings}, where),
            options=dict(options),
            extra={key: mapping[key] for key in extra_keys if key in mapping},
        )


def parse_judge_definitions(
    document: Any,
    source: str,
    *,
    defaults: Mapping[str, Any] | None = None,
    extra_keys: Collection[str] = (),
) -> list[JudgeDefinition]:
    """A list of definitions, or a mapping holding one under `judges:`; names must be unique."""
    items = document.get("judges") if isinstance(document, Mapping) else document
    if not isinstance(items, list):
        raise ConfigError(f"{source}: expected a list of judge definitions (or a `judges:` list)")
    definitions = [
        JudgeDefinition.from_mapping(
            item, f"{source} judges[{index}]", defaults=defaults, extra_keys=extra_keys
        )
        for index, item in enumerate(items)
    ]
    names = [definition.name for definition in definitions]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ConfigError(f"{source}: judge name(s) used more than once: {repeated}")
    return definitions


class ClientPool:
    """Builds judges: one client per distinct settings, so judges with the same model share its
    budget and slots; `store_factory` is where their saved criteria sets are read from (None: no
    store, and a judge naming a saved set is a ConfigError that says to pass one)."""

    def __init__(
        self,
        make: Callable[[JudgeSettings], ChatJudgeClient] = OpenAIJudgeClient,
        *,
        store_factory: StoreFactory | None = None,
    ) -> None:
        self._make = make
        self.store_factory = store_factory
        self._clients: dict[JudgeSettings, ChatJudgeClient] = {}
        self._lock = threading.Lock()  # a reload builds judges while the API's threads do too

    def client(self, settings: JudgeSettings) -> ChatJudgeClient:
        with self._lock:
            if settings not in self._clients:
                self._clients[settings] = self._make(settings)
            return self._clients[settings]

    def build(self, definition: JudgeDefinition, source: str) -> Judge:
        options = {"type": definition.type, **definition.options}
        return build_judge(
            definition.name,
            options,
            self.client(definition.settings),
            source,
            store_factory=self.store_factory,
        )

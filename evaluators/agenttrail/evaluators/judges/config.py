"""The `judges:` section of the config file: which judges run online, on which runs.

    judge_defaults:            # inherited by every judge (its own keys win)
      base_url: https://api.openai.com/v1
      model: gpt-4o-mini
      api_key_env: OPENAI_API_KEY
    judges:
      - name: task_done
        type: task_completion
        sample_rate: 0.1       # shared deterministic sampling by trace id
        agents: [support-bot]  # empty or absent: every agent
        tasks: []
        failure: any           # any | failed | succeeded
        version: "2026-11"     # optional pin: keeps results under this version across edits
        session_idle_s: 900    # scope session: a conversation quiet this long is judged (default 15 min)
        options: {scope: session}

Only the online keys are read here; the rest (type, model settings, type options) is handed
to the judge registry (judges/registry.py), which validates it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from agenttrail.collector.config import read_config_document
from agenttrail.collector.errors import ConfigError
from agenttrail.evaluators.judges.client import JudgeSettings
from agenttrail.evaluators.scoring.worker import sample_fraction

FailureFilter = Literal["any", "failed", "succeeded"]
_FAILURE: tuple[FailureFilter, ...] = ("any", "failed", "succeeded")
ONLINE_KEYS = frozenset(
    {"name", "sample_rate", "agents", "tasks", "failure", "enabled", "version", "session_idle_s"}
)


@dataclass(frozen=True, slots=True)
class JudgeSpec:
    """One configured judge: its online filters and sampling, and the options that build it."""

    name: str
    options: Mapping[str, Any] = field(default_factory=dict)  # type, model settings, type options
    sample_rate: float = 1.0
    agents: tuple[str, ...] = ()  # empty: every agent
    tasks: tuple[str, ...] = ()  # empty: every task
    failure: FailureFilter = "any"
    enabled: bool = True
    version: str | None = None  # a pin: results keep this version when the prompt or settings change
    source: str = "config"  # where it was configured, for error messages
    session_idle_s: float = 900.0  # scope session: judged once its conversation is this quiet

    @property
    def fingerprint(self) -> str:
        """A hash of everything configured for this judge: the CLI sends it with a backfill so a
        running sidecar can say when its judge differs from the one in the user's file."""
        fields = {key: value for key, value in asdict(self).items() if key != "source"}
        text = json.dumps(fields, sort_keys=True, default=str, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def filtered_by(self, agent: str, task: str, failed: bool) -> str:
        """Which filter keeps this run from the judge ('' when none does)."""
        if self.agents and agent not in self.agents:
            return f"agent {agent!r} not in agents {list(self.agents)}"
        if self.tasks and task not in self.tasks:
            return f"task {task!r} not in tasks {list(self.tasks)}"
        if self.failure == "failed" and not failed:
            return "failure: failed, and the run succeeded"
        if self.failure == "succeeded" and failed:
            return "failure: succeeded, and the run failed"
        return ""

    def sampled(self, trace_id: str) -> bool:
        """The deterministic shared sample: every judge at rate r takes the same runs."""
        return sample_fraction(trace_id) < self.sample_rate

    @classmethod
    def from_mapping(
        cls, item: Mapping[str, Any], defaults: Mapping[str, Any], source: str, index: int
    ) -> JudgeSpec:
        where = f"{source}: judges[{index}]"
        name = item.get("name")
        if not isinstance(name, str) or not name.strip():
            raise ConfigError(f"{where}: key 'name' is required (a non-empty string naming the judge)")
        where = f"{source}: judge {name!r}"
        if any(char in name for char in "@:") or name != name.strip():
            raise ConfigError(f"{where}: key 'name' must not contain '@', ':' or surrounding spaces")
        if "type" not in item and "type" not in defaults:
            raise ConfigError(f"{where}: key 'type' is required (e.g. rubric, task_completion)")
        rate = item.get("sample_rate", 1.0)
        if isinstance(rate, bool) or not isinstance(rate, int | float) or not 0.0 <= rate <= 1.0:
            raise ConfigError(f"{where}: key 'sample_rate' must be a number from 0 to 1, got {rate!r}")
        failure = item.get("failure", "any")
        if failure not in _FAILURE:
            raise ConfigError(f"{where}: key 'failure' must be one of {list(_FAILURE)}, got {failure!r}")
        enabled = item.get("enabled", True)
        if not isinstance(enabled, bool):
            raise ConfigError(f"{where}: key 'enabled' must be true or false, got {enabled!r}")
        version = item.get("version")
        if version is not None and (not isinstance(version, str | int) or not str(version).strip()):
            raise ConfigError(f"{where}: key 'version' must be a non-empty string, got {version!r}")
        idle = item.get("session_idle_s", 900.0)
        if isinstance(idle, bool) or not isinstance(idle, int | float) or idle < 0:
            raise ConfigError(f"{where}: key 'session_idle_s' must be a number of seconds >= 0, got {idle!r}")
        options = {**defaults, **{key: value for key, value in item.items() if key not in ONLINE_KEYS}}
        return cls(
            name=name,
            options=options,
            sample_rate=float(rate),
            agents=_names(item, "agents", where),
            tasks=_names(item, "tasks", where),
            failure=failure,
            enabled=enabled,
            version=None if version is None else str(version),
            source=source,
            session_idle_s=float(idle),
        )


def _names(item: Mapping[str, Any], key: str, where: str) -> tuple[str, ...]:
    value = item.get(key) or []
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ConfigError(f"{where}: key {key!r} must be a list of names, got {value!r}")
    return tuple(value)


@dataclass(frozen=True, slots=True)
class JudgesConfig:
    """Every configured judge, in file order (disabled ones included, for the audit)."""

    judges: tuple[JudgeSpec, ...] = ()
    source: str = "config"

    @property
    def enabled(self) -> tuple[JudgeSpec, ...]:
        return tuple(spec for spec in self.judges if spec.enabled)

    def get(self, name: str) -> JudgeSpec:
        for spec in self.judges:
            if spec.name == name:
                return spec
        known = ", ".join(spec.name for spec in self.judges) or "none"
        raise ConfigError(f"{self.source}: no judge named {name!r} (configured: {known})")

    @classmethod
    def from_document(cls, document: Mapping[str, Any], source: str) -> JudgesConfig:
        items = document.get("judges") or []
        defaults = document.get("judge_defaults") or {}
        if not isinstance(items, list):
            raise ConfigError(f"{source}: key 'judges' must be a list of judges")
        if not isinstance(defaults, dict):
            raise ConfigError(f"{source}: key 'judge_defaults' must be a mapping of model settings")
        misplaced = ONLINE_KEYS & set(defaults)
        if misplaced:
            raise ConfigError(
                f"{source}: judge_defaults key(s) {sorted(misplaced)} are per judge; set them in each judge"
            )
        specs: list[JudgeSpec] = []
        for index, item in enumerate(items):
            if not isinstance(item, dict):
                raise ConfigError(f"{source}: judges[{index}] must be a mapping with name and type")
            spec = JudgeSpec.from_mapping(item, defaults, source, index)
            if any(other.name == spec.name for other in specs):
                raise ConfigError(f"{source}: judge name {spec.name!r} is used twice; names must be unique")
            specs.append(spec)
        return cls(tuple(specs), source)

    @classmethod
    def from_file(cls, path: str | Path | None) -> JudgesConfig:
        if not path:
            return cls()
        return cls.from_document(read_config_document(path, "judges"), f"config file {path}")


@dataclass(frozen=True, slots=True)
class JudgeConfigs:
    """What the `judges:` and `judge_defaults:` sections configure: the online judges, and the
    model connection of the evaluation API's inline judges (judge_defaults with a model, else
    None)."""

    judges: JudgesConfig
    inline: JudgeSettings | None = None

    @classmethod
    def from_document(cls, document: Mapping[str, Any], source: str) -> JudgeConfigs:
        """From a config file's top level (the composition root's, environment values in place)."""
        judges = JudgesConfig.from_document(document, source)
        defaults = document.get("judge_defaults")
        if isinstance(defaults, dict) and defaults.get("model"):
            return cls(judges, JudgeSettings.from_mapping(defaults, f"{source}: judge_defaults"))
        return cls(judges)

    @classmethod
    def from_file(cls, path: str | None) -> JudgeConfigs:
        """The file's sections alone (no environment values): for tests and tools given a file."""
        if not path:
            return cls(JudgesConfig())
        return cls.from_document(read_config_document(path, "judges"), f"config file {path}")

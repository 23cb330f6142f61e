"""Judges for Evaluate: the config file's `judges:` by name, or inline ones on the sidecar's connection.

Configured judges are built exactly as the online judge worker builds them (same section, same
version pins) from the same `ClientPool`, so API judging and online judging share each model's
budget and its limit of calls in flight.

Inline definitions carry only `type` and `options`. Their model connection (endpoint, key,
budget, concurrency) is the config's `judge_defaults:`, else that of the first enabled judge:
an API caller must not be able to point the sidecar, with its API key, at an endpoint of the
caller's choosing, nor dodge a budget by inventing settings.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Mapping
from typing import Any

from agenttrail.collector.errors import ConfigError
from agenttrail.evaluators.judges import (
    ClientPool,
    Judge,
    JudgeDefinition,
    JudgeInput,
    JudgeResult,
    JudgeSettings,
    build_judge,
)
from agenttrail.evaluators.judges.config import JudgeConfigs, JudgesConfig
from agenttrail.evaluators.judges.setup import build_online_judge

INLINE_KEYS = frozenset({"name", "type", "options"})


class ApiJudges:
    """Resolves a request's judge (name, inline definition or None) to a judge; ConfigError if it cannot."""

    def __init__(
        self,
        config: JudgesConfig | None = None,
        *,
        pool: ClientPool | None = None,
        inline_settings: JudgeSettings | None = None,
    ) -> None:
        self._config = config or JudgesConfig(source="configuration (no config file)")
        self._pool = pool or ClientPool()
        self._inline_settings = inline_settings or self._first_settings()
        self._built: dict[str, Judge] = {}
        self._lock = threading.Lock()  # the pool and the cache are shared by the gRPC threads

    @classmethod
    def from_configs(cls, configs: JudgeConfigs, pool: ClientPool | None = None) -> ApiJudges:
        """The `judges:` and `judge_defaults:` sections, as the online worker has them."""
        return cls(configs.judges, pool=pool, inline_settings=configs.inline)

    @classmethod
    def from_config_file(cls, path: str | None, pool: ClientPool | None = None) -> ApiJudges:
        """The config file's sections alone (the sidecar's come from the composition root)."""
        return cls.from_configs(JudgeConfigs.from_file(path), pool)

    def reloaded(self, fresh: JudgeConfigs) -> Callable[[], None]:
        """The sections read again (a judges reload), checked now; the function returned puts
        them in force (nothing changes unless every part of the new config is valid)."""
        new = ApiJudges.from_configs(fresh, self._pool)

        def swap() -> None:
            with self._lock:
                self._config, self._inline_settings, self._built = new._config, new._inline_settings, {}

        return swap

    def __call__(self, name: str, definition: Mapping[str, Any] | None) -> Judge:
        if definition is None:
            return self._configured(name)
        return self._inline(name, definition)

    def _configured(self, name: str) -> Judge:
        try:
            spec = self._config.get(name)
        except ConfigError as exc:
            raise ConfigError(f"{exc}; name a configured judge or send an inline definition") from exc
        if not spec.enabled:
            raise ConfigError(f"{self._config.source}: judge {name!r} is disabled (enabled: false)")
        with self._lock:
            if name not in self._built:
                # The online version pin applies here too, so API and online results compare.
                self._built[name] = _Pinned(build_online_judge(spec, self._pool).judge, spec.version)
            return self._built[name]

    def _inline(self, name: str, definition: Mapping[str, Any]) -> Judge:
        unknown = sorted(set(definition) - INLINE_KEYS)
        if unknown:
            raise ConfigError(
                f"inline definitions take only type and options, not {unknown}: the model connection "
                "is the sidecar's (its config's judge_defaults:)"
            )
        if definition.get("name", name) != name:
            raise ConfigError(f"the definition's name {definition['name']!r} differs from {name!r}")
        options = definition.get("options") or {}
        if not isinstance(options, Mapping):
            raise ConfigError(f"options must be an object, got {type(options).__name__}")
        if self._inline_settings is None:
            raise ConfigError(
                "inline judges need the sidecar's model connection: set judge_defaults: (model, "
                "base_url, api_key_env) or configure a judge in its config file"
            )
        with self._lock:
            client = self._pool.client(self._inline_settings)
        return build_judge(
            name,
            {**options, "type": definition.get("type")},
            client,
            "inline definition",
            store_factory=self._pool.store_factory,
        )

    def _first_settings(self) -> JudgeSettings | None:
        first = next(iter(self._config.enabled), None)
        if first is None:
            return None
        return JudgeDefinition.from_mapping({"name": first.name, **first.options}, first.source).settings


class _Pinned:
    """A configured judge whose results carry the config's version pin, as online results do."""

    def __init__(self, judge: Judge, pin: str | None) -> None:
        self._judge = judge
        self.name = judge.name
        self.version = pin or judge.version
        self.outputs: tuple[str, ...] = getattr(judge, "outputs", (judge.name,))

    def evaluate(self, run: JudgeInput) -> list[JudgeResult]:
        return [
            result if result.version == self.version else dataclasses.replace(result, version=self.version)
            for result in self._judge.evaluate(run)
        ]

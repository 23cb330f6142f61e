"""Judges for Evaluate: the config file's `judges:` by name, or inline ones on the sidecar's connection.

Inline definitions carry only `type` and `options`. Their model connection (endpoint, key,
budget, concurrency) is borrowed from the first configured judge, else from the
AGENTTRAIL_JUDGE_MODEL / AGENTTRAIL_JUDGE_BASE_URL environment: an API caller must not be able
to point the sidecar, with its API key, at an endpoint of the caller's choosing, nor dodge a
budget by inventing settings (judges with equal settings share one client, hence one budget).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import yaml

from agenttrail.collector.errors import ConfigError
from agenttrail.evaluators.judges import (
    ClientPool,
    Judge,
    JudgeDefinition,
    JudgeSettings,
    build_judge,
    parse_judge_definitions,
)
from agenttrail.evaluators.judges.registry import SCHEDULING_KEYS

INLINE_KEYS = frozenset({"name", "type", "options"})
_ENV_DEFAULTS = {"model": "AGENTTRAIL_JUDGE_MODEL", "base_url": "AGENTTRAIL_JUDGE_BASE_URL"}


class ApiJudges:
    """Resolves a request's judge (name, inline definition or None) to a judge; ConfigError if it cannot."""

    def __init__(
        self,
        definitions: Sequence[JudgeDefinition] = (),
        *,
        inline_settings: JudgeSettings | None = None,
        pool: ClientPool | None = None,
        source: str = "configuration (no config file)",
    ) -> None:
        self._definitions = {definition.name: definition for definition in definitions}
        self._inline_settings = inline_settings or (definitions[0].settings if definitions else None)
        self._pool = pool or ClientPool()
        self._built: dict[str, Judge] = {}
        self._lock = threading.Lock()  # the pool and the cache are shared by the gRPC threads
        self._source = source

    @classmethod
    def from_config_file(cls, path: str | None, environ: Mapping[str, str] | None = None) -> ApiJudges:
        """The `judges:` section of the sidecar's config file (keys of the online scheduler allowed)."""
        environ = os.environ if environ is None else environ
        defaults = {key: environ[env] for key, env in _ENV_DEFAULTS.items() if environ.get(env)}
        inline = JudgeSettings.from_mapping(defaults, "environment") if "model" in defaults else None
        if not path:
            return cls(inline_settings=inline)
        source = f"config file {path}"
        try:
            with open(path, encoding="utf-8") as file:
                document = yaml.safe_load(file) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise ConfigError(f"cannot read judges from {source}: {exc}") from exc
        if not isinstance(document, Mapping) or document.get("judges") is None:
            return cls(inline_settings=inline, source=source)
        definitions = parse_judge_definitions(document, source, defaults=defaults, extra_keys=SCHEDULING_KEYS)
        return cls(definitions, inline_settings=inline if not definitions else None, source=source)

    def __call__(self, name: str, definition: Mapping[str, Any] | None) -> Judge:
        if definition is None:
            return self._configured(name)
        return self._inline(name, definition)

    def _configured(self, name: str) -> Judge:
        found = self._definitions.get(name)
        if found is None:
            known = ", ".join(self._definitions) or "none"
            raise ConfigError(
                f"no judge {name!r} in the judges: section of the sidecar's {self._source} "
                f"(configured: {known}); name a configured judge or send an inline definition"
            )
        with self._lock:
            if name not in self._built:
                self._built[name] = self._pool.build(found, self._source)
            return self._built[name]

    def _inline(self, name: str, definition: Mapping[str, Any]) -> Judge:
        unknown = sorted(set(definition) - INLINE_KEYS)
        if unknown:
            raise ConfigError(
                f"inline definitions take only type and options, not {unknown}: the model connection "
                "is the sidecar's (configure one in its judges: section)"
            )
        if definition.get("name", name) != name:
            raise ConfigError(f"the definition's name {definition['name']!r} differs from {name!r}")
        options = definition.get("options") or {}
        if not isinstance(options, Mapping):
            raise ConfigError(f"options must be an object, got {type(options).__name__}")
        if self._inline_settings is None:
            raise ConfigError(
                "inline judges need the sidecar's model connection: configure a judge in its config "
                "file's judges: section, or set AGENTTRAIL_JUDGE_MODEL (and AGENTTRAIL_JUDGE_BASE_URL)"
            )
        with self._lock:
            client = self._pool.client(self._inline_settings)
        return build_judge(name, {**options, "type": definition.get("type")}, client, "inline definition")

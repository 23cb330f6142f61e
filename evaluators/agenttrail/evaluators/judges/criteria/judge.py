"""A reviewed criteria set run as a judge (online in the sidecar, offline, or from Python).

In a judges config (the set is a type option, under `options:`):

    judges:
      - name: refund-criteria
        type: criteria
        options:
          criteria_set: refund-quality   # a set saved with `agenttrail criteria save`
          version: 2                     # optional: the newest version by default

`file: reviewed.yaml` (or `definition:`, the set document inline) instead of `criteria_set` runs
a set that is not saved, under its draft version.
Saved sets are read from the store the judge is built with (`store_factory`, passed down from
whoever builds the judges: the composition root gives the sidecar's own, `agenttrail evaluate
--store DIR` the one it names); each sidecar's judges read their own store.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from agenttrail.collector.errors import ConfigError
from agenttrail.collector.schema import migrate
from agenttrail.collector.store import Store
from agenttrail.evaluators.judges.criteria.model import (
    CriteriaError,
    CriteriaSet,
    load_criteria_file,
    parse_criteria_set,
)
from agenttrail.evaluators.judges.criteria.sets import CRITERIA_MIGRATIONS, StoredCriteriaSet, get_set

if TYPE_CHECKING:  # the judges package imports this module (its registry)
    from agenttrail.evaluators.judges.base import ChatJudgeClient, JudgeInput, JudgeResult

OPTIONS = frozenset({"criteria_set", "version", "file", "definition"})


class CriteriaJudge:
    """Quantifies each run against one criteria set version: one result per criterion.

    A saved set is read on first use, not when the judge is built: the sidecar builds judges
    before its store opens. `version` and `criteria_set` are then plain attributes.
    """

    name: str
    version: str
    criteria_set: CriteriaSet

    def __init__(
        self,
        name: str,
        client: ChatJudgeClient,
        *,
        criteria_set: CriteriaSet | None = None,
        version: str = "",
        load: Callable[[], StoredCriteriaSet] | None = None,
    ) -> None:
        """Either a set (with its version; a file's draft version by default) or a loader."""
        self.name = name
        self._client = client
        self._load = load
        self._lock = threading.Lock()
        if criteria_set is not None:
            self.criteria_set = criteria_set
            self.version = version or criteria_set.draft_version
        elif load is None:
            raise ValueError("a CriteriaJudge needs a criteria set or a way to load one")

    @classmethod
    def saved(
        cls,
        name: str,
        set_name: str,
        number: int | None,
        client: ChatJudgeClient,
        store_factory: Callable[[], Store],
    ) -> CriteriaJudge:
        """A judge for a saved set (its newest version when `number` is None), read on first use."""

        def load() -> StoredCriteriaSet:
            store = store_factory()  # owned by whoever passed the factory (the sidecar closes its stores)
            migrate(store, CRITERIA_MIGRATIONS)
            return get_set(store, set_name, number)

        return cls(name, client, load=load)

    def __getattr__(self, attribute: str) -> Any:
        # Only reached while `version`/`criteria_set` are unset, i.e. before a saved set is read.
        if attribute not in ("version", "criteria_set"):
            raise AttributeError(attribute)
        with self._lock:
            if "version" not in self.__dict__:
                assert self._load is not None
                stored = self._load()
                self.criteria_set = stored.criteria_set
                self.version = stored.version
        return self.__dict__[attribute]

    def evaluate(self, run: JudgeInput) -> list[JudgeResult]:
        # Imported here: the judges package imports this module (its registry), and the
        # quantifier imports the judges' render helpers.
        from agenttrail.evaluators.judges.criteria.quantifier import quantify_run

        return quantify_run(self._client, self.criteria_set, self.version, run)


def criteria_judge_factory(
    name: str,
    options: Mapping[str, Any],
    client: ChatJudgeClient,
    source: str,
    *,
    store_factory: Callable[[], Store] | None = None,
) -> CriteriaJudge:
    """A criteria set (AgentEval): a label and number per criterion (criteria_set+version, file, definition).

    A saved set (`criteria_set`) is read from `store_factory`'s store on first use. ConfigError
    names `source` and the option at fault.
    """
    where = source
    unknown = set(options) - OPTIONS
    if unknown:
        raise ConfigError(f"{where}: unknown criteria option(s) {sorted(unknown)}; known: {sorted(OPTIONS)}")
    set_name, version = options.get("criteria_set"), options.get("version")
    path, definition = options.get("file"), options.get("definition")
    if sum(1 for given in (set_name, path, definition) if given) != 1:
        raise ConfigError(f"{where}: give one of criteria_set (a saved set's name), file or definition")
    if version is not None and (isinstance(version, bool) or not isinstance(version, int) or version < 1):
        raise ConfigError(f"{where}: version must be a positive whole number, got {version!r}")
    if not set_name:
        if version is not None:
            raise ConfigError(f"{where}: version applies to saved sets (criteria_set) only")
        try:
            criteria_set = (
                load_criteria_file(str(path)) if path else parse_criteria_set(definition, "definition")
            )
        except CriteriaError as exc:
            raise ConfigError(f"{where}: {exc}") from exc
        return CriteriaJudge(name, client, criteria_set=criteria_set)
    if store_factory is None:
        raise ConfigError(
            f"{where}: criteria_set {set_name!r} is a saved set, read from a store, and none was named: "
            "pass --store DIR (the store `agenttrail criteria save` wrote to) to `agenttrail evaluate`, "
            "or give the set as file: (a reviewed set file) instead"
        )
    return CriteriaJudge.saved(name, str(set_name), version, client, store_factory)

"""Mutation check: do the tests catch deliberate breaks of the code where a silent break costs most?

    python .ci/mutation.py ci      # auth and the spool: run by `make test` (mutation-ci)
    python .ci/mutation.py full    # also the accept path, the trajectory builder, the metrics
    python .ci/mutation.py metrics # the metrics alone (about 40 min on 2 loaded cores)
    python .ci/mutation.py auth    # auth alone (the bearer-token checks), a few minutes

mutmut (3.x) mutates each function of the listed modules one small change at a time and runs
the tests that call it; a mutant the tests still pass "survives". Every survivor must be listed
in .ci/mutation-reviewed.txt with a reason (equivalent mutant, behaviour no test can observe),
or the check fails and prints the lines to add.

Survivors are keyed by function and the mutated line before and after, not by mutmut's mutant
numbers, which shift whenever the function changes.

The three source roots (instrumentation/, collector/, evaluators/) are one namespace package;
mutmut wants one tree whose file paths are the module names, so the run happens in a scratch
copy (.mutation/<profile>/) with src/agenttrail/ merged from the three, and its own
[tool.mutmut] section: the profiles below are that configuration. Each run starts from a fresh
copy (mutmut would otherwise reuse verdicts), and `--keep` reports only on a finished run over
the current sources and tests. A mutant that loops is stopped after 20 CPU seconds, not a
wall-clock time, so that a loaded machine gives the same verdicts (mutation_conftest.py).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REVIEWED = ROOT / ".ci" / "mutation-reviewed.txt"
SOURCE_ROOTS = ("instrumentation", "collector", "evaluators")


@dataclass(frozen=True)
class Profile:
    modules: tuple[str, ...]  # globs under src/, as mutmut's only_mutate takes them
    tests: tuple[str, ...]  # pytest node ids or files, relative to the repository


CI = Profile(
    modules=("src/agenttrail/collector/auth.py", "src/agenttrail/collector/spool.py"),
    tests=(
        "tests/collector/test_bearer_auth.py::test_bearer_ok_matches_only_the_exact_header",
        "tests/collector/test_bearer_auth.py::test_several_configured_tokens_are_each_accepted_and_the_first_is_sent",
        "tests/collector/test_spool.py",
    ),
)
PROFILES = {
    "ci": CI,
    # auth alone, to review its survivors without the spool's long run
    "auth": Profile(modules=CI.modules[:1], tests=CI.tests[:2]),
    # the metrics alone, to review their survivors without the whole full run
    "metrics": Profile(
        modules=("src/agenttrail/evaluators/metrics/*",),
        tests=("tests/evaluators/metrics",),
    ),
    "full": Profile(
        modules=(
            *CI.modules,
            "src/agenttrail/collector/ingest.py",
            "src/agenttrail/collector/spool_gate.py",
            "src/agenttrail/collector/trajectory.py",
            "src/agenttrail/evaluators/metrics/*",
        ),
        tests=(
            *CI.tests,
            "tests/collector/test_bearer_auth.py",
            "tests/collector/test_pipeline.py",
            "tests/collector/test_receivers.py",
            "tests/collector/test_spool_errors.py",
            "tests/collector/test_trajectory.py",
            "tests/evaluators/metrics",
        ),
    ),
}


# mutmut's verdicts: a test failed, or timed out (an endless loop; pytest-timeout fails the test
# first), or the process died: the mutant was detected. These were not:
UNDETECTED = ("survived", "no tests", "suspicious")
# and these mean the run did not finish: the check fails.
UNFINISHED = ("not checked", "check was interrupted by user", "skipped")


@dataclass(frozen=True)
class Survivor:
    function: str  # module.function or module.Class.method
    before: str
    after: str

    def key(self) -> str:
        return f"{self.function}\t{self.before}\t{self.after}"


INPUTS = "inputs.sha256"  # in the scratch tree: what the run there was over


def inputs_digest(profile_name: str) -> str:
    """A digest of everything a run's verdicts depend on: the sources, the tests, this script and
    its conftest, pyproject.toml, mutmut's version. `--keep` reports only on a run over these."""
    from importlib.metadata import version

    digest = hashlib.sha256(f"{profile_name}\0mutmut {version('mutmut')}\0".encode())
    files = [ROOT / ".ci" / "mutation.py", ROOT / ".ci" / "mutation_conftest.py", ROOT / "pyproject.toml"]
    for tree in [*(ROOT / root / "agenttrail" for root in SOURCE_ROOTS), ROOT / "tests"]:
        files += sorted(path for path in tree.rglob("*") if path.is_file() and not _ignored(path))
    for path in files:
        digest.update(f"{path.relative_to(ROOT)}\0".encode())
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def _ignored(path: Path) -> bool:
    return "__pycache__" in path.parts or path.suffix == ".pyc"


def scratch_tree(profile_name: str, profile: Profile) -> Path:
    """A fresh copy: src/agenttrail/ merged from the three roots, the tests, a pyproject for mutmut.
    Nothing of an earlier run is kept: mutmut would reuse its verdicts for unchanged functions
    even where the tests changed."""
    scratch = ROOT / ".mutation" / profile_name
    shutil.rmtree(scratch, ignore_errors=True)
    if scratch.exists():
        sys.exit(f"cannot remove the previous run's {scratch}; remove it by hand")
    package = scratch / "src" / "agenttrail"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for root in SOURCE_ROOTS:
        shutil.copytree(ROOT / root / "agenttrail", package, dirs_exist_ok=True, ignore=ignore)
    shutil.copytree(ROOT / "tests", scratch / "tests", ignore=ignore)
    shutil.copyfile(ROOT / ".ci" / "mutation_conftest.py", scratch / "conftest.py")
    pyproject = (ROOT / "pyproject.toml").read_text()
    selection = ", ".join(f'"{test}"' for test in profile.tests)
    modules = ", ".join(f'"{module}"' for module in profile.modules)
    pyproject += f"""
[tool.mutmut]
source_paths = ["src"]
only_mutate = [{modules}]
pytest_add_cli_args_test_selection = [{selection}]
also_copy = ["conftest.py"]
pytest_add_cli_args = ["-p", "no:cacheprovider"]
# mutmut's wall-clock limit is (test seconds + constant) x multiplier: set far out, a backstop.
# A mutant that loops is stopped by CPU time (conftest.py), which a loaded machine does not
# turn into false kills of mutants whose tests were merely slow.
timeout_multiplier = 1.0
timeout_constant = 300.0
# grpc and chDB are not fork-safe after use: fork workers from a clean server process
process_isolation = "forkserver"
use_git_change_detection = false
"""
    tomllib.loads(pyproject)  # fail here, not inside mutmut, if the section does not parse
    (scratch / "pyproject.toml").write_text(pyproject)
    return scratch


def run_mutmut(scratch: Path, children: int) -> None:
    command = [sys.executable, "-m", "mutmut", "run", "--max-children", str(children)]
    print("$", " ".join(command), f"(in {scratch.relative_to(ROOT)})", flush=True)
    env = {**os.environ, "AGENTTRAIL_RAISE_INTERNAL_ERRORS": "1", "AGENTTRAIL_HYPOTHESIS_PROFILE": "mutation"}
    completed = subprocess.run(command, cwd=scratch, env=env, check=False)
    if completed.returncode != 0:
        sys.exit(f"mutmut run failed (exit {completed.returncode}); see its output above")


def collect(scratch: Path) -> tuple[Counter[str], list[Survivor], list[str]]:
    """Counts by status, the survivors with their mutated lines, and the mutated modules (read
    through mutmut's API)."""
    os.chdir(scratch)
    sys.path.insert(0, str(scratch))
    # imported here: mutmut reads its configuration from the working directory on import
    from mutmut.__main__ import (
        SourceFileMutationData,
        get_diff_for_mutant,
        status_by_exit_code,
        walk_mutatable_files,
    )

    counts: Counter[str] = Counter()
    survivors = []
    modules = []
    for path in walk_mutatable_files():
        modules.append(".".join(Path(path).relative_to("src").with_suffix("").parts))
        data = SourceFileMutationData(path=path)
        data.load()
        for name, exit_code in data.exit_code_by_key.items():
            status = status_by_exit_code[exit_code]
            counts[status] += 1
            if status in UNDETECTED:
                survivors.append(describe(name, get_diff_for_mutant(name, path=path), status))
    return counts, survivors, modules


def describe(mutant: str, diff: str, status: str) -> Survivor:
    function = re.sub(r"\.x[_ǁ]", ".", mutant.partition("__mutmut_")[0]).replace("ǁ", ".")
    lines = diff.splitlines()
    removed = [line[1:].strip() for line in lines if line.startswith("-") and not line.startswith("---")]
    added = [line[1:].strip() for line in lines if line.startswith("+") and not line.startswith("+++")]
    before, after = " ⏎ ".join(removed), " ⏎ ".join(added)
    if status != "survived":
        after = f"{after}  [{status}]"
    return Survivor(function.replace("..", "."), before, after)


def reviewed_keys() -> dict[str, str]:
    """Reviewed survivors: `function<TAB>before<TAB>after<TAB>reason` per line, # comments."""
    keys: dict[str, str] = {}
    for number, line in enumerate(REVIEWED.read_text().splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        fields = line.split("\t")
        if len(fields) != 4 or not fields[3].strip():
            sys.exit(f"{REVIEWED}:{number}: expected function<TAB>before<TAB>after<TAB>reason, got {line!r}")
        keys["\t".join(fields[:3])] = fields[3]
    return keys


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("profile", choices=sorted(PROFILES))
    parser.add_argument("--children", type=int, default=os.cpu_count() or 2, help="parallel test processes")
    parser.add_argument("--keep", action="store_true", help="report on the last run's results, do not rerun")
    args = parser.parse_args()
    profile = PROFILES[args.profile]
    began = time.monotonic()
    scratch = ROOT / ".mutation" / args.profile
    digest = inputs_digest(args.profile)
    if args.keep:
        kept = scratch / INPUTS
        if not kept.is_file() or kept.read_text().strip() != digest:
            sys.exit(
                f"{scratch.relative_to(ROOT)} holds no finished run over the current sources and tests; "
                "run without --keep"
            )
    else:
        scratch = scratch_tree(args.profile, profile)
        run_mutmut(scratch, args.children)
        (scratch / INPUTS).write_text(digest + "\n")  # only once the run finished
    counts, survivors, modules = collect(scratch)
    reviewed = reviewed_keys()
    unreviewed = [s for s in survivors if s.key() not in reviewed]
    surviving = {s.key() for s in survivors}
    stale = [
        key
        for key in reviewed
        if key not in surviving and any(key.startswith(f"{module}.") for module in modules)
    ]
    total = sum(counts.values())
    unfinished = sum(counts[status] for status in UNFINISHED)
    print(
        f"\nmutation ({args.profile}): {total} mutants, {counts['killed']} killed by a failing test, "
        f"{counts['timeout']} by a test timing out, {counts['segfault']} by the test process dying; "
        f"{len(survivors)} survived ({len(survivors) - len(unreviewed)} reviewed, {len(unreviewed)} not); "
        f"{unfinished} not run; in {time.monotonic() - began:.0f}s"
    )
    for survivor, count in sorted(Counter(survivors).items(), key=lambda item: item[0].key()):
        mark = "reviewed" if survivor.key() in reviewed else "UNREVIEWED"
        times = f" (x{count})" if count > 1 else ""
        print(f"  {mark}: {survivor.function}: {survivor.before!r} -> {survivor.after!r}{times}")
    if stale and not unfinished:
        print(
            "\nReviewed, but no longer surviving (a test kills it now, or the code changed); "
            f"delete from {REVIEWED.relative_to(ROOT)}:"
        )
        for key in stale:
            print(f"  {key.replace(chr(9), ' | ')}")
    if unfinished:
        print(f"\n{unfinished} mutant(s) were not run: the run was cut short; run it again.")
    if unreviewed:
        print(
            f"\n{len(unreviewed)} surviving mutant(s) are not reviewed. Either add a test that kills each "
            f"(see it with `cd {scratch.relative_to(ROOT)} && {sys.executable} -m mutmut browse`), or, "
            "if no test can tell it apart, add its line below with a one-line reason in place of "
            f"REASON to {REVIEWED.relative_to(ROOT)}:\n"
        )
        for survivor in sorted(set(unreviewed), key=Survivor.key):
            print(f"{survivor.key()}\tREASON")
    if unreviewed or unfinished:
        sys.exit(1)


if __name__ == "__main__":
    main()

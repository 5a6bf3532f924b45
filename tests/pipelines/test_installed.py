"""curate's datatrove steps skip datatrove's installed-distribution check (pipelines/installed.py): that is sound only
while every dependency those steps declare is one of curate's own, installed with it."""

from __future__ import annotations

import inspect
import tomllib
from pathlib import Path

from datatrove.pipeline.base import PipelineStep
from packaging.requirements import Requirement

import curate.builders.cpt.judge
import curate.builders.cpt.pool
import curate.builders.cpt.rewrite
import curate.builders.priming.judge
import curate.handoff.onpolicy_audit
import curate.handoff.passrate
import curate.pipelines.dedup
import curate.pipelines.llm_tag
import curate.pipelines.readers
import curate.pipelines.steps
from curate.pipelines.installed import InstalledWithCurate

ROOT = Path(__file__).resolve().parents[2]
MODULES = (curate.builders.cpt.judge, curate.builders.cpt.pool, curate.builders.cpt.rewrite, curate.builders.priming.judge,
           curate.handoff.onpolicy_audit, curate.handoff.passrate, curate.pipelines.dedup, curate.pipelines.llm_tag,
           curate.pipelines.readers, curate.pipelines.steps)


def curate_dependencies() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return {Requirement(line).name.lower().replace("_", "-") for line in project["dependencies"]}


def steps_without_the_check() -> list[type]:
    return sorted({cls for module in MODULES for _, cls in inspect.getmembers(module, inspect.isclass)
                   if issubclass(cls, PipelineStep) and issubclass(cls, InstalledWithCurate)}, key=lambda c: c.__name__)


def test_every_step_that_skips_the_check_needs_only_curates_own_dependencies():
    own = curate_dependencies()
    steps = steps_without_the_check()
    assert len(steps) >= 10  # the corpus reader and every atomic writer
    for step in steps:
        declared = {name for base in step.mro() for name in getattr(base, "_requires_dependencies", [])}
        names = {(name[1] if isinstance(name, tuple) else name).lower().replace("_", "-") for name in declared}
        assert names <= own, f"{step.__name__} declares {sorted(names - own)}, not a dependency of curate"


def test_a_step_without_the_mixin_is_still_checked_by_datatrove(monkeypatch):
    # The hook curate skips still is the check: a missing package fails at construction with datatrove's hint.
    class NeedsAbsentPackage(PipelineStep):
        _requires_dependencies = ("curate_no_such_package",)

        def run(self, data, rank=0, world_size=1):
            yield from data

    try:
        NeedsAbsentPackage()
    except ImportError as error:
        assert "pip install curate_no_such_package" in str(error)
    else:
        raise AssertionError("datatrove no longer checks _requires_dependencies at construction")

    class SkipsIt(InstalledWithCurate, NeedsAbsentPackage):
        pass

    assert isinstance(SkipsIt(), PipelineStep)

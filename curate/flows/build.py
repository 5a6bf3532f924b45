"""The build flow: one Prefect task around `run_build` (tag, reusing shards -> DuckDB selection -> dataset + card)."""

from __future__ import annotations

from pathlib import Path

from prefect import flow, get_run_logger, task
from pydantic import Field, field_validator, model_validator

from curate.flows.common import CleaningParameters, InputParameters, cache_key, submission_summary


class BuildParameters(InputParameters):
    behaviors: str = Field(description="Comma-separated behaviors every document must show, or 'none'.")
    output: str = Field(min_length=1, description="Dataset directory.")
    tags: str | None = Field(None, description="Tags root to reuse across builds (default: OUTPUT/tags).")
    min_count: int = Field(1, ge=1)
    exclude_behaviors: str | None = None
    limit: int | None = Field(None, ge=1, description="Keep at most this many documents (seeded random sample).")
    seed: int = 0
    license: str = "other"
    cleaning: CleaningParameters = CleaningParameters()

    @field_validator("behaviors", "exclude_behaviors")
    @classmethod
    def _known(cls, value: str | None, info) -> str | None:
        from curate.behaviors import UnknownBehaviorError, parse_behavior_list

        try:
            parsed = parse_behavior_list(value, allow_none=info.field_name == "behaviors")
        except UnknownBehaviorError as error:
            raise ValueError(str(error)) from None
        if info.field_name == "behaviors" and parsed == []:
            raise ValueError("behaviors is empty; name at least one behavior, or 'none'")
        return value

    @model_validator(mode="after")
    def _consistent(self):
        self.selection()  # required and excluded at once, etc.
        return self

    def selection(self):
        from curate.behaviors import parse_behavior_list
        from curate.pipelines.query import Selection

        return Selection(behaviors=parse_behavior_list(self.behaviors, allow_none=True), min_count=self.min_count,
                         exclude=parse_behavior_list(self.exclude_behaviors) or [], limit=self.limit, seed=self.seed)


def _build_key(context, arguments: dict) -> str:
    return cache_key("build", arguments["params"])


@task(name="build-dataset", cache_key_fn=_build_key, persist_result=True)
def build_dataset(params: BuildParameters) -> dict:
    from curate.builders.behavior import run_build
    from curate.pipelines.executors import JobSubmitted

    try:
        result = run_build(params.spec(), params.output, params.selection(), tags_root=params.tags,
                           classifier=params.classifier, tasks=params.tasks, workers=params.workers,
                           batch_size=params.batch_size, progress=False, license=params.license,
                           executor=params.executor.options(), **params.cleaning.arguments())
    except JobSubmitted as submitted:
        return submission_summary(submitted)
    return {"output": str(result.output), "tags_dir": str(result.tags_dir), "selected": result.selected,
            "card": str(result.output / "README.md")}


@flow(name="build", log_prints=True)
def build_flow(params: BuildParameters) -> dict:
    """Build a behavior dataset; a rerun with the same inputs, classifier and selection is served from cache."""
    output = Path(params.output)
    finished = (output / "README.md").is_file() and (output / "data").is_dir()
    summary = build_dataset.with_options(refresh_cache=not finished, retries=2 if params.reads_remote else 0,
                                         retry_delay_seconds=30)(params)
    if "submitted" in summary:
        get_run_logger().info("%s", summary["submitted"])
    else:
        get_run_logger().info("selected %s documents into %s", summary["selected"], summary["output"])
    return summary

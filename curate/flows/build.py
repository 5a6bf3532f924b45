"""The build flow: one Prefect task around `run_build` (tag, reusing shards -> DuckDB selection -> dataset + card)."""

from __future__ import annotations

from pathlib import Path

from prefect import flow, get_run_logger, task
from pydantic import Field, field_validator, model_validator

from curate.behaviors import UnknownBehaviorError, parse_behavior_list
from curate.builders.behavior import run_build
from curate.flows.common import (
    CleaningParameters,
    InputParameters,
    cache_key,
    claim,
    submission_summary,
)
from curate.pipelines.executors import JobSubmitted
from curate.pipelines.query import Selection
from curate.pipelines.tag import file_fingerprints


class BuildParameters(InputParameters):
    behaviors: str = Field(description="Comma-separated behaviors every document must show, or 'none'.")
    output: str = Field(min_length=1, description="Dataset directory.")
    tags: str | None = Field(None, description="Tags root to reuse across builds (default: OUTPUT/tags).")
    min_count: int = Field(1, ge=1)
    exclude_behaviors: str | None = None
    limit: int | None = Field(None, ge=1, description="Keep at most this many documents (seeded random sample).")
    allow_partial: bool = Field(False, description="Build from tags whose tasks did not all finish (warns).")
    seed: int = 0
    license: str = "other"
    keep_columns: str | None = Field(None, description="Comma-separated source fields carried into the dataset "
                                                       "beside id and text.")
    cleaning: CleaningParameters = CleaningParameters()

    def kept_columns(self) -> list[str]:
        return [c.strip() for c in self.keep_columns.split(",") if c.strip()] if self.keep_columns else []

    @field_validator("behaviors", "exclude_behaviors")
    @classmethod
    def _known(cls, value: str | None, info) -> str | None:
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
        return Selection(behaviors=parse_behavior_list(self.behaviors, allow_none=True), min_count=self.min_count,
                         exclude=parse_behavior_list(self.exclude_behaviors) or [], limit=self.limit, seed=self.seed)


def _build_key(context, arguments: dict) -> str:
    return cache_key("build", arguments["params"])


@task(name="build-dataset", cache_key_fn=_build_key, persist_result=True)
def build_dataset(params: BuildParameters) -> dict:
    try:
        result = run_build(params.spec(), params.output, params.selection(), tags_root=params.tags,
                           classifier=params.classifier, tasks=params.tasks, workers=params.workers,
                           batch_size=params.batch_size, progress=False, license=params.license,
                           executor=params.executor.options(), keep_columns=params.kept_columns(),
                           verify_inputs=params.verify_inputs, allow_partial=params.allow_partial,
                           **params.cleaning.options().arguments())
    except JobSubmitted as submitted:
        return submission_summary(submitted)
    return {"output": str(result.output), "tags_dir": str(result.tags_dir), "selected": result.selected,
            "card": str(result.output / "README.md")}


@flow(name="build", log_prints=True)
def build_flow(params: BuildParameters, overwrite: bool = False) -> dict:
    """Build a behavior dataset; a rerun with the same inputs, classifier and selection is served from cache.
    An output folder holding another dataset fails the run unless `overwrite` (as `curate build --overwrite`)."""
    output = Path(params.output)
    # `curate build`'s keys, so that either sees the other's dataset as its own.
    what = {"behaviors": params.behaviors, "input": params.input, "tags": params.tags, "classifier": params.classifier,
            "min_count": params.min_count, "exclude_behaviors": params.exclude_behaviors, "limit": params.limit,
            "seed": params.seed, "text_key": params.text_key, "id_key": params.id_key, "split": params.split,
            "streaming": params.streaming, "license": params.license, **params.cleaning.options().arguments()}
    if params.kept_columns():
        what["keep_columns"] = params.kept_columns()
    tags_inside = params.tags is None or Path(params.tags).resolve() == (output / "tags").resolve()
    claimed = claim(output, "build", what, inputs=file_fingerprints(params.spec(), params.verify_inputs),
                    overwrite=overwrite,
                    keep=("tags",) if tags_inside else ())
    # Up to date: the task below is served from Prefect's cache (a rerun returns the same summary).
    finished = (output / "README.md").is_file() and (output / "data").is_dir()
    summary = build_dataset.with_options(refresh_cache=not finished, retries=2 if params.reads_remote else 0,
                                         retry_delay_seconds=30)(params)
    if "submitted" in summary:
        get_run_logger().info("%s", summary["submitted"])
    else:
        claimed.finish()
        get_run_logger().info("selected %s documents into %s", summary["selected"], summary["output"])
    return summary

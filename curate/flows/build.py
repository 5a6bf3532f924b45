"""The build flow: one Prefect task around the build job (tag, reusing shards -> DuckDB selection -> dataset + card),
the job `curate build` runs, with the same options."""

from __future__ import annotations

from prefect import flow, get_run_logger, task
from pydantic import Field

from curate.builders.behavior import build, build_selection
from curate.builders.jobs import BuildJob
from curate.flows.common import InputParameters, cache_key, job_model, job_task, submission_summary
from curate.pipelines.executors import JobSubmitted

BuildParameters = job_model(
    BuildJob,
    """The options of `curate build`, generated from its BuildJob; the corpus as InputParameters has it.""",
    __name__,
    base=InputParameters,
    check=build_selection,
    exclude=("overwrite",),  # the flow's own argument, as it was before the job
    # The flow's output is required: the command's default (datasets/BEHAVIORS) is relative to where it runs.
    output=(str, Field(min_length=1, description="Dataset directory.")),
)


def _build_key(context, arguments: dict) -> str:
    return cache_key("build", arguments["params"])


@task(name="build-dataset", cache_key_fn=_build_key, persist_result=True)
def build_dataset(params: BuildParameters, overwrite: bool = False) -> dict:
    try:
        # refresh: this task runs only when Prefect's cache missed, and then it builds (curate's code may have changed)
        result = build(params.job(overwrite=overwrite), progress=False, refresh=True)
    except JobSubmitted as submitted:
        return submission_summary(submitted)
    return {"output": str(result.output), "tags_dir": str(result.tags_dir), "selected": result.selected,
            "card": str(result.output / "README.md")}


@flow(name="build", log_prints=True)
def build_flow(params: BuildParameters, overwrite: bool = False) -> dict:
    """Build a behavior dataset; a rerun with the same inputs, classifier and selection is served from cache.
    An output folder holding another dataset fails the run unless `overwrite` (as `curate build --overwrite`)."""
    summary = job_task(build_dataset, params.output, overwrite, params.reads_remote)(params, overwrite)
    if "submitted" in summary:
        get_run_logger().info("%s", summary["submitted"])
    else:
        get_run_logger().info("selected %s documents into %s", summary["selected"], summary["output"])
    return summary

"""The export flow: one Prefect task around the export job (a built dataset -> a trainer's input format), the job
`curate export` runs, with the same options."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from prefect import flow, get_run_logger, task
from pydantic import Field

from curate.flows.common import cache_key, job_model, job_task, one_of
from curate.handoff.export import TARGETS, check_export, export, input_files
from curate.handoff.jobs import ExportJob
from curate.pipelines.state import files_signature

ExportParameters = job_model(
    ExportJob,
    """The options of `curate export`, generated from its ExportJob.""",
    __name__,
    check=check_export,
    exclude=("overwrite",),  # the flow's own argument, as it was before the job
    to=(Annotated[str, one_of("target", TARGETS)], Field(description="verl | trl | openrlhf | sft | cpt")),
)


def _export_key(context, arguments: dict) -> str:
    params = arguments["params"]
    return cache_key("export", params, files_signature(path for _, path in input_files(Path(params.dataset))))


@task(name="export-dataset", cache_key_fn=_export_key, persist_result=True)
def export_dataset(params: ExportParameters, overwrite: bool = False) -> dict:
    # refresh: this task runs only when Prefect's cache missed, and then it exports (curate's code may have changed)
    result = export(params.job(overwrite=overwrite), progress=False, refresh=True)
    return {"output": str(result.output), "target": result.target, "rows": dict(result.rows),
            "rejected": dict(result.rejected), "files": [str(f) for f in result.files]}


@flow(name="export", log_prints=True)
def export_flow(params: ExportParameters, overwrite: bool = False) -> dict:
    """Export a dataset for a trainer; a rerun on an unchanged dataset is served from cache.
    An output folder holding another dataset fails the run unless `overwrite` (as `curate export --overwrite`)."""
    summary = job_task(export_dataset, params.output, overwrite)(params, overwrite)
    get_run_logger().info("exported %s rows for %s into %s (%s rejected)", summary["rows"], summary["target"],
                          summary["output"], sum(summary["rejected"].values()))
    return summary

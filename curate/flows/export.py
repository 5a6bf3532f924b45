"""The export flow: one Prefect task around `run_export` (a built dataset -> a trainer's input format)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from prefect import flow, get_run_logger, task
from pydantic import BaseModel, ConfigDict, Field, model_validator

from curate.flows.common import cache_key, claim, files_signature, one_of
from curate.handoff.export import TARGETS, ExportError, input_files, output_identity, run_export


class ExportParameters(BaseModel):
    model_config = ConfigDict(extra="forbid")

    dataset: str = Field(min_length=1, description="Built dataset (DATASET/data/<split>-*.parquet) or parquet file/folder.")
    to: Annotated[str, one_of("target", TARGETS)] = Field(description="verl | trl | openrlhf | sft | cpt")
    output: str = Field(min_length=1, description="Export directory.")
    instruction: str | None = Field(None, description="Appended to every prompt; None: the reward's own instruction.")
    system: str | None = None

    @model_validator(mode="after")
    def _paths(self):
        if Path(self.output).resolve() == Path(self.dataset).resolve():
            raise ValueError("the output must not be the dataset itself")

        try:
            self.input_files()
        except ExportError as error:
            raise ValueError(str(error)) from None
        return self

    def input_files(self) -> list[Path]:
        return [path for _, path in input_files(Path(self.dataset))]


def _export_key(context, arguments: dict) -> str:
    params: ExportParameters = arguments["params"]
    return cache_key("export", params, files_signature(params.input_files()))


@task(name="export-dataset", cache_key_fn=_export_key, persist_result=True)
def export_dataset(params: ExportParameters) -> dict:
    result = run_export(params.dataset, params.to, params.output, instruction=params.instruction,
                        system=params.system, progress=False)
    return {"output": str(result.output), "target": result.target, "rows": dict(result.rows),
            "rejected": dict(result.rejected), "files": [str(f) for f in result.files]}


@flow(name="export", log_prints=True)
def export_flow(params: ExportParameters, overwrite: bool = False) -> dict:
    """Export a dataset for a trainer; a rerun on an unchanged dataset is served from cache.
    An output folder holding another dataset fails the run unless `overwrite` (as `curate export --overwrite`)."""
    output = Path(params.output)
    what, inputs = output_identity(params.dataset, params.to, params.instruction, params.system)
    claimed = claim(output, "export", what, inputs=inputs, overwrite=overwrite)
    # Up to date: the task below is served from Prefect's cache (a rerun returns the same summary).
    finished = (output / "README.md").is_file() and (output / "data").is_dir()
    try:
        summary = export_dataset.with_options(refresh_cache=not finished)(params)
    except Exception:
        claimed.abandon()  # a failed export into a new folder leaves nothing behind
        raise
    claimed.finish()
    get_run_logger().info("exported %s rows for %s into %s (%s rejected)", summary["rows"], summary["target"],
                          summary["output"], sum(summary["rejected"].values()))
    return summary

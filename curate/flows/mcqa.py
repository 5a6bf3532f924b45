"""The MCQA flow: one Prefect task around the mcqa job (multiple choice -> open-answer RL questions), the job
`curate mcqa` runs, with the same options."""

from __future__ import annotations

from pathlib import Path

from prefect import flow, get_run_logger, task
from pydantic import BaseModel

from curate.builders.jobs import McqaJob
from curate.builders.mcqa import check_mcqa, input_files, mcqa
from curate.flows.common import cache_key, job_model, job_task
from curate.pipelines.state import files_signature


class McqaInputs(BaseModel):
    """The job's inputs as the flow's cache and retries see them."""

    @property
    def reads_remote(self) -> bool:
        return any(i.startswith("hf:") for i in self.inputs)

    def local_files(self) -> list[Path]:
        return [f for i in self.inputs if not i.startswith("hf:") for f in input_files(i)]


McqaParameters = job_model(
    McqaJob,
    """The options of `curate mcqa`, generated from its McqaJob; an endpoint's key comes from the worker's
    environment, never from here.""",
    __name__,
    base=McqaInputs,
    check=check_mcqa,
    exclude=("overwrite",),  # the flow's own argument
)


def _mcqa_key(context, arguments: dict) -> str:
    params: McqaParameters = arguments["params"]
    return cache_key("mcqa", params, files_signature(params.local_files()))


@task(name="convert-mcqa", cache_key_fn=_mcqa_key, persist_result=True)
def convert_mcqa(params: McqaParameters, overwrite: bool = False) -> dict:
    # refresh: this task runs only when Prefect's cache missed, and then it converts (curate's code may have changed)
    result = mcqa(params.job(overwrite=overwrite), progress=False, refresh=True)
    return {"output": str(result.output), "kept": result.kept, "rejected": result.rejected,
            "by_reason": result.by_reason, "answer_types": result.answer_types,
            "card": str(Path(params.output) / "README.md")}


@flow(name="mcqa", log_prints=True)
def mcqa_flow(params: McqaParameters, overwrite: bool = False) -> dict:
    """Convert multiple-choice items to open-answer questions; a rerun on unchanged inputs is served from cache.
    An output folder holding another dataset fails the run unless `overwrite` (as `curate mcqa --overwrite`)."""
    summary = job_task(convert_mcqa, params.output, overwrite, params.reads_remote)(params, overwrite)
    get_run_logger().info("kept %s of %s items in %s", summary["kept"], summary["kept"] + summary["rejected"],
                          summary["output"])
    return summary

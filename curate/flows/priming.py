"""The priming flow: one cached Prefect task per Countdown variant around the priming job's one dataset
(build_priming_set), the job `curate priming` runs, with the same options."""

from __future__ import annotations

from pathlib import Path

from prefect import flow, get_run_logger, task

from curate.builders.jobs import PrimingJob
from curate.builders.priming import build_priming_set, priming_sets, resolve_preset
from curate.flows.common import cache_key, job_model, job_task

PrimingJobParameters = job_model(
    PrimingJob,
    """The options of `curate priming`, generated from its PrimingJob; an endpoint's key comes from the worker's
    environment, never from here.""",
    __name__,
    check=priming_sets,
    exclude=("overwrite",),  # the flow's own argument
)


class PrimingParameters(PrimingJobParameters):
    """The options of `curate priming`; numbers, number_range and target_range set here override the preset, as
    those typed on the command line do."""

    def job(self, **changes) -> PrimingJob:
        return resolve_preset(super().job(**changes), given=self.model_fields_set)

    @property
    def does_remote_io(self) -> bool:
        """A tokenizer fetched from the Hub, or traces written or judged by a remote endpoint."""
        hub_tokenizer = bool(self.tokenizer) and not Path(self.tokenizer).expanduser().is_dir()
        llm = self.writer == "llm" or self.judge_model is not None
        return hub_tokenizer or (llm and self.server.backend == "endpoint")


def _priming_key(context, arguments: dict) -> str:
    return cache_key("priming", arguments["params"], arguments["variant"], arguments["output"])


@task(name="build-priming-set", cache_key_fn=_priming_key, persist_result=True)
def build_priming_variant(params: PrimingParameters, variant: str, output: str, overwrite: bool = False) -> dict:
    job = params.job(overwrite=overwrite)
    config = {str(target): config for target, config in priming_sets(job)}[output]
    # refresh: this task runs only when Prefect's cache missed, and then it builds (curate's code may have changed)
    result = build_priming_set(job, Path(output), config, progress=False, refresh=True)
    return {"variant": variant, "output": output, "rows": dict(result.rows), "attempted": result.attempted,
            "acceptance_rate": result.acceptance_rate, "rejected": dict(result.rejected),
            "card": str(Path(output) / "README.md")}


@flow(name="priming", log_prints=True)
def priming_flow(params: PrimingParameters, overwrite: bool = False) -> list[dict]:
    """Countdown priming sets, one per variant; a rerun with the same configuration is served from cache.
    A variant folder holding another dataset fails the run unless `overwrite` (as `curate priming --overwrite`)."""
    logger = get_run_logger()
    summaries = []
    for target, config in priming_sets(params.job()):
        output = str(target)
        run = job_task(build_priming_variant, target, overwrite, params.does_remote_io)
        summary = run(params, config.variant, output, overwrite)
        logger.info("%s: %s rows (acceptance %.1f %%) into %s", config.variant, summary["rows"],
                    100 * summary["acceptance_rate"], output)
        summaries.append(summary)
    return summaries

"""The multihop flow: one Prefect task around the multihop job (verifiable problems chained hop to hop), the job
`curate multihop` runs, with the same options."""

from __future__ import annotations

from pathlib import Path

from prefect import flow, get_run_logger, task

from curate.builders.jobs import MultihopJob
from curate.builders.multihop import check_hops, multihop, source_spec
from curate.flows.common import CorpusParameters, cache_key, job_model, job_task, spec_files_signature


class SourceProblems(CorpusParameters):
    """The job's source problems as a corpus: a local input must name a file before the run starts."""

    def spec(self):
        return source_spec(self.job())


MultihopParameters = job_model(
    MultihopJob,
    """The options of `curate multihop`, generated from its MultihopJob: GSM8K-style problems with `<<a=b>>`
    annotations and '#### N'.""",
    __name__,
    base=SourceProblems,
    check=check_hops,
    exclude=("overwrite",),  # the flow's own argument
)


def _multihop_key(context, arguments: dict) -> str:
    params: MultihopParameters = arguments["params"]
    return cache_key("multihop", params, spec_files_signature(params.spec()))


@task(name="build-multihop", cache_key_fn=_multihop_key, persist_result=True)
def build_multihop(params: MultihopParameters, overwrite: bool = False) -> dict:
    # refresh: this task runs only when Prefect's cache missed, and then it builds (curate's code may have changed)
    result = multihop(params.job(overwrite=overwrite), progress=False, refresh=True)
    stats = result.stats
    return {"output": str(result.output), "rows": dict(stats.rows), "acceptance_rate": stats.acceptance_rate,
            "hop_counts": {str(k): v for k, v in sorted(stats.hop_counts.items())},
            "source_rejects": dict(stats.source_rejects), "card": str(Path(params.output) / "README.md")}


@flow(name="multihop", log_prints=True)
def multihop_flow(params: MultihopParameters, overwrite: bool = False) -> dict:
    """Chain problems so that each answer feeds the next; a rerun on unchanged inputs is served from cache.
    An output folder holding another dataset fails the run unless `overwrite` (as `curate multihop --overwrite`)."""
    summary = job_task(build_multihop, params.output, overwrite, params.reads_remote)(params, overwrite)
    get_run_logger().info("built %s rows (full/half/single) into %s", summary["rows"], summary["output"])
    return summary

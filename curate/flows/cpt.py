"""The cpt flow: one cached Prefect task around the cpt job (behavior-enriched vs behavior-minimized CPT corpora),
the job `curate cpt` runs, with the same options."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

from prefect import flow, get_run_logger, task
from pydantic import Field, create_model

from curate.builders.cpt.matching import length_removed
from curate.builders.cpt.run import cpt, cpt_options
from curate.builders.cpt.selection import tag_files
from curate.builders.jobs import CPTJob
from curate.flows.common import (
    CorpusParameters,
    cache_key,
    corpus_fields,
    job_model,
    job_task,
    spec_files_signature,
    submission_summary,
)
from curate.options import TEXTS_HELP
from curate.pipelines.executors import JobSubmitted
from curate.pipelines.readers import InputSpec
from curate.pipelines.state import files_signature


class TaggedCorpusBase(CorpusParameters):
    """The corpus the job's tags were made from (TaggedCorpus)."""

    def spec(self):
        return InputSpec(path=self.texts, text_key=self.text_key, id_key=self.id_key, split=self.split,
                         streaming=self.streaming)

    @property
    def does_remote_io(self) -> bool:
        """A corpus or tokenizer fetched from the Hub, or an LLM job (rewrite, solution judge) on a remote endpoint."""
        hub_tokenizer = not Path(self.tokenizer).expanduser().is_dir()
        llm = self.rewrite or (self.require_solution and self.solution_judge == "llm")
        return self.reads_remote or hub_tokenizer or (llm and self.server.backend == "endpoint")


TaggedCorpus = create_model(
    "TaggedCorpus", __base__=TaggedCorpusBase, __module__=__name__, __doc__="""The corpus the job's tags were made
    from (`--texts` and its Input options): a local one must name a file before the run starts.""",
    **corpus_fields("texts", TEXTS_HELP))


CPTParameters = job_model(
    CPTJob,
    """The options of `curate cpt`, generated from its CPTJob; an endpoint's key comes from the worker's environment,
    never from here. `export` (default: yes) writes OUTPUT/exports/.""",
    __name__,
    base=TaggedCorpus,
    check=cpt_options,
    exclude=("overwrite",),  # the flow's own argument
    # The bounds the flow had before the job (the command's option has none; its --help stays as it was).
    tolerance=(float, Field(0.01, gt=0, lt=0.5, description="Allowed relative gap of each token total to the budget.")),
)


def _cpt_key(context, arguments: dict) -> str:
    params: CPTParameters = arguments["params"]
    return cache_key("cpt", params, files_signature(tag_files(params.tags)), spec_files_signature(params.spec()))


@task(name="build-cpt-corpora", cache_key_fn=_cpt_key, persist_result=True)
def build_cpt(params: CPTParameters, overwrite: bool = False) -> dict:
    try:
        # refresh: this task runs only when Prefect's cache missed, and then it builds (curate's code may have changed)
        result = cpt(params.job(overwrite=overwrite), progress=False, refresh=True)
    except JobSubmitted as submitted:
        return submission_summary(submitted)
    output = Path(params.output)
    return {"output": str(output), "match": asdict(result.report),
            "length_removed": length_removed(result.pools, result.report),
            "rewrite": asdict(result.rewrite) if result.rewrite else None, "rejects": dict(result.rejects),
            "cards": [str(output / v / "README.md") for v in ("enriched", "minimized")]}


@flow(name="cpt", log_prints=True)
def cpt_flow(params: CPTParameters, overwrite: bool = False) -> dict:
    """Matched enriched / minimized CPT corpora; a rerun on unchanged tags, corpus and options is served from cache.
    An output folder holding another dataset fails the run unless `overwrite` (as `curate cpt --overwrite`); the
    folder is claimed under the command's record, so that either sees the other's dataset as its own."""
    output = Path(params.output)
    summary = job_task(build_cpt, output, overwrite, params.does_remote_io)(params, overwrite)
    if "submitted" in summary:
        get_run_logger().info("%s", summary["submitted"])
        return summary
    match = summary["match"]
    get_run_logger().info("enriched %s / minimized %s tokens (budget %s), length KS %.3f, length match %s into %s",
                          match["enriched_tokens"], match["minimized_tokens"], match["budget"], match["ks_statistic"],
                          match["length_match"], summary["output"])
    return summary

"""The multihop flow: one Prefect task around `run_multihop` (verifiable problems chained hop to hop)."""

from __future__ import annotations

from pathlib import Path

from prefect import flow, get_run_logger, task
from pydantic import Field, field_validator

from curate.builders.multihop import parse_hop_range, run_multihop
from curate.flows.common import CleaningParameters, CorpusParameters, cache_key, claim, spec_files_signature
from curate.pipelines.readers import InputSpec
from curate.pipelines.tag import file_fingerprints


class MultihopParameters(CorpusParameters):
    """The options of `curate multihop`: GSM8K-style problems with `<<a=b>>` annotations and '#### N'."""

    input: str = Field(min_length=1, description="jsonl/parquet file, directory, glob, or 'hf:ORG/NAME'.")
    output: str = Field(min_length=1)
    hops: str = Field("2-4", description="A number of hops or a range such as 2-4.")
    n: int = Field(5000, ge=1, description="Chains to build.")
    seed: int = 0
    max_ratio: float = Field(10.0, ge=1.01)
    tries_per_link: int = Field(64, ge=1)
    question_key: str = "question"
    answer_key: str = "answer"
    id_key: str = "id"
    split: str = "train"
    license: str = "mit"
    cleaning: CleaningParameters = CleaningParameters()

    @field_validator("hops")
    @classmethod
    def _hop_range(cls, value: str) -> str:
        parse_hop_range(value)
        return value

    def spec(self):
        return InputSpec(path=self.input, text_key=self.question_key, id_key=self.id_key, split=self.split)


def _multihop_key(context, arguments: dict) -> str:
    params: MultihopParameters = arguments["params"]
    return cache_key("multihop", params, spec_files_signature(params.spec()))


@task(name="build-multihop", cache_key_fn=_multihop_key, persist_result=True)
def build_multihop(params: MultihopParameters) -> dict:
    result = run_multihop(params.spec(), params.output, n=params.n, hops=parse_hop_range(params.hops), seed=params.seed,
                          max_ratio=params.max_ratio, tries_per_link=params.tries_per_link,
                          answer_key=params.answer_key, progress=False, license=params.license,
                          **params.cleaning.options().arguments())
    stats = result.stats
    return {"output": str(result.output), "rows": dict(stats.rows), "acceptance_rate": stats.acceptance_rate,
            "hop_counts": {str(k): v for k, v in sorted(stats.hop_counts.items())},
            "source_rejects": dict(stats.source_rejects), "card": str(Path(params.output) / "README.md")}


@flow(name="multihop", log_prints=True)
def multihop_flow(params: MultihopParameters, overwrite: bool = False) -> dict:
    """Chain problems so that each answer feeds the next; a rerun on unchanged inputs is served from cache.
    An output folder holding another dataset fails the run unless `overwrite` (as `curate multihop --overwrite`)."""
    output = Path(params.output)
    # `curate multihop`'s keys, so that either sees the other's dataset as its own.
    what = {**params.model_dump(exclude={"output", "cleaning"}), **params.cleaning.options().arguments()}
    claimed = claim(output, "multihop", what, inputs=file_fingerprints(params.spec()), overwrite=overwrite)
    # Up to date: the task below is served from Prefect's cache (a rerun returns the same summary).
    finished = (output / "README.md").is_file() and (output / "data").is_dir()
    run = build_multihop.with_options(refresh_cache=not finished, retries=2 if params.reads_remote else 0,
                                      retry_delay_seconds=30)
    summary = run(params)
    claimed.finish()
    get_run_logger().info("built %s rows (full/half/single) into %s", summary["rows"], summary["output"])
    return summary

"""The cpt flow: one cached Prefect task around `run_cpt` (behavior-enriched vs behavior-minimized CPT corpora)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from prefect import flow, get_run_logger, task
from pydantic import Field, field_validator, model_validator

from curate.behaviors import parse_behavior_list
from curate.builders.cpt import (
    LENGTH_MATCH_ALIASES,
    LENGTH_MATCH_MODES,
    CPTSelection,
    RewriteOptions,
    SolutionJudgeOptions,
    length_removed,
    parse_token_count,
    run_cpt,
    tag_files,
)
from curate.flows.common import (
    CleaningParameters,
    CorpusParameters,
    ExecutorParameters,
    cache_key,
    claim,
    files_signature,
    spec_files_signature,
    submission_summary,
)
from curate.pipelines.executors import JobSubmitted
from curate.pipelines.readers import InputSpec
from curate.pipelines.state import folder_signature
from curate.pipelines.tag import file_fingerprints


class CPTParameters(CorpusParameters):
    """The options of `curate cpt`; `rewrite` holds RewriteOptions fields (model, backend, ...) or is None."""

    tags: str = Field(min_length=1, description="One classifier's attribute shards, e.g. tags/cues_v6.")
    texts: str = Field(min_length=1, description="The corpus the tags were made from (file, folder, glob or hf:NAME).")
    tokens: str = Field(min_length=1, description="Token budget of each set, e.g. 8.3M.")
    tokenizer: str = Field(min_length=1, description="Hub name or local directory; counts and packs the tokens.")
    output: str = Field(min_length=1)
    behaviors: str | None = Field(None, description="Comma list of chosen behaviors; None: all of them.")
    min_behaviors: int = Field(1, ge=1)
    min_count: int = Field(1, ge=1)
    seed: int = 0
    tolerance: float = Field(0.01, gt=0, lt=0.5)
    length_bins: int = Field(10, ge=1)
    length_match: str = "best"
    length_trim: float = Field(0.025, ge=0, lt=0.5)
    domain_key: str | None = None
    oversample: float = Field(2.0, ge=1)
    text_key: str = "text"
    id_key: str = "id"
    split: str = "train"
    streaming: bool = False
    cleaning: CleaningParameters = CleaningParameters()
    rewrite: dict | None = Field(None, description="RewriteOptions fields; an endpoint's key comes from the worker's "
                                                   "environment, never from here.")
    rewrite_oversample: float = Field(1.25, ge=1, description="With rewrite: source tokens rewritten first, as a "
                                      "multiple of the budget; later rounds rewrite what is still missing.")
    require_solution: Literal["cues", "llm"] | None = Field(None, description="Keep only documents with a problem and "
                                                            "a worked solution, judged by the cue rule or the LLM.")
    solution_judge: dict | None = Field(None, description="require_solution llm: SolutionJudgeOptions fields (model, "
                                        "backend, ...); an endpoint's key comes from the worker's environment.")
    pack_length: int = Field(4096, ge=2)
    pack_format: str = "parquet"
    export: bool = True
    tasks: int = Field(1, ge=1)
    workers: int = Field(1, ge=1)
    executor: ExecutorParameters = ExecutorParameters()
    license: str = "other"

    @field_validator("tokens")
    @classmethod
    def _budget(cls, value: str) -> str:
        parse_token_count(value)  # CPTError is a ValueError: reported as a validation error
        return value

    @field_validator("length_match")
    @classmethod
    def _mode(cls, value: str) -> str:
        if LENGTH_MATCH_ALIASES.get(value, value) not in LENGTH_MATCH_MODES:
            raise ValueError(f"length_match must be one of {', '.join(LENGTH_MATCH_MODES)}")
        return LENGTH_MATCH_ALIASES.get(value, value)

    @field_validator("pack_format")
    @classmethod
    def _pack_format(cls, value: str) -> str:
        if value not in ("parquet", "memmap"):
            raise ValueError("pack_format must be parquet or memmap")
        return value

    @model_validator(mode="after")
    def _inputs(self):
        self.selection()  # unknown behaviors and an impossible k fail here, before the run
        self.rewrite_options()
        if (self.require_solution == "llm") != (self.solution_judge is not None):
            raise ValueError("require_solution 'llm' and solution_judge (the judge's server) go together")
        self.solution_judge_options()
        tag_files(self.tags)  # CPTError when the folder holds no attribute shards
        return self

    def selection(self):
        chosen = parse_behavior_list(self.behaviors) if self.behaviors else None
        return CPTSelection(**({"behaviors": chosen} if chosen else {}), min_behaviors=self.min_behaviors,
                            min_count=self.min_count, seed=self.seed)

    def rewrite_options(self):
        return RewriteOptions(**self.rewrite) if self.rewrite is not None else None

    def solution_judge_options(self):
        return SolutionJudgeOptions(**self.solution_judge) if self.solution_judge is not None else None

    def spec(self):
        return InputSpec(path=self.texts, text_key=self.text_key, id_key=self.id_key, split=self.split,
                         streaming=self.streaming)

    @property
    def does_remote_io(self) -> bool:
        """A corpus or tokenizer fetched from the Hub, or rewrites by a remote endpoint."""
        hub_tokenizer = not Path(self.tokenizer).expanduser().is_dir()
        endpoint = "endpoint" in ((self.rewrite or {}).get("backend"), (self.solution_judge or {}).get("backend"))
        return self.reads_remote or hub_tokenizer or endpoint


def _cpt_key(context, arguments: dict) -> str:
    params: CPTParameters = arguments["params"]

    return cache_key("cpt", params, files_signature(tag_files(params.tags)), spec_files_signature(params.spec()))


@task(name="build-cpt-corpora", cache_key_fn=_cpt_key, persist_result=True)
def build_cpt(params: CPTParameters) -> dict:
    from dataclasses import asdict


    try:
        result = run_cpt(params.tags, params.spec(), params.tokens, params.tokenizer, params.output, params.selection(),
                         tolerance=params.tolerance, length_bins=params.length_bins, domain_key=params.domain_key,
                         oversample=params.oversample, length_match=params.length_match,
                         length_trim=params.length_trim, rewrite=params.rewrite_options(),
                         pack_length=params.pack_length, pack_format=params.pack_format, export=params.export,
                         require_solution=params.require_solution, solution_judge=params.solution_judge_options(),
                         rewrite_oversample=params.rewrite_oversample,
                         tasks=params.tasks, workers=params.workers, progress=False, license=params.license,
                         executor=params.executor.options(), **params.cleaning.options().arguments())
    except JobSubmitted as submitted:
        return submission_summary(submitted)
    output = Path(params.output)
    return {"output": str(output), "match": asdict(result.report), "length_removed": length_removed(result.pools, result.report),
            "rewrite": asdict(result.rewrite) if result.rewrite else None, "rejects": dict(result.rejects),
            "cards": [str(output / v / "README.md") for v in ("enriched", "minimized")]}


@flow(name="cpt", log_prints=True)
def cpt_flow(params: CPTParameters, overwrite: bool = False) -> dict:
    """Matched enriched / minimized CPT corpora; a rerun on unchanged tags, corpus and options is served from cache.
    An output folder holding another dataset fails the run unless `overwrite` (as `curate cpt --overwrite`)."""
    output = Path(params.output)
    # How the job runs (tasks, workers, executor) and reads the corpus (streaming) does not change what it writes;
    # the cleaning options are flat keys, as this flow has always recorded them.
    how = {"output", "tasks", "workers", "executor", "streaming", "cleaning"}
    what = {**params.model_dump(mode="json", exclude=how), **params.cleaning.options().arguments()}
    claimed = claim(output, "cpt", what, overwrite=overwrite,
                    inputs={"tags": folder_signature(params.tags), "texts": file_fingerprints(params.spec())})
    # Up to date: the task below is served from Prefect's cache (a rerun returns the same summary).
    finished = all((output / v / "README.md").is_file() and (output / v / "data").is_dir()
                   for v in ("enriched", "minimized"))
    # Retries only where a try can fail for reasons outside the job (the Hub, an endpoint); a local failure is
    # deterministic and a retry would only repeat it.
    run = build_cpt.with_options(refresh_cache=not finished, retries=2 if params.does_remote_io else 0,
                                 retry_delay_seconds=30)
    summary = run(params)
    if "submitted" in summary:
        get_run_logger().info("%s", summary["submitted"])
        return summary
    claimed.finish()
    match = summary["match"]
    get_run_logger().info("enriched %s / minimized %s tokens (budget %s), length KS %.3f, length match %s into %s",
                          match["enriched_tokens"], match["minimized_tokens"], match["budget"], match["ks_statistic"],
                          match["length_match"], summary["output"])
    return summary

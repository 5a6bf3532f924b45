"""The MCQA flow: one Prefect task around `run_mcqa` (multiple choice -> open-answer RL questions)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from prefect import flow, get_run_logger, task
from pydantic import BaseModel, ConfigDict, Field, field_validator

from curate.builders.llm_writers import LLMOptions
from curate.builders.mcqa import FORMATS, input_files, output_identity, run_mcqa
from curate.flows.common import CleaningParameters, cache_key, claim, files_signature, one_of


class McqaParameters(BaseModel):
    model_config = ConfigDict(extra="forbid")

    inputs: list[str] = Field(min_length=1, description="Files, directories, globs or hf:NAME[:SPLIT].")
    output: str = Field(min_length=1, description="Dataset directory (data/, rejects/, README.md).")
    format: Annotated[str, one_of("format", FORMATS)] = "auto"
    workers: int = Field(1, ge=1, description="Processes checking answers with math-verify.")
    limit: int = Field(-1, ge=-1, description="Read at most this many records per input (-1: all).")
    cleaning: CleaningParameters = CleaningParameters()
    reformulate: dict | None = Field(None, description="LLM rewrite of each kept stem plus an LLM judge (Big-Math): "
                                                       "LLMOptions fields (model, backend, endpoint_url, device, "
                                                       "max_tokens, concurrency); an endpoint's key comes from the "
                                                       "worker's environment, never from here.")

    @field_validator("reformulate")
    @classmethod
    def _valid_llm(cls, value: dict | None) -> dict | None:
        if value is not None:
            try:
                LLMOptions(**{"temperature": 0.0, **value}).validate()
            except TypeError as error:  # a field LLMOptions does not have
                raise ValueError(f"reformulate: {error}") from None
        return value

    @field_validator("inputs")
    @classmethod
    def _inputs_exist(cls, values: list[str]) -> list[str]:
        for value in values:
            if not value.startswith("hf:"):
                try:
                    input_files(value)
                except FileNotFoundError as error:
                    raise ValueError(str(error)) from None
        return values

    @property
    def reads_remote(self) -> bool:
        return any(i.startswith("hf:") for i in self.inputs)

    def local_files(self) -> list[Path]:
        return [f for i in self.inputs if not i.startswith("hf:") for f in input_files(i)]


def _mcqa_key(context, arguments: dict) -> str:
    params: McqaParameters = arguments["params"]
    return cache_key("mcqa", params, files_signature(params.local_files()))


@task(name="convert-mcqa", cache_key_fn=_mcqa_key, persist_result=True)
def convert_mcqa(params: McqaParameters) -> dict:
    reformulate = {"temperature": 0.0, **params.reformulate} if params.reformulate else None
    result = run_mcqa(params.inputs, params.output, fmt=params.format, workers=params.workers, limit=params.limit,
                      progress=False, reformulate=reformulate, **params.cleaning.options().arguments())
    return {"output": str(result.output), "kept": result.kept, "rejected": result.rejected,
            "by_reason": result.by_reason, "answer_types": result.answer_types,
            "card": str(Path(params.output) / "README.md")}


@flow(name="mcqa", log_prints=True)
def mcqa_flow(params: McqaParameters, overwrite: bool = False) -> dict:
    """Convert multiple-choice items to open-answer questions; a rerun on unchanged inputs is served from cache.
    An output folder holding another dataset fails the run unless `overwrite` (as `curate mcqa --overwrite`)."""
    output = Path(params.output)
    reformulate = {"temperature": 0.0, **params.reformulate} if params.reformulate else None
    what, inputs = output_identity(params.inputs, params.format, params.limit, reformulate,
                                   **params.cleaning.options().arguments())
    claimed = claim(output, "mcqa", what, inputs=inputs, overwrite=overwrite)
    # Up to date: the task below is served from Prefect's cache (a rerun returns the same summary).
    finished = (output / "README.md").is_file() and (output / "data").is_dir()
    run = convert_mcqa.with_options(refresh_cache=not finished, retries=2 if params.reads_remote else 0,
                                    retry_delay_seconds=30)
    summary = run(params)
    claimed.finish()
    get_run_logger().info("kept %s of %s items in %s", summary["kept"], summary["kept"] + summary["rejected"],
                          summary["output"])
    return summary

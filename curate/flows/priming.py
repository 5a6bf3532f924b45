"""The priming flow: one cached Prefect task per Countdown variant around `run_priming`."""

from __future__ import annotations

from pathlib import Path

from prefect import flow, get_run_logger, task
from pydantic import BaseModel, ConfigDict, Field, model_validator

from curate.builders.priming import ALL_VARIANTS, PrimingConfig, apply_preset, run_priming
from curate.flows.common import Classifier, CleaningParameters, cache_key, claim


class PrimingParameters(BaseModel):
    """The options of `curate priming`; `variants` is one variant, a comma list, or 'all'."""

    model_config = ConfigDict(extra="forbid")

    variants: str = Field(min_length=1, description="A variant, a comma list (each into OUTPUT/<variant>), or 'all'.")
    output: str = Field(min_length=1, description="Dataset directory (the parent of one per variant when several).")
    answers: str = "correct"
    n: int = Field(1000, ge=0)
    test_n: int = Field(100, ge=0)
    seed: int = 0
    writer: str = "symbolic"
    classifier: Classifier = "cues"
    n_numbers: int | tuple[int, ...] = Field(4, description="Numbers per problem (2-6); several sizes mix, e.g. (3, 4).")
    number_range: tuple[int, int] = (1, 99)
    target_range: tuple[int, int] = (10, 100)
    preset: str | None = Field(None, description="tinyzero: the reference's problems (3 or 4 numbers in 1-100, targets "
                                                 "10-100); n_numbers/number_range/target_range set here override it.")
    integer_division: bool = True
    format_score: float = Field(0.0, ge=0, lt=1, description="Countdown reward of a well-formed wrong equation "
                                                             "(extra_info.format_score); TinyZero's runs use 0.1.")
    max_dead_ends: int = Field(3, ge=1)
    tokenizer: str | None = Field(None, description="Hub name or local directory; needed by placeholder_cot.")
    placeholder_for: str = "all_strategies"
    llm: dict | None = Field(None, description="writer 'llm': LLMOptions fields (model, backend, endpoint_url, ...); "
                                               "an endpoint's key comes from the worker's environment, never from here.")
    llm_oversample: float = Field(2.0, gt=0)
    judge: dict | None = Field(None, description="JudgeOptions fields (model, backend, endpoint_url, ...): an LLM judge "
                                                 "reads every written trace; the card reports its acceptance.")
    cleaning: CleaningParameters = CleaningParameters()

    @model_validator(mode="after")
    def _valid_configs(self):
        for _, config in self.configs():
            config.validate()  # PrimingError is a ValueError: reported as a validation error
        return self

    def variant_names(self) -> list[str]:
        if self.variants.strip() == "all":
            return [v for v in ALL_VARIANTS if v != "placeholder_cot" or self.tokenizer]
        return [v.strip() for v in self.variants.split(",") if v.strip()]

    def configs(self) -> list[tuple[str, object]]:
        """(output directory, PrimingConfig) per variant."""
        names = self.variant_names()
        if not names:
            raise ValueError("variants is empty")

        shared = self.model_dump(exclude={"variants", "output", "cleaning", "preset"})
        space = ("n_numbers", "number_range", "target_range")
        shared.update(apply_preset(self.preset, {k: shared[k] for k in space if k in self.model_fields_set or not self.preset}))
        output = Path(self.output)
        return [(str(output / name if len(names) > 1 else output), PrimingConfig(variant=name, **shared))
                for name in names]

    @property
    def does_remote_io(self) -> bool:
        """A tokenizer fetched from the Hub, or traces written by a remote endpoint."""
        hub_tokenizer = bool(self.tokenizer) and not Path(self.tokenizer).expanduser().is_dir()
        return hub_tokenizer or "endpoint" in ((self.llm or {}).get("backend"), (self.judge or {}).get("backend"))


def _priming_key(context, arguments: dict) -> str:
    return cache_key("priming", arguments["params"], arguments["variant"], arguments["output"])


@task(name="build-priming-set", cache_key_fn=_priming_key, persist_result=True)
def build_priming_set(params: PrimingParameters, variant: str, output: str) -> dict:
    config = dict(params.configs())[output]
    result = run_priming(config, output, progress=False, **params.cleaning.options().arguments())
    return {"variant": variant, "output": output, "rows": dict(result.rows), "attempted": result.attempted,
            "acceptance_rate": result.acceptance_rate, "rejected": dict(result.rejected),
            "card": str(Path(output) / "README.md")}


@flow(name="priming", log_prints=True)
def priming_flow(params: PrimingParameters, overwrite: bool = False) -> list[dict]:
    """Countdown priming sets, one per variant; a rerun with the same configuration is served from cache.
    A variant folder holding another dataset fails the run unless `overwrite` (as `curate priming --overwrite`)."""
    logger = get_run_logger()
    summaries = []
    for output, config in params.configs():
        # `curate priming`'s keys, so that either sees the other's dataset as its own.
        claimed = claim(output, "priming", {**vars(config), **params.cleaning.options().arguments()},
                        overwrite=overwrite)
        finished = (Path(output) / "README.md").is_file() and (Path(output) / "data").is_dir()
        run = build_priming_set.with_options(refresh_cache=not finished, retries=2 if params.does_remote_io else 0,
                                             retry_delay_seconds=30)
        summary = run(params, config.variant, output)
        claimed.finish()
        logger.info("%s: %s rows (acceptance %.1f %%) into %s", config.variant, summary["rows"],
                    100 * summary["acceptance_rate"], output)
        summaries.append(summary)
    return summaries

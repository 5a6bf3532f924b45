"""What a priming job builds: its variants, each one's config (PrimingConfig) checked before any folder is claimed,
and the problem space a preset (tinyzero) fills in."""

from __future__ import annotations

import dataclasses
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from curate.behaviors import Behavior
from curate.builders.jobs import PRIMING_CHECK, PrimingJob
from curate.builders.llm_writers import LLMOptions, LLMWriterError
from curate.builders.priming.judge import JudgeError, JudgeOptions
from curate.builders.trace_phrases import ANSWERS, VARIANTS
from curate.errors import CurateError
from curate.rewards.registry import check_format_score

CONTROLS = ("empty_cot", "placeholder_cot")
ALL_VARIANTS = (*VARIANTS, *CONTROLS)


# The reference study's problems (TinyZero's Countdown data: 3 or 4 numbers, each 1-100 as its generator draws
# them, targets 10-100) as one name; a preset fills these fields, options given explicitly override it.
PRESETS = {
    "tinyzero": {"n_numbers": (3, 4), "number_range": (1, 100), "target_range": (10, 100)},
}


class PrimingError(CurateError, ValueError):
    pass


@dataclass
class PrimingConfig:
    variant: str
    answers: str = "correct"
    n: int = 1000
    test_n: int = 100
    seed: int = 0
    writer: str = "symbolic"
    classifier: str = PRIMING_CHECK
    n_numbers: int | tuple[int, ...] = 4  # several sizes: each problem draws one of them
    number_range: tuple[int, int] = (1, 99)
    target_range: tuple[int, int] = (10, 100)
    integer_division: bool = True
    # The Countdown reward's score for a well-formed wrong equation, carried by every row (verl
    # extra_info.format_score); 0 by default, TinyZero's runs use 0.1.
    format_score: float = 0.0
    max_dead_ends: int = 3
    tokenizer: str | None = None  # needed for placeholder_cot; also fills think_tokens
    placeholder_for: str = "all_strategies"
    batch_size: int = 64
    max_attempts_factor: int = 20  # give up after this many problems per wanted row
    # --writer llm: LLMOptions fields (model, backend, endpoint_url, device, temperature, max_tokens, ...)
    llm: dict | None = None
    # --writer llm: problems sent per missing row in one job, since each job starts a server
    llm_oversample: float = 2.0
    # --judge-model: JudgeOptions fields (model, backend, endpoint_url, device, concurrency, ...); the LLM judge
    # then reads every written trace and the card reports its acceptance beside the classifier's
    judge: dict | None = None

    def validate(self) -> None:
        if self.variant not in ALL_VARIANTS:
            raise PrimingError(f"unknown variant {self.variant!r}; choose from {', '.join(ALL_VARIANTS)}")
        if self.answers not in ANSWERS:
            raise PrimingError("--answers must be 'correct', 'incorrect' or 'any'")
        if self.writer not in ("symbolic", "llm"):
            raise PrimingError("--writer must be 'symbolic' or 'llm'")
        if self.writer == "llm":
            if not self.llm or not self.llm.get("model"):
                raise PrimingError("the LLM trace writer (--writer llm) needs a teacher model: --model M (and "
                                   "--backend)")
            try:
                LLMOptions(**self.llm).validate()
            except (LLMWriterError, ValueError, TypeError) as error:
                raise PrimingError(str(error)) from error
        if self.variant == "placeholder_cot" and not self.tokenizer:
            raise PrimingError("placeholder_cot matches token counts: name a tokenizer with --tokenizer")
        if self.placeholder_for not in VARIANTS:
            raise PrimingError(f"--placeholder-for must be one of {', '.join(VARIANTS)}")
        if self.n < 0 or self.test_n < 0 or self.n + self.test_n == 0:
            raise PrimingError("ask for at least one row (--n / --test-n)")
        sizes = self.sizes
        if not sizes or any(not isinstance(k, int) or isinstance(k, bool) or not 2 <= k <= 6 for k in sizes):
            raise PrimingError(f"--numbers takes problem sizes from 2 to 6 (e.g. 4 or 3,4), got {self.n_numbers!r}")
        for name in ("number_range", "target_range"):
            low, high = getattr(self, name)
            if low > high or (name == "number_range" and low < 1):
                raise PrimingError(f"--{name.replace('_', '-')} must be LOW,HIGH with 1 <= LOW <= HIGH, "
                                   f"got {low},{high}")
        try:
            check_format_score(self.format_score)
        except ValueError as error:
            raise PrimingError(f"--format-score: {error}") from None
        if self.judge is not None:
            try:
                JudgeOptions(**self.judge).validate()
            except (JudgeError, TypeError) as error:
                raise PrimingError(str(error)) from None

    @property
    def sizes(self) -> tuple[int, ...]:
        """The problem sizes drawn from (one for a plain --numbers N)."""
        sizes = (self.n_numbers,) if isinstance(self.n_numbers, int) else tuple(self.n_numbers)
        return tuple(dict.fromkeys(sizes))

    @property
    def requested(self) -> frozenset[Behavior]:
        return VARIANTS.get(self.variant, frozenset())


def apply_preset(name: str | None, explicit: dict) -> dict:
    """The fields a preset sets, overridden by the ones given explicitly."""
    if name is None:
        return dict(explicit)
    if name not in PRESETS:
        raise PrimingError(f"unknown preset {name!r}; choose from {', '.join(PRESETS)}")
    return {**PRESETS[name], **explicit}


# The problem-space options of `curate priming` (PrimingJob's fields) -> the PrimingConfig field each one sets.
PROBLEM_SPACE = {"numbers": "n_numbers", "number_range": "number_range", "target_range": "target_range"}


def preset_options(name: str, given: dict[str, str]) -> dict[str, str]:
    """The problem-space options, as `curate priming` takes them ('3,4', '1,100'), that preset `name` sets,
    overridden by those `given`."""
    preset = apply_preset(name, {})

    def option_text(value) -> str:
        return ",".join(map(str, value)) if isinstance(value, tuple) else str(value)

    return {option: option_text(preset[field]) for option, field in PROBLEM_SPACE.items()} | given


def resolve_preset(job: PrimingJob, given: Collection[str] | None = None) -> PrimingJob:
    """The job with its preset applied and none left: the problem-space options among `given` (typed on the command
    line, set in a flow's parameters) keep their values, the others take the preset's. Without `given` (a job made in
    Python), those that differ from their defaults are the given ones."""
    if job.preset is None:
        return job
    if given is None:
        defaults = {f.name: f.default for f in dataclasses.fields(job)}
        given = [option for option in PROBLEM_SPACE if getattr(job, option) != defaults[option]]
    kept = {option: getattr(job, option) for option in PROBLEM_SPACE if option in given}
    return dataclasses.replace(job, preset=None, **preset_options(job.preset, kept))


def problem_space(job: PrimingJob) -> dict:
    """PrimingConfig's n_numbers, number_range and target_range from the job's options (its preset applied)."""
    job = resolve_preset(job)
    try:
        sizes = tuple(int(part) for part in job.numbers.split(",") if part.strip())
    except ValueError:
        raise PrimingError(f"--numbers takes a size or a comma list of sizes (4, or 3,4), got {job.numbers!r}") \
            from None
    space = {"n_numbers": sizes[0] if len(sizes) == 1 else sizes}
    for option in ("number_range", "target_range"):
        text = getattr(job, option)
        try:
            low, high = (int(part) for part in text.split(","))
        except ValueError:
            raise PrimingError(f"--{option.replace('_', '-')} takes LOW,HIGH, got {text!r}") from None
        space[option] = (low, high)
    return space


def variant_names(job: PrimingJob) -> list[str]:
    """The variants the job builds: a comma list, or 'all', which leaves placeholder_cot out without a tokenizer (it
    matches token counts)."""
    if job.variant.strip() == "all":
        return [v for v in ALL_VARIANTS if v != "placeholder_cot" or job.tokenizer]
    return [v.strip() for v in job.variant.split(",") if v.strip()]


def priming_sets(job: PrimingJob) -> list[tuple[Path, PrimingConfig]]:
    """(output folder, config) of each dataset the job builds, one per variant (into OUTPUT/VARIANT when there are
    several), every config checked: a wrong option fails here, before any folder is claimed (the priming flow checks
    its parameters with it)."""
    names = variant_names(job)
    if not names:
        raise PrimingError("--variant is empty")
    space = problem_space(job)
    sets = []
    for name in names:
        config = PrimingConfig(
            variant=name, answers=job.answers, n=job.n, test_n=job.test_n, seed=job.seed, writer=job.writer,
            classifier=job.classifier, **space, integer_division=not job.fractional_division,
            format_score=job.format_score, max_dead_ends=job.max_dead_ends, tokenizer=job.tokenizer,
            placeholder_for=job.placeholder_for, llm=job.llm, llm_oversample=job.llm_oversample, judge=job.judge)
        config.validate()
        sets.append((Path(job.output) / name if len(names) > 1 else Path(job.output), config))
    return sets

"""Priming datasets: Countdown problems with behavior-controlled traces, checked by a classifier.

Output layout:
    OUT/data/train-00000.parquet, OUT/data/test-00000.parquet
        SFT columns (query, completion), verl RL columns (data_source, prompt as a chat list, ability,
        reward_model{style, ground_truth{target, numbers}}, extra_info{..., format_score}) and the project's
        RL columns (id, question, answer, format_score), plus what the trace is and what was found in it.
        SFT and RL rows carry ONE prompt: `query` is the TinyZero completion prompt (ending before
        `<think>`), and `prompt` is that same text as the one user message, as TinyZero's own data has it;
        `question` is its user turn, which already asks for the <answer> format
    OUT/README.md        card: variant, acceptance rate, behavior prevalence, answer accuracy, lengths
    OUT/rejects/rejects.jsonl   every trace the behavior check refused, and every problem that could not
                                get a trace, with its reason
    OUT/.curate/parameters.json, stats.json

A trace is kept only when the classifier finds every requested behavior and none of the others; the
controls (`empty_cot`, `placeholder_cot`) must show none. Train and test never share a problem: each
unique problem (numbers as a multiset, target) is drawn once and assigned to one split by its hash.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import random
import re
import shutil
from collections import Counter
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from curate.behaviors import BEHAVIOR_NAMES, Behavior
from curate.builders.base import Builder, BuildOutput, Decision, Keep, Reject
from curate.builders.jobs import PRIMING_CHECK, PrimingJob
from curate.builders.llm_writers import LLMOptions, LLMWriterError, write_llm_traces
from curate.builders.priming_judge import (
    JUDGE_DIR,
    VERDICTS,
    JudgedTrace,
    JudgeError,
    JudgeOptions,
    judge_summary,
    judge_traces,
)
from curate.builders.trace_templates import ANSWERS, VARIANTS, TraceError, countdown_question, write_trace
from curate.classifiers import get_classifier
from curate.data_cards.cards import (
    load_snippet,
    render_card,
    reproduce_command,
    save_card,
    size_category,
    split_configs,
)
from curate.errors import CurateError
from curate.files import write_text_atomic
from curate.hf_tokenizers import load_tokenizer
from curate.pipelines.decontam import decontaminate_dataset, parse_against
from curate.pipelines.dedup import dedup_dataset
from curate.pipelines.state import STATE, write_once
from curate.puzzles.countdown import DATA_SOURCE, Problem, generate_problem, score_countdown, wrong_expression
from curate.rewards.registry import check_format_score

CONTROLS = ("empty_cot", "placeholder_cot")
ALL_VARIANTS = (*VARIANTS, *CONTROLS)
EMPTY_THINK = " "
# Filler units tried in turn until one tokenizes to exactly the wanted count.
FILLER_UNITS = (" .", ".", " …", " #", " -", "\n")

# The reference study's problems (TinyZero's Countdown data: 3 or 4 numbers, each 1-100 as its generator draws
# them, targets 10-100) as one name; a preset fills these fields, options given explicitly override it.
PRESETS = {
    "tinyzero": {"n_numbers": (3, 4), "number_range": (1, 100), "target_range": (10, 100)},
}

SYSTEM_PREAMBLE = (
    "A conversation between User and Assistant. The user asks a question, and the Assistant solves it. "
    "The assistant first thinks about the reasoning process in the mind and then provides the user with the answer."
)

ROW_SCHEMA = pa.schema([
    ("id", pa.string()),
    ("question", pa.string()),
    ("answer", pa.string()),
    ("data_source", pa.string()),
    ("ability", pa.string()),
    ("prompt", pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))),
    ("reward_model", pa.struct([
        ("style", pa.string()),
        ("ground_truth", pa.struct([("target", pa.int64()), ("numbers", pa.list_(pa.int64()))])),
    ])),
    ("extra_info", pa.struct([("split", pa.string()), ("index", pa.int64()), ("variant", pa.string()),
                              ("answers", pa.string()), ("format_score", pa.float64())])),
    ("query", pa.string()),
    ("completion", pa.string()),
    ("completion_answer", pa.string()),
    ("answer_correct", pa.bool_()),
    ("numbers", pa.list_(pa.int64())),
    ("target", pa.int64()),
    ("format_score", pa.float64()),
    ("variant", pa.string()),
    ("answers", pa.string()),
    ("requested_behaviors", pa.list_(pa.string())),
    *[(b, pa.int32()) for b in BEHAVIOR_NAMES],
    ("classifier", pa.string()),
    ("writer", pa.string()),
    ("strategy", pa.string()),
    ("dead_ends", pa.int32()),
    ("failure", pa.string()),
    ("voice", pa.string()),
    ("think_chars", pa.int64()),
    ("think_tokens", pa.int64()),
])


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
                raise PrimingError("the LLM trace writer (--writer llm) needs a teacher model: --model M (and --backend)")
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
                raise PrimingError(f"--{name.replace('_', '-')} must be LOW,HIGH with 1 <= LOW <= HIGH, got {low},{high}")
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


@dataclass
class PrimingResult:
    output: Path
    rows: dict[str, int]
    attempted: int
    rejected: Counter = field(default_factory=Counter)
    stats: dict = field(default_factory=dict)

    @property
    def acceptance_rate(self) -> float:
        # Traces that passed every check; with the LLM writer some of them are surplus to a full split.
        return (self.attempted - sum(self.rejected.values())) / self.attempted if self.attempted else 0.0


def tinyzero_query(problem: Problem) -> str:
    """The TinyZero base-model prompt; the completion starts at <think>."""
    return tinyzero_prompt(countdown_question(problem))


def tinyzero_prompt(user_turn: str) -> str:
    """The TinyZero completion prompt around one user turn (for base models, sent without a chat template)."""
    return f"{SYSTEM_PREAMBLE}\nUser: {user_turn}\nAssistant: Let me solve this step by step.\n"


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


def build_priming_set(job: PrimingJob, output: Path, config: PrimingConfig, progress: bool = True,
                      refresh: bool = False) -> PrimingResult | None:
    """Runs one dataset of `curate priming` and the priming flow (one of priming_sets(job)): claims `output` for the
    config and the cleaning (a folder holding another dataset is refused unless `job.overwrite`), then builds it.
    None when it is up to date; `refresh` builds it all the same (a flow whose cached result is stale)."""
    cleaning = job.cleaning.arguments()
    return write_once(output, "priming", {**vars(config), **cleaning},
                      lambda: run_priming(config, output, progress=progress, **cleaning),
                      overwrite=job.overwrite, refresh=refresh)


def completion_text(think: str, answer: str) -> str:
    return f"<think>\n{think}\n</think>\n<answer> {answer} </answer>"


def split_of(problem: Problem, test_share: float) -> str:
    digest = hashlib.sha256(json.dumps(problem.key).encode()).digest()
    return "test" if int.from_bytes(digest[:8], "big") / 2**64 < test_share else "train"


def problem_id(problem: Problem) -> str:
    return "countdown-" + hashlib.sha256(json.dumps(problem.key).encode()).hexdigest()[:16]


def count_tokens(tokenizer, text: str) -> int:
    return len(tokenizer(text, add_special_tokens=False)["input_ids"])


def placeholder_text(tokenizer, n_tokens: int) -> str:
    """Filler that tokenizes to exactly n_tokens tokens (repeats of a unit, corrected for merges)."""
    if n_tokens == 0:
        return ""
    for unit in FILLER_UNITS:
        k = n_tokens
        for _ in range(8):
            text = (unit * k).strip() or unit
            count = count_tokens(tokenizer, text)
            if count == n_tokens:
                return text
            k = max(1, k + n_tokens - count)
    raise PrimingError(f"no filler of exactly {n_tokens} tokens found for this tokenizer")


def run_priming(config: PrimingConfig, output: str | Path, progress: bool = True, dedup: bool = False,
                decontam: str | None = None, benchmarks_dir: str | Path | None = None) -> PrimingResult:
    """Builds the dataset; `dedup` / `decontam` (benchmarks as `curate decontam --against`) then clean it in place."""
    config.validate()
    if decontam:
        parse_against(decontam, benchmarks_dir)  # a wrong --decontam fails now, not after the build
    output = Path(output)
    classifier = get_classifier(config.classifier)
    tokenizer = load_tokenizer(config.tokenizer) if config.tokenizer else None
    for sub in ("data", "rejects", STATE):
        shutil.rmtree(output / sub, ignore_errors=True)
    (output / "data").mkdir(parents=True)
    (output / "rejects").mkdir()
    (output / STATE).mkdir()
    parameters = {**vars(config), "classifier_resolved": classifier.name}
    write_text_atomic(output / STATE / "parameters.json", json.dumps(parameters, indent=2, default=list))

    wanted = {"train": config.n, "test": config.test_n}
    # The rejects are kept even when the build gives up (they say why); the data files appear only when every
    # split has its rows.
    with BuildOutput(
        {s: output / "data" / f"{s}-00000.parquet" for s in wanted if wanted[s]}, ROW_SCHEMA,
        output / "rejects" / "rejects.jsonl", keep_rejects=True, row_group=512, limits=wanted, number=_number_row,
        progress=progress, label=f"{config.variant} ({config.answers})", total=config.n + config.test_n, unit="trace",
        bar_counts="rows",
    ) as out:
        PrimingBuilder(config, classifier, tokenizer, output, wanted, out).run(None, out)
    result = PrimingResult(output=output, rows={s: out.rows.get(s, 0) for s in wanted}, attempted=out.decided,
                           rejected=out.by_reason)
    judge = None
    if config.judge is not None:
        requested = frozenset(b.value for b in config.requested)
        rows = judge_traces(written_traces(output), requested, JudgeOptions(**config.judge), output, progress=progress)
        judge = judge_summary(rows)
    result.stats = dataset_stats(output, result)
    if judge is not None:
        result.stats["judge"] = {"model": config.judge["model"], **judge}
    write_text_atomic(output / STATE / "stats.json", json.dumps(result.stats, indent=2))
    write_priming_card(output, config, classifier.name, result, dedup, decontam, benchmarks_dir)
    # After the card: each adds its own report section to it. The question is the Countdown template around
    # a few numbers (every pair would look near-identical), so duplicates are judged on the trace.
    if dedup:
        dedup_dataset(output, text_key="completion", progress=progress)
    if decontam:
        decontaminate_dataset(output, decontam, fields=["question", "completion"], benchmarks_dir=benchmarks_dir,
                              progress=progress)
    return result


class PrimingBuilder(Builder):
    """Draws Countdown problems in batches until each split has its rows, writes a trace for each, classifies the
    batch's traces together and keeps a trace when the check finds exactly the requested behaviors."""

    def __init__(self, config: PrimingConfig, classifier, tokenizer, output: Path, wanted: dict[str, int],
                 out: BuildOutput):
        self.config, self.classifier, self.tokenizer, self.output = config, classifier, tokenizer, output
        self.wanted, self.out = wanted, out
        self.rng = random.Random(config.seed)

    def batches(self, items: None) -> Iterator[list[tuple[Problem, str]]]:
        """Batches of (problem, split) drawn to fill the splits; ITEMS is None: the problems are drawn here."""
        config, wanted, rng = self.config, self.wanted, self.rng
        test_share = config.test_n / (config.n + config.test_n)
        seen: set = set()
        max_problems = config.max_attempts_factor * (config.n + config.test_n)
        drawn = 0
        sizes = config.sizes
        oversample = config.llm_oversample if config.writer == "llm" else 1.0
        while True:
            kept = self._kept()  # the rows written so far: every decision of the last batch is in
            if all(kept[s] >= wanted[s] for s in wanted):
                return
            batch: list[tuple[Problem, str]] = []
            quota = {s: math.ceil(oversample * (wanted[s] - kept[s])) for s in wanted}
            batch_size = config.batch_size if config.writer == "symbolic" else max(config.batch_size, sum(quota.values()))
            # Stop drawing once each split's quota is met: draws that cannot join the batch would use up the
            # attempt budget while the behavior check still refuses some traces.
            while len(batch) < batch_size and drawn < max_problems and any(
                    sum(1 for _, s in batch if s == split) < quota[split] for split in wanted):
                # One size draws nothing extra, so a single-size build is the same as before sizes could mix.
                size = sizes[0] if len(sizes) == 1 else rng.choice(sizes)
                problem = generate_problem(rng, size, config.number_range, config.target_range,
                                           config.integer_division)
                drawn += 1
                if problem.key in seen:
                    continue
                seen.add(problem.key)
                split = split_of(problem, test_share)
                if sum(1 for _, s in batch if s == split) < quota[split]:
                    batch.append((problem, split))
            if not batch:
                raise PrimingError(
                    f"gave up after {drawn} problems with {kept} rows kept: the problem space is too small or the "
                    "behavior check refuses too much (see rejects/)"
                )
            yield batch

    def _kept(self) -> dict[str, int]:
        return {s: self.out.rows.get(s, 0) for s in self.wanted}

    def decide_batch(self, batch: list[tuple[Problem, str]]) -> list[Decision]:
        """Writes a trace for each problem, classifies them together; the problems that got no trace come first."""
        config, tokenizer = self.config, self.tokenizer
        decisions: list[Decision] = []
        drafts = []
        if config.writer == "llm" and config.variant != "empty_cot":
            drafts = self._llm_drafts(batch, decisions)
            batch = []
        for problem, split in batch:
            try:
                drafts.append((problem, split, *draft_trace(problem, config, tokenizer, self.rng)))
            except TraceError as error:
                decisions.append(_reject(problem, split, f"no trace: {error}", None))
        labels = self.classifier.classify([d[2] for d in drafts]) if drafts else []
        requested = config.requested
        for (problem, split, think, answer, meta), label in zip(drafts, labels, strict=True):
            if label.error or any(label.counts.get(b) is None for b in BEHAVIOR_NAMES):
                decisions.append(_reject(problem, split, f"classifier error: {label.error}", think))
                continue
            missing = [b.value for b in Behavior if b in requested and not label.counts[b.value]]
            extra = [b.value for b in Behavior if b not in requested and label.counts[b.value]]
            if missing or extra:
                reason = "behavior check: " + "; ".join(
                    [f"missing {', '.join(missing)}"] * bool(missing) + [f"unwanted {', '.join(extra)}"] * bool(extra)
                )
                decisions.append(_reject(problem, split, reason, think))
                continue
            completion = completion_text(think, answer)
            correct = score_countdown(completion, problem.ground_truth()) == 1.0
            query = tinyzero_query(problem)  # the one prompt of the SFT and the RL columns
            decisions.append(Keep.row({
                "id": problem_id(problem),
                "question": countdown_question(problem),
                "answer": problem.solution,
                "data_source": DATA_SOURCE,
                "ability": "countdown",
                "prompt": [{"role": "user", "content": query}],
                "reward_model": {"style": "rule", "ground_truth": problem.ground_truth()},
                "extra_info": {"split": split, "index": 0, "variant": config.variant, "answers": config.answers,
                               "format_score": config.format_score},
                "query": query,
                "completion": completion,
                "completion_answer": answer,
                "answer_correct": correct,
                "numbers": list(problem.numbers),
                "target": problem.target,
                "format_score": config.format_score,
                "variant": config.variant,
                "answers": config.answers,
                "requested_behaviors": sorted(b.value for b in requested),
                **{b: label.counts[b] for b in BEHAVIOR_NAMES},
                "classifier": self.classifier.name,
                "writer": config.writer,
                "think_chars": len(think),
                "think_tokens": count_tokens(tokenizer, think) if tokenizer is not None else None,
                **meta,
            }, split))
        return decisions

    def _llm_drafts(self, batch, decisions: list[Decision]) -> list:
        """Teacher traces for a whole batch in one LLM job; traces the writer refuses go to DECISIONS as rejects."""
        config, tokenizer = self.config, self.tokenizer
        behaviors = VARIANTS[config.placeholder_for] if config.variant == "placeholder_cot" else config.requested
        workdir = self.output / STATE / "llm" / f"job-{self.out.decided:07d}"
        traces = write_llm_traces([p for p, _ in batch], behaviors, config.answers, LLMOptions(**config.llm), workdir,
                                  progress=False)
        drafts = []
        for (problem, split), trace in zip(batch, traces, strict=True):
            if isinstance(trace, str):
                decisions.append(_reject(problem, split, trace, None))
                continue
            think = trace.think
            if config.variant == "placeholder_cot":
                think = placeholder_text(tokenizer, count_tokens(tokenizer, think))
            drafts.append((problem, split, think, trace.answer, {"strategy": None, "dead_ends": None, "failure": None,
                                                                 "voice": None}))
        return drafts


def _number_row(row: dict, index: int) -> None:
    row["extra_info"]["index"] = index  # verl's row number within its split


def draft_trace(problem: Problem, config: PrimingConfig, tokenizer, rng: random.Random) -> tuple[str, str, dict]:
    """(think text, answer expression, writer metadata) for one problem under the configured variant."""
    seed_rng = random.Random(rng.random())
    if config.variant in VARIANTS:
        trace = write_trace(problem, config.requested, seed_rng, config.answers, max_dead_ends=config.max_dead_ends,
                            integer_division=config.integer_division)
        return trace.text, trace.answer, {"strategy": trace.strategy, "dead_ends": trace.dead_ends,
                                          "failure": trace.failure, "voice": trace.voice}
    none = {"strategy": None, "dead_ends": None, "failure": None, "voice": None}
    if config.variant == "empty_cot":
        # 'any' has no search whose accuracy it could keep: an empty chain of thought gives the reference answer.
        answer = problem.solution if config.answers != "incorrect" else wrong_expression(problem, seed_rng)
        return EMPTY_THINK, answer, none
    # placeholder_cot: the paired behavior trace sets the length, then its text is replaced by filler.
    trace = write_trace(problem, VARIANTS[config.placeholder_for], seed_rng, config.answers,
                        max_dead_ends=config.max_dead_ends, integer_division=config.integer_division)
    filler = placeholder_text(tokenizer, count_tokens(tokenizer, trace.text))
    return filler, trace.answer, none


def _reject(problem: Problem, split: str, reason: str, think: str | None) -> Reject:
    # A problem without a trace is counted by why (the backward search cannot narrate a solution whose values leave
    # the search's range, a slip that fits nowhere, ...), so the card says which problems a variant skips.
    key = re.sub(r"\d+", "N", reason) if reason.startswith("no trace:") else reason.split(":")[0]
    return Reject(key, {"reason": reason, "id": problem_id(problem), "split": split, "numbers": list(problem.numbers),
                        "target": problem.target, "think": think})


def written_traces(output: Path) -> list[JudgedTrace]:
    """Every trace the build wrote, from its files: the kept rows, then the refused traces in rejects/ (a problem
    that got no trace has none to judge)."""
    traces = []
    for path in sorted((output / "data").glob("*.parquet")):
        table = pq.read_table(path, columns=["id", "extra_info", "numbers", "target", "completion"])
        for row in table.to_pylist():
            completion = row["completion"]
            think = completion[len("<think>\n"): completion.rindex("\n</think>")]
            traces.append(JudgedTrace(row["id"], row["extra_info"]["split"], True, row["numbers"], row["target"], think))
    for line in (output / "rejects" / "rejects.jsonl").read_text(encoding="utf-8").splitlines():
        reject = json.loads(line)
        if reject["think"] is not None:
            traces.append(JudgedTrace(reject["id"], reject["split"], False, reject["numbers"], reject["target"],
                                      reject["think"]))
    return traces


def dataset_stats(output: Path, result: PrimingResult) -> dict:
    """Measured on the written files with DuckDB: per split, behavior prevalence, accuracy and lengths."""
    files = sorted(str(p) for p in (output / "data").glob("*.parquet"))
    stats: dict = {
        "attempted": result.attempted,
        "kept": sum(result.rows.values()),
        "acceptance_rate": result.acceptance_rate,
        "rejected": dict(result.rejected),
        "splits": {},
    }
    if not files:
        return stats
    prevalence = ", ".join(f"avg(({b} > 0)::INT) AS {b}" for b in BEHAVIOR_NAMES)
    with duckdb.connect() as connection:
        rows = connection.sql(
            f"SELECT extra_info.split, count(*), avg(answer_correct::INT), avg(think_chars), median(think_chars), "
            f"quantile_cont(think_chars, 0.9), max(think_chars), avg(think_tokens), max(think_tokens), {prevalence} "
            "FROM read_parquet($files) GROUP BY 1 ORDER BY 1",
            params={"files": files},
        ).fetchall()
        overlap = connection.sql(
            "SELECT count(*) FROM (SELECT id FROM read_parquet($files) WHERE extra_info.split = 'train' "
            "INTERSECT SELECT id FROM read_parquet($files) WHERE extra_info.split = 'test')",
            params={"files": files},
        ).fetchall()[0][0]
        failures = connection.sql(
            "SELECT coalesce(failure, CASE WHEN answer_correct THEN 'none (correct)' ELSE 'unknown' END), count(*) "
            "FROM read_parquet($files) GROUP BY 1 ORDER BY 2 DESC", params={"files": files}).fetchall()
        thinks = connection.sql("SELECT coalesce(voice, writer), completion FROM read_parquet($files)",
                                params={"files": files}).fetchall()
    for split, count, accuracy, mean_c, median_c, p90_c, max_c, mean_t, max_t, *prev in rows:
        stats["splits"][split] = {
            "rows": count, "answer_accuracy": accuracy,
            "think_chars": {"mean": mean_c, "median": median_c, "p90": p90_c, "max": max_c},
            "think_tokens": {"mean": mean_t, "max": max_t},
            "prevalence": dict(zip(BEHAVIOR_NAMES, prev)),
        }
    stats["problems_in_both_splits"] = overlap
    stats["failures"] = dict(failures)
    by_voice: dict[str, list[str]] = {}
    for voice, completion in thinks:
        by_voice.setdefault(voice, []).append(completion)
    stats["distinct_4gram_rate"] = {voice: distinct_ngram_rate(texts) for voice, texts in sorted(by_voice.items())}
    stats["distinct_4gram_rate"]["all"] = distinct_ngram_rate([c for _, c in thinks])
    return stats


def distinct_ngram_rate(texts, n: int = 4) -> float | None:
    """Distinct word n-grams over all n-grams in the texts (numbers masked, so that only the wording counts)."""
    grams = []
    for text in texts:
        words = re.sub(r"\d+", "N", text).split()
        grams += [tuple(words[k:k + n]) for k in range(len(words) - n + 1)]
    return len(set(grams)) / len(grams) if grams else None


FIELDS = [
    ("`query`", "string", ("the prompt, in the TinyZero completion format, ending before `<think>`; the SFT "
                           "prompt and the content of `prompt`")),
    ("`completion`", "string", "`<think>` … `</think>` then `<answer>` … `</answer>`"),
    ("`data_source`", "string", f"`{DATA_SOURCE}`: the registered reward that grades the answer"),
    ("`prompt`", "list of {role, content}", "verl prompt: `query` as the one user message (as TinyZero's data)"),
    ("`ability`", "string", "task family"),
    ("`reward_model`", "struct{style, ground_truth{target, numbers}}", "what verl passes to the reward"),
    ("`extra_info`", "struct{split, index, variant, answers, format_score}", ("verl bookkeeping; `format_score` is "
                                                                              "read by the Countdown reward")),
    ("`id`, `question`, `answer`", "string", "problem id, question, a reference solution"),
    ("`completion_answer`, `answer_correct`", "string, bool", ("the expression the completion gives, and whether it "
                                                              "reaches the target")),
    ("`numbers`, `target`", "list of int64, int64", "the problem"),
    ("`format_score`", "float64", "reward of a well-formed wrong equation (0, or TinyZero's 0.1)"),
    ("`variant`, `answers`, `requested_behaviors`", "string, string, list of string", "what the trace was asked to show"),
    ("`verification`, `backtracking`, `subgoal_setting`, `backward_chaining`", "int32",
     "sentences the classifier found showing each behavior in the trace"),
    ("`classifier`, `writer`, `strategy`, `dead_ends`", "string, string, string, int32", ("who checked and wrote the "
                                                                                         "trace, and how it searched")),
    ("`failure`, `voice`", "string, string", "why an incorrect answer is wrong (null when correct), the narrator voice"),
    ("`think_chars`, `think_tokens`", "int64", "length of the chain of thought (tokens: null without --tokenizer)"),
]


def priming_command(config: PrimingConfig, output: Path, dedup: bool, decontam: str | None,
                    benchmarks_dir: str | Path | None) -> str:
    options = [
        ("--variant", config.variant), ("--answers", config.answers), ("--n", config.n), ("--test-n", config.test_n),
        ("--seed", config.seed), ("--writer", config.writer), ("--classifier", config.classifier),
        ("--numbers", ",".join(map(str, config.sizes))),
        ("--number-range", f"{config.number_range[0]},{config.number_range[1]}"),
        ("--target-range", f"{config.target_range[0]},{config.target_range[1]}"),
        ("--max-dead-ends", config.max_dead_ends), ("--output", output),
        ("--fractional-division", not config.integer_division),
        ("--format-score", f"{config.format_score:g}" if config.format_score else None),
        ("--tokenizer", config.tokenizer or None),
        ("--placeholder-for", config.placeholder_for if config.variant == "placeholder_cot" else None),
    ]
    if config.writer == "llm":
        llm = config.llm or {}
        options += [("--model", str(llm.get("model"))), ("--backend", str(llm.get("backend", "transformers"))),
                    ("--endpoint-url", llm.get("endpoint_url") or None),
                    ("--temperature", str(llm["temperature"]) if "temperature" in llm else None),
                    ("--max-trace-tokens", str(llm["max_tokens"]) if "max_tokens" in llm else None)]
    if config.judge is not None:
        options.append(("--judge-model", str(config.judge["model"])))
        if config.writer != "llm":  # the writer's options above already name the shared server
            options += [("--backend", str(config.judge.get("backend", "transformers"))),
                        ("--endpoint-url", config.judge.get("endpoint_url") or None)]
    return reproduce_command("priming", options=options, dedup=dedup, decontam=decontam, benchmarks_dir=benchmarks_dir)


def judge_section(judge: dict, config: PrimingConfig) -> str:
    """The card's LLM-judge section: acceptance under the judge per group of traces, and its agreement with the
    classifier, from the verdict rows."""
    def rate(part):
        return f"{100 * part['accepted'] / part['judged']:.1f} %" if part["judged"] else "n/a"

    table = ["| traces | count | judged | accepted by the judge | acceptance | parse failures | request failures |",
             "|---|---|---|---|---|---|---|"]
    for key, label in (("all", "all written"), ("kept", "kept by the classifier"), ("refused", "refused by the classifier")):
        part = judge[key]
        table.append(f"| {label} | {part['traces']:,} | {part['judged']:,} | {part['accepted']:,} | {rate(part)} | "
                     f"{part['parse_failures']:,} | {part['request_failures']:,} |")
    agreement = judge["agreement"]
    return (f"`{judge['model']}` read every trace the build wrote, with the puzzle's numbers and target, and counted the "
            "four behaviors; a trace is accepted when it shows exactly the requested ones "
            f"({', '.join(sorted(b.value for b in config.requested)) or 'none'}). The judge reports and does not choose "
            "rows; a reply it could not read leaves the trace unjudged.\n\n" + "\n".join(table)
            + "\n\nAgreement over judged traces: both accept "
            f"{agreement['both_accept']:,}, only the classifier {agreement['only_classifier']:,}, only the judge "
            f"{agreement['only_judge']:,}, neither {agreement['neither']:,}. One verdict per trace is in "
            f"`{JUDGE_DIR}/{VERDICTS}` (counted before any --dedup / --decontam).")


def write_priming_card(output: Path, config: PrimingConfig, classifier: str, result: PrimingResult, dedup: bool = False,
                       decontam: str | None = None, benchmarks_dir: str | Path | None = None) -> None:
    from huggingface_hub import DatasetCardData


    stats = result.stats
    requested = sorted(b.value for b in config.requested)
    forbidden = [b for b in BEHAVIOR_NAMES if b not in requested]
    splits = list(stats["splits"])
    card_data = DatasetCardData(
        license="apache-2.0",
        language=["en"],
        task_categories=["text-generation"],
        size_categories=[size_category(stats["kept"])],
        pretty_name=f"curate priming: countdown {config.variant} ({config.answers} answers)",
        tags=["reasoning", "cognitive-behaviors", "countdown", "priming", "curate", *requested],
        configs=split_configs(splits),
    )
    rejected = "".join(f"\n| {k} | {v:,} |" for k, v in stats["rejected"].items())
    acceptance = (f"{stats['kept']:,} of {stats['attempted']:,} traces kept "
                  f"(acceptance rate {100 * stats['acceptance_rate']:.1f} % under `{classifier}`). The phrase banks "
                  "were not written from this classifier's cue lists, so the rate measures agreement between two "
                  "independent readings of the behaviors.")
    if rejected:
        acceptance += f"\n\n| reason | traces |\n|---|---|{rejected}\n\nThe refused traces are in `rejects/`."
    split_table = ["| split | rows | answer accuracy | think chars mean / median / p90 / max | think tokens mean / max | "
                   + " | ".join(BEHAVIOR_NAMES) + " |", "|---|---|---|---|---|" + "---|" * len(BEHAVIOR_NAMES)]
    for split, s in stats["splits"].items():
        c, t = s["think_chars"], s["think_tokens"]
        tokens = f"{t['mean']:.0f} / {t['max']}" if t["mean"] is not None else "n/a (no --tokenizer)"
        split_table.append(" | ".join([
            f"| {split}", f"{s['rows']:,}", f"{100 * s['answer_accuracy']:.1f} %",
            f"{c['mean']:.0f} / {c['median']:.0f} / {c['p90']:.0f} / {c['max']}", tokens,
            *[f"{100 * s['prevalence'][b]:.1f} %" for b in BEHAVIOR_NAMES]]) + " |")
    split_table.append(f"\nProblems in both splits: {stats.get('problems_in_both_splits', 0)}.")
    failure_table = ("| failure | rows |\n|---|---|" + "".join(f"\n| {k} | {v:,} |" for k, v in stats.get("failures", {}).items())
                     + "\n\nFailures: near_miss (the search budget ran out; the nearest result is answered), carry / "
                     "borrow / swapped_digits (one slipped equation, never approved by a check), number_used_twice, "
                     "number_left_out. Every other equation in a trace is true.")
    diversity = ("Distinct word 4-grams over all 4-grams (numbers masked), per narrator voice:\n\n| voice | rate |\n|---|---|"
                 + "".join(f"\n| {k} | {v:.3f} |" for k, v in stats.get("distinct_4gram_rate", {}).items()
                           if v is not None))
    writer_description = {
        "empty_cot": "each completion has an empty chain of thought (`<think> </think>`).",
        "placeholder_cot": f"each chain of thought is filler with the token count (under `{config.tokenizer}`) of a "
                           f"`{config.placeholder_for}` trace for the same problem.",
    }.get(config.variant, "each trace narrates a search (depth-first, best-first, or backward from the target when "
                          "backward chaining is on) in one of several narrator voices, with the chosen behaviors "
                          "switched on and the others off.")
    if config.writer == "llm" and config.variant != "empty_cot":
        writer_description = (
            f"the teacher model `{(config.llm or {}).get('model')}` wrote each trace under a system prompt asking for the "
            "chosen behaviors and forbidding the others; replies without a readable `<think>`/`<answer>`, or whose answer "
            f"was not {'correct' if config.answers == 'correct' else 'a well-formed wrong expression'} by the Countdown "
            "verifier, were refused. " + ("That trace's token count then set the length of filler that replaced it. "
                                         if config.variant == "placeholder_cot" else ""))
    sections = [("Behavior check", acceptance), ("Splits", "\n".join(split_table)),
                ("Incorrect answers by failure", failure_table), ("Prose diversity", diversity)]
    if "judge" in stats:
        sections.insert(1, ("LLM judge", judge_section(stats["judge"], config)))
    card = render_card(
        card_data,
        summary=f"{stats['kept']:,} Countdown priming examples, variant `{config.variant}`, {config.answers} answers.",
        method=f"Countdown problems of {' or '.join(map(str, config.sizes))} numbers in {config.number_range[0]}-"
               f"{config.number_range[1]} with targets in {config.target_range[0]}-{config.target_range[1]} were "
               f"generated solvable by construction (confirmed by an exhaustive solver); "
               f"{writer_description} Every trace was then classified with `{classifier}` and kept only when it showed "
               f"{', '.join(requested) or 'no behavior'} and none of {', '.join(forbidden) or 'nothing'}. Every row carries "
               f"`format_score` {config.format_score:g} for the Countdown reward (the score of a well-formed wrong "
               "equation; TinyZero's runs use 0.1), and one prompt, the TinyZero completion prompt, for SFT and RL.",
        parameters=[(k, v) for k, v in vars(config).items()],
        command=priming_command(config, output, dedup, decontam, benchmarks_dir),
        sections=sections,
        fields=FIELDS,
        load=load_snippet(splits),
        limitations=f"Behavior labels come from `{classifier}`, an automatic classifier: a trace it accepts can still "
                    "lack a behavior in a form it does not recognise, and symbolic traces are templated text, more "
                    "regular than a model's, even across its narrator voices. Incorrect answers come from the natural "
                    "failures counted above.",
    )
    save_card(card, output)

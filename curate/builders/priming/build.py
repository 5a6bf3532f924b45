"""`curate priming` and the priming flow: one dataset per variant, claimed, then built: problems drawn in batches
until each split has its rows, a trace written for each, the batch classified together and a trace kept when the
check finds exactly the requested behaviors; then the LLM judge when asked, the stats, the card and the cleaning."""

from __future__ import annotations

import json
import math
import random
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq

from curate.behaviors import BEHAVIOR_NAMES, Behavior
from curate.builders.base import Builder, BuildOutput, Decision, Keep, Reject
from curate.builders.jobs import PrimingJob
from curate.builders.llm_writers import LLMOptions, write_llm_traces
from curate.builders.priming.card import write_priming_card
from curate.builders.priming.config import PrimingConfig, PrimingError
from curate.builders.priming.judge import JudgedTrace, JudgeOptions, judge_summary, judge_traces
from curate.builders.priming.rows import ROW_SCHEMA, completion_text, problem_id, split_of, tinyzero_query
from curate.builders.priming.stats import PrimingResult, dataset_stats
from curate.builders.priming.traces import count_tokens, draft_trace, placeholder_text
from curate.builders.trace_phrases import VARIANTS
from curate.builders.trace_templates import TraceError, countdown_question
from curate.classifiers import get_classifier
from curate.files import write_text_atomic
from curate.hf_tokenizers import load_tokenizer
from curate.pipelines.decontam import decontaminate_dataset, parse_against
from curate.pipelines.dedup import dedup_dataset
from curate.pipelines.state import STATE, write_once
from curate.puzzles.countdown import DATA_SOURCE, Problem, generate_problem, score_countdown


def build_priming_set(job: PrimingJob, output: Path, config: PrimingConfig, progress: bool = True,
                      refresh: bool = False) -> PrimingResult | None:
    """Runs one dataset of `curate priming` and the priming flow (one of priming_sets(job)): claims `output` for the
    config and the cleaning (a folder holding another dataset is refused unless `job.overwrite`), then builds it.
    None when it is up to date; `refresh` builds it all the same (a flow whose cached result is stale)."""
    cleaning = job.cleaning.arguments()
    return write_once(output, "priming", {**vars(config), **cleaning},
                      lambda: run_priming(config, output, progress=progress, **cleaning),
                      overwrite=job.overwrite, refresh=refresh)


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
            batch_size = (config.batch_size if config.writer == "symbolic"
                          else max(config.batch_size, sum(quota.values())))
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
            traces.append(JudgedTrace(row["id"], row["extra_info"]["split"], True, row["numbers"], row["target"],
                                      think))
    for line in (output / "rejects" / "rejects.jsonl").read_text(encoding="utf-8").splitlines():
        reject = json.loads(line)
        if reject["think"] is not None:
            traces.append(JudgedTrace(reject["id"], reject["split"], False, reject["numbers"], reject["target"],
                                      reject["think"]))
    return traces

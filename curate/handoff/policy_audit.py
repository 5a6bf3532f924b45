"""Behavior audit of a policy: sample it on a task, classify the behaviors in its outputs, score the answers.

This is the check before any GPU-hours go into RL: a base model whose outputs already show verification and
backtracking some of the time is one RL can improve; one whose outputs never do needs priming first.

Prompts come from a task generator (`countdown`: seeded, solvable Countdown problems) or from any built
dataset with RL columns (`--dataset`). Sampling and scoring are the pass-rate filter's (datatrove's
InferenceRunner, the registered reward); the behavior labels come from any registered batch classifier.

Output layout:
    OUT/prompts/data/train-00000.parquet  the generated prompts (task mode), a dataset in the builders' layout
    OUT/rates/                            per-prompt samples and rewards (as written by the pass-rate filter)
    OUT/samples.parquet                   one row per sample: text, reward, finish reason, a count per behavior
                                          (null with the classifier's error when it could not label it)
    OUT/report.json, OUT/README.md        per behavior: share of responses showing it, mean count per response,
                                          accuracy with and without it; the overall accuracy

A checkpoint sweep (`run_checkpoint_sweep`, `--checkpoints 'ckpts/step_*'`) audits each checkpoint of a training
run on the same prompts, in step order, into OUT/<checkpoint>/, and draws the reference study's figure:
    OUT/behaviors_over_steps.png, OUT/sweep.json, OUT/README.md
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from curate.behaviors import BEHAVIOR_NAMES
from curate.errors import CurateError
from curate.handoff.passrate import SamplingOptions, SamplingResult, run_sampling
from curate.pipelines.steps import PARTIAL, batched

TASKS = ("countdown",)

SAMPLES_SCHEMA = pa.schema([
    ("key", pa.string()),
    ("id", pa.string()),
    ("sample", pa.int32()),
    ("data_source", pa.string()),
    ("text", pa.string()),
    ("reward", pa.float64()),
    ("finish_reason", pa.string()),
    *[(b, pa.int32()) for b in BEHAVIOR_NAMES],
    ("classifier", pa.string()),
    ("classifier_error", pa.string()),
])


class PolicyAuditError(CurateError, ValueError):
    pass


@dataclass
class BehaviorRow:
    behavior: str
    labelled: int = 0
    present: int = 0
    total: int = 0  # sum of the counts over the labelled responses
    correct_with: int = 0
    scored_with: int = 0
    correct_without: int = 0
    scored_without: int = 0

    @property
    def rate(self) -> float | None:
        return self.present / self.labelled if self.labelled else None

    @property
    def mean_count(self) -> float | None:
        """Mean count per labelled response (the reference reports behaviors so, not only as presence)."""
        return self.total / self.labelled if self.labelled else None

    @property
    def accuracy_with(self) -> float | None:
        return self.correct_with / self.scored_with if self.scored_with else None

    @property
    def accuracy_without(self) -> float | None:
        return self.correct_without / self.scored_without if self.scored_without else None


@dataclass
class PolicyAuditResult:
    output: Path
    model: str
    task: str
    classifier: str
    samples: int = 0
    prompts: int = 0
    scored: int = 0
    correct: int = 0
    unlabelled: int = 0
    truncated: int = 0
    empty: int = 0
    request_errors: int = 0
    behaviors: dict[str, BehaviorRow] = field(default_factory=dict)
    sampling: SamplingResult | None = None

    @property
    def accuracy(self) -> float | None:
        return self.correct / self.scored if self.scored else None

    def as_dict(self) -> dict:
        return {
            "model": self.model, "task": self.task, "classifier": self.classifier, "prompts": self.prompts,
            "samples": self.samples, "scored": self.scored, "correct": self.correct, "accuracy": self.accuracy,
            "unlabelled": self.unlabelled, "truncated": self.truncated, "empty": self.empty,
            "request_errors": self.request_errors,
            "behaviors": {b: {"rate": r.rate, "mean_count": r.mean_count, "present": r.present, "labelled": r.labelled,
                              "accuracy_with": r.accuracy_with, "accuracy_without": r.accuracy_without}
                          for b, r in self.behaviors.items()},
        }


def countdown_prompts(n: int, seed: int, n_numbers: int = 4) -> list[dict]:
    """n distinct, solvable Countdown problems as RL rows (the TinyZero user prompt, which asks for <answer>)."""
    from curate.builders.trace_templates import countdown_question
    from curate.puzzles.countdown import DATA_SOURCE, generate_problem

    rng = random.Random(seed)
    rows, seen = [], set()
    for _ in range(n * 50):
        if len(rows) == n:
            break
        problem = generate_problem(rng, n_numbers=n_numbers)
        if problem.key in seen:
            continue
        seen.add(problem.key)
        rows.append({"id": f"countdown-{seed}-{len(rows):05d}", "question": countdown_question(problem),
                     "answer": problem.solution, "ground_truth": problem.ground_truth(), "data_source": DATA_SOURCE,
                     "ability": "countdown"})
    if len(rows) < n:
        raise PolicyAuditError(f"only {len(rows)} distinct Countdown problems with {n_numbers} numbers; ask for fewer")
    return rows


def write_task_prompts(task: str, n: int, seed: int, output: Path) -> Path:
    if task not in TASKS:
        raise PolicyAuditError(f"unknown task {task!r}; choose one of {', '.join(TASKS)}, or pass --dataset")
    rows = countdown_prompts(n, seed)
    dataset = output / "prompts"
    path = dataset / "data" / "train-00000.parquet"
    path.parent.mkdir(parents=True, exist_ok=True)
    partial_path = path.with_name(path.name + PARTIAL)
    pq.write_table(pa.Table.from_pylist(rows), partial_path)
    os.replace(partial_path, path)
    return dataset


def run_policy_audit(
    output: str | Path,
    options: SamplingOptions,
    task: str | None = "countdown",
    dataset: str | Path | None = None,
    n: int = 200,
    seed: int = 0,
    classifier: str = "cues",
    batch_size: int = 64,
    progress: bool = True,
) -> PolicyAuditResult:
    """Samples `options.k` answers per prompt (n prompts), classifies and scores every answer."""
    from curate.classifiers import get_classifier

    if (task is None) == (dataset is None):
        raise PolicyAuditError("give either a task or a dataset")
    if n < 1:
        raise PolicyAuditError("--n must be at least 1")
    output = Path(output)
    try:
        labeller = get_classifier(classifier)
    except (KeyError, ValueError) as error:
        raise PolicyAuditError(str(error)) from None
    if task is not None:
        prompts = write_task_prompts(task, n, seed, output)
        # The task's own prompt already asks for the answer format its reward reads.
        options = dataclasses.replace(options, instruction="" if options.instruction is None else options.instruction)
        limit = -1
    else:
        prompts, limit = Path(dataset), n
    sampling = run_sampling(prompts, output, options, limit=limit, progress=progress)
    result = PolicyAuditResult(output=output, model=options.model, task=task or str(dataset), classifier=labeller.name,
                               behaviors={b: BehaviorRow(b) for b in BEHAVIOR_NAMES}, sampling=sampling)
    samples_path = output / "samples.parquet"
    partial_path = samples_path.with_name(samples_path.name + PARTIAL)
    with pq.ParquetWriter(partial_path, SAMPLES_SCHEMA) as writer:
        for batch in batched(_samples(sampling.rates_dir), batch_size):
            rows = _labelled(batch, labeller)
            for row in rows:
                _count(result, row)
            writer.write_table(pa.Table.from_pylist(rows, schema=SAMPLES_SCHEMA))
    os.replace(partial_path, samples_path)
    _write_report(result, options)
    return result


def _samples(rates_dir: Path):
    for path in sorted(rates_dir.glob("rates_*.parquet")):
        for batch in pq.ParquetFile(path).iter_batches(batch_size=256):
            for prompt in batch.to_pylist():
                for index, sample in enumerate(prompt["samples"]):
                    yield {"key": prompt["key"], "id": prompt["id"], "sample": index, "data_source": prompt["data_source"],
                           "text": sample["text"], "reward": sample["reward"], "finish_reason": sample["finish_reason"],
                           "request_error": sample["error"] if sample["finish_reason"] == "error" else None}


def _labelled(batch: list[dict], labeller) -> list[dict]:
    texts = [row["text"] or "" for row in batch]
    try:
        labels = labeller.classify(texts)
    except RuntimeError as error:
        # llm_v1 owns its server and cannot label in a batch; say how to get LLM labels instead.
        raise PolicyAuditError(
            f"{labeller.name} cannot label outputs here ({error}). Use a batch classifier (cues, cascade gate), or "
            "label OUT/samples.parquet afterwards: curate tag-llm --input OUT/samples.parquet --text-key text "
            "--id-key key") from None
    rows = []
    for row, label in zip(batch, labels, strict=True):
        error = row.pop("request_error")
        empty = not (row["text"] or "").strip()
        rows.append({**row, **{b: (None if empty or error else label.counts.get(b)) for b in BEHAVIOR_NAMES},
                     "classifier": labeller.name,
                     "classifier_error": error or ("empty output" if empty else label.error)})
    return rows


def _count(result: PolicyAuditResult, row: dict) -> None:
    result.samples += 1
    result.prompts += row["sample"] == 0
    result.truncated += row["finish_reason"] == "length"
    result.request_errors += row["finish_reason"] == "error"
    result.empty += row["finish_reason"] != "error" and not (row["text"] or "").strip()
    reward = row["reward"]
    if reward is not None:
        result.scored += 1
        result.correct += reward == 1.0
    if any(row[b] is None for b in BEHAVIOR_NAMES):
        result.unlabelled += 1
    for behavior, stats in result.behaviors.items():
        count = row[behavior]
        if count is None:
            continue
        stats.labelled += 1
        stats.total += count
        present = count > 0
        stats.present += present
        if reward is not None:
            if present:
                stats.scored_with += 1
                stats.correct_with += reward == 1.0
            else:
                stats.scored_without += 1
                stats.correct_without += reward == 1.0


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f} %"


def _mean(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _write_report(result: PolicyAuditResult, options: SamplingOptions) -> None:
    output = result.output
    record = {**result.as_dict(), "sampling": options.fingerprint(), "backend": options.backend}
    _whole(output / "report.json", json.dumps(record, indent=2))
    rows = "\n".join(f"| {b} | {_pct(r.rate)} | {r.present:,} / {r.labelled:,} | {_mean(r.mean_count)} | "
                     f"{_pct(r.accuracy_with)} | {_pct(r.accuracy_without)} |" for b, r in result.behaviors.items())
    card = f"""# Behavior audit of {result.model} on {result.task}

{result.samples:,} samples on {result.prompts:,} prompts ({options.k} per prompt, temperature {options.temperature},
at most {options.max_tokens} tokens, backend {options.backend}, prompt format {options.prompt_format}); behaviors labelled by `{result.classifier}`, answers
scored by the reward each prompt's `data_source` names.

| | |
|---|---|
| accuracy (correct / scored samples) | {_pct(result.accuracy)} ({result.correct:,} / {result.scored:,}) |
| cut at the token limit | {result.truncated:,} |
| empty outputs | {result.empty:,} |
| request errors | {result.request_errors:,} |
| samples without behavior labels | {result.unlabelled:,} |

| behavior | share of outputs showing it | outputs | mean count per output | accuracy with it | accuracy without it |
|---|---|---|---|---|---|
{rows}

A policy whose outputs rarely show verification or backtracking gains little from RL; prime it first
(`curate priming`, or continued pretraining on a behavior-enriched corpus). Every sample is in `samples.parquet`.
"""
    _whole(output / "README.md", card)


def _whole(path: Path, text: str) -> None:
    partial_path = path.with_name(path.name + PARTIAL)
    partial_path.write_text(text)
    os.replace(partial_path, path)



@dataclass
class SweepResult:
    output: Path
    steps: list[int]
    audits: list[PolicyAuditResult]


def checkpoint_dirs(pattern: str) -> list[tuple[int, Path]]:
    """(step, directory) for every directory PATTERN matches, in step order; the step is the last number in the name
    (step_100, checkpoint-100, global_step100)."""
    import glob
    import re

    found = []
    for name in glob.glob(pattern):
        path = Path(name)
        numbers = re.findall(r"\d+", path.name)
        if path.is_dir() and numbers:
            found.append((int(numbers[-1]), path))
    if not found:
        raise PolicyAuditError(f"no checkpoint directory with a step number in its name matches {pattern!r}")
    steps = [s for s, _ in found]
    if len(set(steps)) != len(steps):
        raise PolicyAuditError(f"two checkpoints of {pattern!r} have the same step number: {sorted(found)}")
    return sorted(found)


def run_checkpoint_sweep(pattern: str, output: str | Path, options: SamplingOptions, **audit) -> SweepResult:
    """One audit per checkpoint directory (same prompts, same sampling), in step order, then the figure of behaviors
    and accuracy over training steps. `audit`: run_policy_audit's task, dataset, n, seed, classifier."""
    from curate.data_cards.plots import plot_behaviors_over_steps

    output = Path(output)
    found = checkpoint_dirs(pattern)
    audits = [run_policy_audit(output / path.name, dataclasses.replace(options, model=str(path)), **audit)
              for _, path in found]
    steps = [s for s, _ in found]
    series = {b: {"rate": [a.behaviors[b].rate for a in audits], "mean_count": [a.behaviors[b].mean_count for a in audits]}
              for b in BEHAVIOR_NAMES}
    accuracy = [a.accuracy for a in audits]
    plot_behaviors_over_steps(steps, series, accuracy, output / "behaviors_over_steps.png",
                              title=f"{pattern} ({audits[0].classifier}, {audits[0].task})")
    record = {"pattern": pattern, "steps": steps, "checkpoints": [str(p) for _, p in found], "accuracy": accuracy,
              "behaviors": series, "audits": [a.as_dict() for a in audits]}
    _whole(output / "sweep.json", json.dumps(record, indent=2))
    header = "| step | checkpoint | accuracy | " + " | ".join(f"{b} (share / mean)" for b in BEHAVIOR_NAMES) + " |"
    lines = [header, "|---|---|---|" + "---|" * len(BEHAVIOR_NAMES)]
    for (step, path), a in zip(found, audits):
        lines.append(f"| {step} | `{path.name}` | {_pct(a.accuracy)} | " + " | ".join(
            f"{_pct(a.behaviors[b].rate)} / {_mean(a.behaviors[b].mean_count)}" for b in BEHAVIOR_NAMES) + " |")
    table = "\n".join(lines)
    _whole(output / "README.md", f"""# Behaviors over training: {pattern}

{len(audits)} checkpoints, each sampled on the same prompts ({options.k} per prompt, temperature {options.temperature},
prompt format {options.prompt_format}); behaviors labelled by `{audits[0].classifier}`. Each checkpoint's own report is in
its folder.

![behaviors and accuracy over training steps](behaviors_over_steps.png)

{table}
""")
    return SweepResult(output=output, steps=steps, audits=audits)

"""Behavior audit of a policy: sample it on a task, classify the behaviors in its outputs, score the answers.

This is the check before any GPU-hours go into RL: a base model whose outputs already show verification and
backtracking some of the time is one RL can improve; one whose outputs never do needs priming first.

Prompts come from a task generator (`countdown`: seeded, solvable Countdown problems) or from any built
dataset with RL columns (`--dataset`). Sampling and scoring are the pass-rate filter's (datatrove's
InferenceRunner, the registered reward); the behavior labels come from any registered batch classifier, or
in-line from `llm_v1` (`cascade_v1`: the cue gate in front of it) on a judge model whose server may differ from
the policy's: the responses go through `curate tag-llm`'s job (curate.pipelines.llm_tag) as a corpus, and its
attribute rows come back by response id. A response the judge could not label (its answer did not parse, its
request failed) keeps null counts with the reason, and is counted by reason. A response to a Countdown prompt is
classified below its problem statement ("Numbers: [...], target: T"), as the labeled sets the classifiers are
measured on show every trace; `samples.parquet` keeps the response alone.

Output layout:
    OUT/prompts/data/train-00000.parquet  the generated prompts (task mode), a dataset in the builders' layout
    OUT/rates/                            per-prompt samples and rewards (as written by the pass-rate filter)
    OUT/samples.parquet                   one row per sample: text, reward, finish reason, a count per behavior
                                          (null with the classifier's error when it could not label it)
    OUT/responses/responses.jsonl, OUT/tags/llm_v1/   llm_v1 only: the responses sent to the judge (id, text) and
                                          its attribute shards, checkpoints and raw answers (a rerun resumes them)
    OUT/report.json, OUT/README.md        per behavior: share of responses showing it, mean count per response,
                                          accuracy with and without it; the overall accuracy

A checkpoint sweep (`run_checkpoint_sweep`, `--checkpoints 'ckpts/step_*'`) audits each checkpoint of a training
run on the same prompts, in step order, into OUT/<checkpoint>/, and draws the reference study's figure:
    OUT/behaviors_over_steps.png, OUT/sweep.json, OUT/README.md
The same figure, sweep.json and README come from the rollouts a run already logged, without sampling again
(`run_rollout_sweep`, `--rollouts DIR`: verl's trainer.rollout_data_dir, TRL's logged completions), with every output's
counts in OUT/samples.parquet.
"""

from __future__ import annotations

import dataclasses
import json
import random
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from curate.behaviors import BEHAVIOR_NAMES
from curate.builders.trace_templates import countdown_question
from curate.classifiers import get_classifier, needs_model_server, resolve_name
from curate.data_cards.plots import plot_behaviors_over_steps
from curate.errors import CurateError
from curate.files import atomic_path, write_text_atomic
from curate.handoff.jobs import PolicyAuditJob
from curate.handoff.passrate import SamplingResult, run_sampling
from curate.handoff.rollouts import Rollout, find_rollouts, read_step
from curate.handoff.sampling import SamplingOptions
from curate.pipelines.llm.options import ServerOptions
from curate.pipelines.llm.tag_options import LLMTagOptions
from curate.pipelines.llm_tag import run_llm_tagging
from curate.pipelines.readers import InputSpec
from curate.pipelines.steps import batched
from curate.puzzles.countdown import DATA_SOURCE, generate_problem, problem_statement

TASKS = ("countdown",)
IN_LINE = ("llm_", "cascade_")  # classifier families that label through an LLM job, on the judge's server

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
    # why samples have no labels: "empty output", "policy request error", or the classifier's error kind ("parse",
    # "request", "tokenize", "no label")
    unlabelled_reasons: Counter = field(default_factory=Counter)
    judge: str | None = None  # the model that labelled the responses (llm_v1, cascade_v1)
    with_problem: int = 0  # samples classified after their prompt's Countdown problem statement
    behaviors: dict[str, BehaviorRow] = field(default_factory=dict)
    sampling: SamplingResult | None = None

    @property
    def accuracy(self) -> float | None:
        return self.correct / self.scored if self.scored else None

    def as_dict(self) -> dict:
        return {
            "model": self.model, "task": self.task, "classifier": self.classifier, "prompts": self.prompts,
            "samples": self.samples, "scored": self.scored, "correct": self.correct, "accuracy": self.accuracy,
            "unlabelled": self.unlabelled, "unlabelled_reasons": dict(self.unlabelled_reasons.most_common()),
            "judge": self.judge, "truncated": self.truncated, "empty": self.empty,
            "request_errors": self.request_errors, "with_problem": self.with_problem,
            "behaviors": {b: {"rate": r.rate, "mean_count": r.mean_count, "present": r.present, "labelled": r.labelled,
                              "accuracy_with": r.accuracy_with, "accuracy_without": r.accuracy_without}
                          for b, r in self.behaviors.items()},
        }


def countdown_prompts(n: int, seed: int, n_numbers: int = 4) -> list[dict]:
    """n distinct, solvable Countdown problems as RL rows (the TinyZero user prompt, which asks for <answer>)."""

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
    with atomic_path(path) as partial:
        pq.write_table(pa.Table.from_pylist(rows), partial)
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
    judge: ServerOptions | None = None,
) -> PolicyAuditResult:
    """Samples `options.k` answers per prompt (n prompts), classifies and scores every answer. `judge`: the server
    of the model that labels them when `classifier` is llm_v1 or cascade_v1 (curate.cli.groups.judge_server)."""
    if (task is None) == (dataset is None):
        raise PolicyAuditError("give either a task or a dataset")
    if n < 1:
        raise PolicyAuditError("--n must be at least 1")
    output = Path(output)
    try:
        resolved, _ = resolve_name(classifier)
        in_line = resolved.startswith(IN_LINE)
        labeller = None if in_line else get_classifier(classifier)
    except (KeyError, ValueError) as error:
        raise PolicyAuditError(str(error)) from None
    if in_line and judge is None:
        raise PolicyAuditError(f"--classifier {classifier} labels the responses with an LLM: name its model with "
                               "--judge-model (it runs on the policy's server settings unless --judge-backend / "
                               "--judge-endpoint-url say otherwise)")
    if judge is not None and not in_line:
        raise PolicyAuditError(f"--judge-model labels the responses with --classifier llm_v1 or cascade_v1; "
                               f"{classifier} labels them itself")
    if task is not None:
        prompts = write_task_prompts(task, n, seed, output)
        # The task's own prompt already asks for the answer format its reward reads.
        options = dataclasses.replace(options, instruction="" if options.instruction is None else options.instruction)
        limit = -1
    else:
        prompts, limit = Path(dataset), n
    sampling = run_sampling(prompts, output, options, limit=limit, progress=progress)
    statements = problem_statements(prompts)
    if in_line:
        name, labels = label_in_line(sampling.rates_dir, output, judge, resolved, statements, progress)
    else:
        name, labels = labeller.name, None
    result = PolicyAuditResult(output=output, model=options.model, task=task or str(dataset), classifier=name,
                               judge=judge.model if in_line else None,
                               behaviors={b: BehaviorRow(b) for b in BEHAVIOR_NAMES}, sampling=sampling)
    samples_path = output / "samples.parquet"
    with atomic_path(samples_path) as partial_path, pq.ParquetWriter(partial_path, SAMPLES_SCHEMA) as writer:
        for batch in batched(_samples(sampling.rates_dir), batch_size):
            result.with_problem += sum(row["id"] in statements and worth_labelling(row) for row in batch)
            rows = (label_rows(batch, labeller, statements) if labels is None
                    else _labelled_by_id(batch, labels, name))
            for row in rows:
                count_row(result, row)
            writer.write_table(pa.Table.from_pylist(rows, schema=SAMPLES_SCHEMA))
    _write_report(result, options)
    return result


def problem_statements(prompts: Path) -> dict[str, str]:
    """Prompt id -> its Countdown problem statement, for every row of the prompts dataset (the builders' layout: `id`,
    `ground_truth`) whose ground truth is a Countdown problem.

    The labeled sets the classifiers are measured on show each trace below its problem statement, and the readers
    read it so; the classifiers read a trace better with it (cues_ngram_v1, on blind rounds 14 and 17: macro F1 0.83
    and 0.81 with it, 0.80 on the trace alone). So a response is classified below its problem, as it was measured."""
    paths = [prompts] if prompts.is_file() else sorted(prompts.rglob("*.parquet"))
    statements = {}
    for path in paths:
        if not {"id", "ground_truth"} <= set(pq.read_schema(path).names):
            continue
        for row in pq.read_table(path, columns=["id", "ground_truth"]).to_pylist():
            statement = problem_statement(row["ground_truth"])
            if statement is not None and row["id"] is not None:
                statements[str(row["id"])] = statement
    return statements


def worth_labelling(row: dict) -> bool:
    """A response with text whose request did not fail."""
    return row["request_error"] is None and bool((row["text"] or "").strip())


def text_to_label(row: dict, statements: dict[str, str]) -> str:
    """The response below its problem statement where the prompt has one, else the response alone."""
    return below_problem(row["text"], statements.get(row["id"]))


def below_problem(text: str, statement: str | None) -> str:
    """What a classifier reads: a Countdown response below its problem statement, as the labeled sets show it."""
    return f"{statement}\n\n{text}" if statement else text


def _samples(rates_dir: Path):
    for path in sorted(rates_dir.glob("rates_*.parquet")):
        for batch in pq.ParquetFile(path).iter_batches(batch_size=256):
            for prompt in batch.to_pylist():
                for index, sample in enumerate(prompt["samples"]):
                    yield {"key": prompt["key"], "id": prompt["id"], "sample": index, "data_source": prompt["data_source"],
                           "text": sample["text"], "reward": sample["reward"], "finish_reason": sample["finish_reason"],
                           "request_error": sample["error"] if sample["finish_reason"] == "error" else None}


def sample_id(row: dict) -> str:
    """One response: its prompt's key and its index among the prompt's k samples."""
    return f"{row['key']}#{row['sample']}"


def label_in_line(rates_dir: Path, output: Path, judge: ServerOptions, classifier: str,
                  statements: dict[str, str], progress: bool = True) -> tuple[str, dict[str, dict]]:
    """(classifier name, response id -> attribute row) for every response worth labelling (not empty, no request
    error), through `curate tag-llm`'s job on the judge's server: OUT/responses/responses.jsonl is its corpus (each
    response below its problem statement where it has one; written only when it changed, so that a rerun resumes the
    tagging) and OUT/tags/<classifier>/ its shards."""
    corpus = output / "responses" / "responses.jsonl"
    text = "".join(json.dumps({"id": sample_id(row), "text": text_to_label(row, statements)}, ensure_ascii=False) + "\n"
                   for row in _samples(rates_dir) if worth_labelling(row))
    options = LLMTagOptions(**{f.name: getattr(judge, f.name) for f in dataclasses.fields(ServerOptions)},
                            gate="cues" if classifier.startswith("cascade_") else None,
                            llm_version=classifier if classifier.startswith("llm_") else "llm_v1")
    if not text:
        return options.classifier().name, {}
    if not corpus.is_file() or corpus.read_text(encoding="utf-8") != text:
        corpus.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(corpus, text)
    tagged = run_llm_tagging(InputSpec(path=str(corpus)), output / "tags", options, progress=progress)
    rows = {}
    for path in sorted(tagged.tags_dir.glob("attributes_*.parquet")):
        for row in pq.read_table(path, columns=["id", *BEHAVIOR_NAMES, "error"]).to_pylist():
            rows[row["id"]] = row
    return tagged.classifier, rows


def _labelled_by_id(batch: list[dict], labels: dict[str, dict], name: str) -> list[dict]:
    rows = []
    for row in batch:
        error = row.pop("request_error")
        empty = not (row["text"] or "").strip()
        label = labels.get(sample_id(row))
        if error or empty or label is None:
            reason = error or ("empty output" if empty else "no label: the judge's job wrote no row for it")
            rows.append({**row, **{b: None for b in BEHAVIOR_NAMES}, "classifier": name, "classifier_error": reason})
        else:
            rows.append({**row, **{b: label[b] for b in BEHAVIOR_NAMES}, "classifier": name,
                         "classifier_error": label["error"]})
    return rows


def label_rows(batch: list[dict], labeller, statements: dict[str, str] | None = None) -> list[dict]:
    """Each response's counts (null for an empty response or a failed request), classified below its prompt's
    problem statement where `statements` has one (`problem_statements`)."""
    labels = labeller.classify([text_to_label(row, statements or {}) if (row["text"] or "").strip() else ""
                                for row in batch])
    rows = []
    for row, label in zip(batch, labels, strict=True):
        error = row.pop("request_error")
        empty = not (row["text"] or "").strip()
        rows.append({**row, **{b: (None if empty or error else label.counts.get(b)) for b in BEHAVIOR_NAMES},
                     "classifier": labeller.name,
                     "classifier_error": error or ("empty output" if empty else label.error)})
    return rows


def count_row(result: PolicyAuditResult, row: dict) -> None:
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
        result.unlabelled_reasons[unlabelled_reason(row)] += 1
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


def unlabelled_reason(row: dict) -> str:
    """Why a sample has no (or partial) behavior labels, as a short kind: the text before the first ':' of the
    classifier's error ("parse" for an answer of the judge that did not parse)."""
    if row["finish_reason"] == "error":
        return "policy request error"
    if not (row["text"] or "").strip():
        return "empty output"
    error = row.get("classifier_error") or "no label"
    return error.split(":", 1)[0].strip() or "no label"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f} %"


def _mean(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _write_report(result: PolicyAuditResult, options: SamplingOptions) -> None:
    output = result.output
    record = {**result.as_dict(), "sampling": options.fingerprint(), "backend": options.backend}
    reasons = ", ".join(f"{why}: {count:,}" for why, count in result.unlabelled_reasons.most_common()) or "none"
    labelled_by = f"`{result.classifier}`" + (f" on {result.judge}" if result.judge else "")
    write_text_atomic(output / "report.json", json.dumps(record, indent=2))
    rows = "\n".join(f"| {b} | {_pct(r.rate)} | {r.present:,} / {r.labelled:,} | {_mean(r.mean_count)} | "
                     f"{_pct(r.accuracy_with)} | {_pct(r.accuracy_without)} |" for b, r in result.behaviors.items())
    card = f"""# Behavior audit of {result.model} on {result.task}

{result.samples:,} samples on {result.prompts:,} prompts ({options.k} per prompt, temperature {options.temperature},
at most {options.max_tokens} tokens, backend {options.backend}, prompt format {options.prompt_format}); behaviors labelled by {labelled_by}, answers
scored by the reward each prompt's `data_source` names.

| | |
|---|---|
| accuracy (correct / scored samples) | {_pct(result.accuracy)} ({result.correct:,} / {result.scored:,}) |
| cut at the token limit | {result.truncated:,} |
| empty outputs | {result.empty:,} |
| request errors | {result.request_errors:,} |
| samples without behavior labels | {result.unlabelled:,} ({reasons}) |
| samples labelled below their Countdown problem statement, as the labeled sets were read | {result.with_problem:,} |

| behavior | share of outputs showing it | outputs | mean count per output | accuracy with it | accuracy without it |
|---|---|---|---|---|---|
{rows}

A policy whose outputs rarely show verification or backtracking gains little from RL; prime it first
(`curate priming`, or continued pretraining on a behavior-enriched corpus). Every sample is in `samples.parquet`.
"""
    write_text_atomic(output / "README.md", card)





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


def sweep_series(audits: list[PolicyAuditResult]) -> dict[str, dict[str, list]]:
    """Per behavior, one value per step of each figure sweep.json keeps."""
    return {b: {figure: [getattr(a.behaviors[b], figure) for a in audits] for figure in SWEEP_FIGURES}
            for b in BEHAVIOR_NAMES}


SWEEP_FIGURES = ("rate", "mean_count", "accuracy_with", "accuracy_without")


def write_sweep(output: Path, steps: list[int], audits: list[PolicyAuditResult], source: dict, title: str,
                intro: str, step_names: list[str]) -> None:
    """OUT/sweep.json (`steps`, `accuracy`, `behaviors.<b>.<figure>` per step, every step's audit), the figure and
    OUT/README.md: one layout for a checkpoint sweep and a run's logged rollouts."""
    series = sweep_series(audits)
    accuracy = [a.accuracy for a in audits]
    plot_behaviors_over_steps(steps, series, accuracy, output / "behaviors_over_steps.png",
                              title=f"{title} ({audits[0].classifier}, {audits[0].task})")
    record = {**source, "steps": steps, "accuracy": accuracy, "behaviors": series,
              "audits": [a.as_dict() for a in audits]}
    write_text_atomic(output / "sweep.json", json.dumps(record, indent=2))
    header = "| step | source | accuracy | " + " | ".join(f"{b} (share / mean)" for b in BEHAVIOR_NAMES) + " |"
    lines = [header, "|---|---|---|" + "---|" * len(BEHAVIOR_NAMES)]
    for step, name, a in zip(steps, step_names, audits):
        lines.append(f"| {step} | `{name}` | {_pct(a.accuracy)} | " + " | ".join(
            f"{_pct(a.behaviors[b].rate)} / {_mean(a.behaviors[b].mean_count)}" for b in BEHAVIOR_NAMES) + " |")
    table = "\n".join(lines)
    write_text_atomic(output / "README.md", f"""# Behaviors over training: {title}

{intro}

![behaviors and accuracy over training steps](behaviors_over_steps.png)

{table}
""")


def run_checkpoint_sweep(pattern: str, output: str | Path, options: SamplingOptions, **audit) -> SweepResult:
    """One audit per checkpoint directory (same prompts, same sampling), in step order, then the figure of behaviors
    and accuracy over training steps. `audit`: run_policy_audit's task, dataset, n, seed, classifier."""
    output = Path(output)
    found = checkpoint_dirs(pattern)
    audits = [run_policy_audit(output / path.name, dataclasses.replace(options, model=str(path)), **audit)
              for _, path in found]
    steps = [s for s, _ in found]
    intro = (f"{len(audits)} checkpoints, each sampled on the same prompts ({options.k} per prompt, temperature "
             f"{options.temperature},\nprompt format {options.prompt_format}); behaviors labelled by "
             f"`{audits[0].classifier}`. Each checkpoint's own report is in\nits folder.")
    write_sweep(output, steps, audits, {"pattern": pattern, "checkpoints": [str(p) for _, p in found]}, pattern,
                intro, [path.name for _, path in found])
    return SweepResult(output=output, steps=steps, audits=audits)


ROLLOUT_SAMPLES_SCHEMA = pa.schema([
    ("step", pa.int64()), ("sample", pa.int32()), ("prompt", pa.string()), ("text", pa.string()),
    ("reward", pa.float64()), *[(b, pa.int32()) for b in BEHAVIOR_NAMES], ("classifier", pa.string()),
    ("classifier_error", pa.string()),
])


def label_rollouts(rollouts: list[Rollout], labeller, batch_size: int = 64) -> list[dict]:
    """One samples row per rollout: its counts (null for an empty output), each output read below its Countdown
    problem statement where its ground truth is a Countdown problem, else alone. `sample` numbers the outputs of one
    prompt within the step (0 for the first), so that the audit counts prompts as it does when it samples."""
    seen: Counter = Counter()
    rows = []
    for start in range(0, len(rollouts), batch_size):
        batch = rollouts[start:start + batch_size]
        texts = [below_problem(r.output, problem_statement(r.ground_truth)) if r.output.strip() else "" for r in batch]
        for rollout, label in zip(batch, labeller.classify(texts), strict=True):
            empty = not rollout.output.strip()
            rows.append({"step": rollout.step, "sample": seen[rollout.prompt], "prompt": rollout.prompt,
                         "text": rollout.output, "reward": rollout.score,
                         **{b: None if empty else label.counts.get(b) for b in BEHAVIOR_NAMES},
                         "classifier": labeller.name, "classifier_error": "empty output" if empty else label.error})
            seen[rollout.prompt] += 1
    return rows


def run_rollout_sweep(directory: str | Path, output: str | Path, classifier: str = "cues",
                      score_column: str | None = None, batch_size: int = 64) -> SweepResult:
    """The checkpoint sweep's figures from the rollouts a run already logged (verl's rollout_data_dir, TRL's logged
    completions; curate.handoff.rollouts), without sampling again: per step, each behavior's share and mean count
    over the outputs, accuracy (the share whose score is the full mark, 1.0), and accuracy with and without each
    behavior. OUT/samples.parquet keeps every output's counts."""
    output = Path(output)
    files = find_rollouts(directory)
    try:
        if needs_model_server(classifier):
            raise PolicyAuditError(f"--rollouts labels with a batch classifier (cues, distilled:DIR, a versioned "
                                   f"name); {classifier} needs a model server")
        labeller = get_classifier(classifier)
    except (KeyError, ValueError) as error:
        raise PolicyAuditError(str(error)) from None
    audits = []
    samples = output / "samples.parquet"
    with atomic_path(samples) as partial, pq.ParquetWriter(partial, ROLLOUT_SAMPLES_SCHEMA) as writer:
        for step, path in files.steps:
            rows = label_rollouts(read_step(files, path, score_column), labeller, batch_size)
            audit = PolicyAuditResult(output=output, model=str(directory), task=f"{files.layout} rollouts",
                                      classifier=labeller.name, behaviors={b: BehaviorRow(b) for b in BEHAVIOR_NAMES})
            for row in rows:
                count_row(audit, {**row, "finish_reason": None})
            audits.append(audit)
            writer.write_table(pa.Table.from_pylist(rows, schema=ROLLOUT_SAMPLES_SCHEMA))
    steps = [step for step, _ in files.steps]
    intro = (f"{len(steps)} training steps of a {files.layout} run, read from the rollouts it logged in "
             f"`{directory}` (no sampling);\nbehaviors labelled by `{labeller.name}`, accuracy is the share of "
             "outputs whose score is the full mark (1.0). Every\noutput's counts are in `samples.parquet`.")
    write_sweep(output, steps, audits, {"rollouts": str(directory), "layout": files.layout,
                                        "files": [str(p) for _, p in files.steps]},
                str(directory), intro, [p.name for _, p in files.steps])
    return SweepResult(output=output, steps=steps, audits=audits)


def audit_policy(job: PolicyAuditJob, progress: bool = True) -> PolicyAuditResult | SweepResult:
    """Runs `curate audit-policy`: one audit of the policy `job.model`, or with `job.checkpoints` a sweep over the
    checkpoints of a training run. The prompts come from `job.task`, else `job.dataset`, else Countdown."""
    if sum(x is not None for x in (job.model, job.checkpoints, job.rollouts)) != 1:
        raise PolicyAuditError("give the policy as --model M, a training run's checkpoints as --checkpoints "
                               "'ckpts/step_*', or the rollouts a run logged as --rollouts DIR (one of the three)")
    if job.rollouts is not None:
        return run_rollout_sweep(job.rollouts, job.output, job.classifier, job.score_column)
    audit = {"task": job.task or (None if job.dataset else "countdown"), "dataset": job.dataset, "n": job.n,
             "seed": job.seed, "classifier": job.classifier, "judge": job.judge, "progress": progress}
    if job.checkpoints is not None:
        return run_checkpoint_sweep(job.checkpoints, job.output, job.server, **audit)
    return run_policy_audit(job.output, job.server, **audit)

"""Watch RL amplify the behaviors: behavior metrics from the completions a GRPO run already generates and scores.

TRL 1.16 (`GRPOTrainer`): wrap the reward, and every generation batch logs, beside TRL's own `rewards/<name>/mean`,

    behaviors/<behavior>/rate              share of the batch's completions showing the behavior
    behaviors/<behavior>/mean_count        mean count per completion
    behaviors/<behavior>/accuracy_with     share scoring the full mark (1.0) among the completions showing it
    behaviors/<behavior>/accuracy_without  ... among those not showing it
    behaviors/<behavior>/length_with       mean completion length in tokens, showing it / not showing it
    behaviors/<behavior>/length_without
    behaviors/accuracy                     share of the batch scoring the full mark
    behaviors/step                         the training step whose completions these figures describe

        from curate.handoff.behavior_monitor import BehaviorMonitor
        monitor = BehaviorMonitor("cues")
        trainer = GRPOTrainer(..., reward_funcs=[monitor.wrap(trl_reward())])

It goes through TRL's own `log_metric` (the trainer averages each metric over the logging steps, and over processes:
on several processes a figure is the mean of the per-process figures). The wrapped reward returns the reward's values
unchanged and keeps its name, so `rewards/<name>/mean` is the same as without the monitor. The row's ground truth is
logged as the completions table's `ground_truth` column (with `log_completions=True`), so that
`curate audit-policy --rollouts OUTPUT_DIR` can later read each Countdown completion below its problem.

Classifying a batch costs far more than scoring it (bench/monitor_cost.py), so by default the monitor classifies in
a worker process while the trainer goes on: the figures of generation batch k are logged with batch k+1 (and
`behaviors/step` says which step they describe); the last batch of a run is classified but has no later batch to
be logged with. `BehaviorMonitor(asynchronous=False)` classifies in the reward call and logs each batch's figures
with it, at the reward step's cost.

verl 0.9.1: `compute_score_with_behaviors` is the registry reward that also returns each completion's counts, which
verl carries as reward_extra_info: columns `behavior_<behavior>` (count) and `behavior_<behavior>_shown` (0 / 1) of
every `{step}.jsonl` under trainer.rollout_data_dir, and `val-aux/<data_source>/behavior_<behavior>/mean@N` in its
validation metrics. verl 0.9.1 does not reduce reward extras into its training-step metrics; the training curves come
from `curate audit-policy --rollouts ROLLOUT_DATA_DIR`.
"""

from __future__ import annotations

import json
import multiprocessing
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from functools import lru_cache

from curate.behaviors import BEHAVIOR_NAMES
from curate.classifiers import get_classifier, needs_model_server
from curate.errors import CurateError
from curate.handoff.policy_audit import BehaviorRow, PolicyAuditResult, below_problem, count_row
from curate.handoff.rollouts import GROUND_TRUTH, message_text
from curate.puzzles.countdown import problem_statement
from curate.rewards import compute_score

PREFIX = "behaviors"
BATCH = 64


class BehaviorMonitorError(CurateError, ValueError):
    pass


def batch_classifier(classifier: str):
    """A classifier that labels in process (cues, distilled:DIR, a versioned name): the monitor runs beside a
    trainer, with no model server of its own."""
    try:
        served = needs_model_server(classifier)
        labeller = None if served else get_classifier(classifier)
    except (KeyError, ValueError) as error:
        raise BehaviorMonitorError(str(error)) from None
    if served:
        raise BehaviorMonitorError(f"the behavior monitor labels in process; {classifier} needs a model server "
                                   "(use cues, distilled:DIR or a versioned cues name)")
    return labeller


def classify_outputs(labeller, outputs: Sequence[str], ground_truths: Sequence[object]) -> list[dict | None]:
    """Each output's count per behavior, read below its Countdown problem where its ground truth is one (as the
    classifiers were measured); None for an empty output, which shows nothing and is left out of every share."""
    counts: list[dict | None] = []
    for start in range(0, len(outputs), BATCH):
        texts = outputs[start:start + BATCH]
        problems = [problem_statement(g) for g in ground_truths[start:start + BATCH]]
        labels = labeller.classify([below_problem(t, p) if t.strip() else "" for t, p in zip(texts, problems)])
        counts.extend(None if not text.strip() else {b: label.counts.get(b) for b in BEHAVIOR_NAMES}
                      for text, label in zip(texts, labels, strict=True))
    return counts


def batch_figures(counts: Sequence[dict | None], scores: Sequence[float | None],
                  lengths: Sequence[int] | None = None) -> dict[str, float]:
    """The metrics of one batch, counted as `curate audit-policy` counts its samples (share and mean count over the
    labelled outputs; accuracy over the scored ones, correct meaning the full mark). A figure with nothing to
    measure (no completion showing a behavior: no accuracy with it) is left out rather than logged as 0."""
    audit = PolicyAuditResult(output=None, model="", task="", classifier="",
                              behaviors={b: BehaviorRow(b) for b in BEHAVIOR_NAMES})
    for count, score in zip(counts, scores, strict=True):
        # count_row reads the text only to count empty outputs, which are the unlabelled ones here.
        labels = count or {b: None for b in BEHAVIOR_NAMES}
        count_row(audit, {"sample": 0, "finish_reason": None, "text": "" if count is None else "labelled",
                          "reward": score, **labels})
    figures = {f"{PREFIX}/accuracy": audit.accuracy}
    for b, row in audit.behaviors.items():
        figures |= {f"{PREFIX}/{b}/rate": row.rate, f"{PREFIX}/{b}/mean_count": row.mean_count,
                    f"{PREFIX}/{b}/accuracy_with": row.accuracy_with,
                    f"{PREFIX}/{b}/accuracy_without": row.accuracy_without}
        if lengths is not None:
            for side, shown in (("with", True), ("without", False)):
                picked = [n for c, n in zip(counts, lengths, strict=True)
                          if c is not None and c[b] is not None and (c[b] > 0) == shown]
                figures[f"{PREFIX}/{b}/length_{side}"] = sum(picked) / len(picked) if picked else None
    return {name: float(value) for name, value in figures.items() if value is not None}


def _ground_truths(n: int, solution: list | None, reward_model: list | None) -> list[object]:
    """Each row's ground truth as curate's TRL reward reads it: `solution`, else verl's reward_model.ground_truth."""
    if solution is not None:
        return list(solution)
    if reward_model is not None:
        return [cell.get("ground_truth") if isinstance(cell, dict) else None for cell in reward_model]
    return [None] * n


def measure_batch(labeller, step: int | None, outputs: list[str], ground_truths: list[object],
                  scores: list[float | None], lengths: list[int] | None) -> dict[str, float]:
    """One generation batch's figures, with the step they describe (`behaviors/step`)."""
    figures = batch_figures(classify_outputs(labeller, outputs, ground_truths), scores, lengths)
    if step is not None:
        figures[f"{PREFIX}/step"] = float(step)
    return figures


def _measure_in_worker(classifier: str, *job) -> dict[str, float]:
    return measure_batch(_cached_classifier(classifier), *job)


class BehaviorMonitor:
    """Behavior metrics for a TRL GRPOTrainer run; see the module's docstring. `classifier`: any batch classifier by
    name (`cues`, CPU, no server).

    Asynchronous (the default), the batches are classified one at a time, in the order they were generated, by one
    worker process of its own: a thread would hold the trainer's GIL for the seconds a batch takes (the classifier
    is Python, regular expressions and Cython that keep it), slowing the trainer's own Python even where cores are
    free. It takes a core all the same: on a host with none to spare the trainer's Python slows about 2x beside it,
    as beside a thread (bench/monitor_cost.py). The process is spawned, so that it inherits no CUDA state or locks
    of the trainer's threads; as for PyTorch's DataLoader workers, the training script's entry point must then sit
    under `if __name__ == "__main__":`."""

    def __init__(self, classifier: str = "cues", asynchronous: bool = True):
        self.labeller = batch_classifier(classifier)  # loaded here too: a bad name fails now, not one step later
        self.classifier = classifier
        self.asynchronous = asynchronous
        self._executor = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) \
            if asynchronous else None
        self._pending: Future | None = None

    def wrap(self, reward_func: Callable[..., list]) -> Callable[..., list]:
        """`reward_func` (a TRL reward function), returning its values unchanged, under its own name, and logging
        the batch's behavior metrics through the trainer's `log_metric`."""

        def monitored(prompts, completions, **kwargs):
            # Every keyword TRL passes (dataset columns, completion_ids, log_metric, ...) reaches the reward as is.
            scores = reward_func(prompts=prompts, completions=completions, **kwargs)
            log_metric, log_extra = kwargs.get("log_metric"), kwargs.get("log_extra")
            if log_metric is None:
                raise BehaviorMonitorError("the behavior monitor logs through the log_metric keyword GRPOTrainer "
                                           "passes to reward functions (TRL 1.16); this trainer passed none")
            truths = _ground_truths(len(completions), kwargs.get("solution"), kwargs.get("reward_model"))
            if log_extra is not None and any(t is not None for t in truths):
                log_extra(GROUND_TRUTH, [t if t is None or isinstance(t, str) else json.dumps(t) for t in truths])
            state, completion_ids = kwargs.get("trainer_state"), kwargs.get("completion_ids")
            # The step these completions train (TRL's numbering in its logs and completions table: one past the
            # global step at generation time).
            job = (None if state is None else state.global_step + 1, [message_text(c) for c in completions], truths,
                   [None if s is None else float(s) for s in scores],
                   None if completion_ids is None else [len(ids) for ids in completion_ids])
            for name, value in self._figures_to_log(job).items():
                log_metric(name, value)
            return scores

        monitored.__name__ = getattr(reward_func, "__name__", "reward")
        return monitored

    def _figures_to_log(self, job: tuple) -> dict[str, float]:
        if not self.asynchronous:
            return measure_batch(self.labeller, *job)
        # GRPOTrainer calls a synchronous reward from its main thread, one batch at a time: no lock needed.
        figures = {} if self._pending is None else self._pending.result()
        self._pending = self._executor.submit(_measure_in_worker, self.classifier, *job)
        return figures

    def close(self) -> None:
        """Waits for the batch still being classified and stops the worker process."""
        if self._executor is not None:
            self._executor.shutdown(wait=True)


@lru_cache(maxsize=4)
def _cached_classifier(classifier: str):
    return batch_classifier(classifier)


def compute_score_with_behaviors(data_source, solution_str, ground_truth, extra_info=None, classifier: str = "cues",
                                 **_) -> dict:
    """verl's custom reward (reward.custom_reward_function.name=compute_score_with_behaviors): the registry reward's
    score, and each behavior's count (`behavior_<b>`, NaN for an empty response, which verl needs as a number) and
    presence (`behavior_<b>_shown`), which verl 0.9.1 keeps as reward_extra_info. `classifier` comes from
    reward.custom_reward_function.reward_kwargs.classifier (default cues)."""
    score = compute_score(data_source, solution_str, ground_truth, extra_info)
    counts = classify_outputs(_cached_classifier(classifier), [solution_str], [ground_truth])[0]
    extras = {}
    for b in BEHAVIOR_NAMES:
        count = None if counts is None else counts[b]
        extras[f"behavior_{b}"] = float("nan") if count is None else float(count)
        extras[f"behavior_{b}_shown"] = float("nan") if count is None else float(count > 0)
    return {"score": score, **extras}

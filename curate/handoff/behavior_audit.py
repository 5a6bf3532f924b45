"""Does the reward punish good reasoning? A verifier audit stratified by behavior and by response length.

Every response of a labeled pair set is tagged with a registered classifier; for each behavior the pairs split
into *present* (count ≥ 1), *absent* (count 0) and *unlabelled* (null: left out of that behavior's split, and
counted). Per stratum the reward's confusion counts, precision and recall come with percentile bootstrap 95 %
intervals, and the present − absent difference with its own interval (from the same resamples, so it is paired);
"excludes_zero" says whether that interval leaves 0 out. The same is done by response-length quartile (Q4 − Q1).

The bootstrap resamples *groups* (all responses to one problem: GSM8K has four per problem), not pairs, so
responses that share a problem are not counted as independent evidence; with one response per problem the
two are the same. It is seeded: the same pairs, verdicts and seed give the same intervals.

A verdict of None (the reward could not score) counts as a rejection, as a trainer treats it. Each stratum also
counts its correct responses that mark no final answer in their source's format (`correct_without_marked_answer`):
misses a reward that reads only marked answers cannot avoid, told apart from misjudged answers.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from curate.behaviors import BEHAVIOR_NAMES
from curate.classifiers import get_classifier
from curate.errors import InputError, OptionError
from curate.files import atomic_path, write_text_atomic
from curate.handoff.verifier_audit import Pair, run_audit
from curate.rewards import get_reward
from curate.rewards.extract import ANSWER_FORMATS, BARE, locate_answer

CELLS = ("tp", "fp", "fn", "tn")
STRATA = ("present", "absent")
QUARTILES = ("Q1", "Q2", "Q3", "Q4")
DEFAULT_RESAMPLES = 2000


@dataclass
class BehaviorTags:
    classifier: str
    counts: list[dict[str, int | None]]  # one per pair, in pair order
    errors: int = 0


def tag_pairs(pairs: Sequence[Pair], classifier: str, batch_size: int = 32, progress: bool = True) -> BehaviorTags:
    """Each pair's response labeled by a registered classifier (`cues`: its newest version)."""
    from rich.progress import Progress


    labeller = get_classifier(classifier)
    counts, errors = [], 0
    with Progress(disable=not progress, transient=True) as bar:
        task = bar.add_task(f"tag {labeller.name}", total=len(pairs))
        for start in range(0, len(pairs), batch_size):
            texts = [p.candidate for p in pairs[start:start + batch_size]]
            for label in labeller.classify(texts):
                errors += label.error is not None
                counts.append({b: label.counts.get(b) for b in BEHAVIOR_NAMES})
            bar.advance(task, len(texts))
    return BehaviorTags(labeller.name, counts, errors)


def _cell(verdict: bool | None, label: bool) -> int:
    if label:
        return 0 if verdict else 2
    return 1 if verdict else 3


class Bootstrap:
    """Group-resampling weights shared by every stratification of one pair set (seeded)."""

    def __init__(self, groups: Sequence[str], resamples: int = DEFAULT_RESAMPLES, seed: int = 0):
        if resamples < 100:
            raise OptionError(f"--bootstrap must be at least 100 resamples for a 95 % interval, got {resamples}")
        names = sorted(set(groups))
        index = {g: i for i, g in enumerate(names)}
        self.group_of = np.array([index[g] for g in groups], dtype=np.int64)
        self.groups, self.resamples, self.seed = len(names), resamples, seed

    def counts(self, verdicts: Sequence[bool | None], labels: Sequence[bool], strata: Sequence[int | None],
               n_strata: int) -> tuple[np.ndarray, np.ndarray]:
        """(point counts [S, 4], resampled counts [B, S, 4]) of tp, fp, fn, tn per stratum."""
        per_group = np.zeros((self.groups, n_strata, 4))
        for g, v, label, s in zip(self.group_of, verdicts, labels, strata):
            if s is not None:
                per_group[g, s, _cell(v, label)] += 1
        rng = np.random.default_rng(self.seed)
        flat = per_group.reshape(self.groups, -1)
        chunks, done = [], 0
        while done < self.resamples:
            size = min(256, self.resamples - done)
            weights = rng.multinomial(self.groups, np.full(self.groups, 1.0 / self.groups), size=size)
            chunks.append(weights @ flat)
            done += size
        return per_group.sum(axis=0), np.concatenate(chunks).reshape(self.resamples, n_strata, 4)


def _ratio(numerator, denominator):
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(denominator > 0, numerator / np.where(denominator > 0, denominator, 1), np.nan)


def _rates(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    tp, fp, fn = counts[..., 0], counts[..., 1], counts[..., 2]
    return _ratio(tp, tp + fp), _ratio(tp, tp + fn)


def _interval(samples: np.ndarray) -> tuple[float | None, float | None]:
    samples = samples[np.isfinite(samples)]
    if not samples.size:
        return None, None
    low, high = np.percentile(samples, [2.5, 97.5])
    return float(low), float(high)


def _number(value) -> float | None:
    return None if value is None or not np.isfinite(value) else float(value)


def _stratum(point: np.ndarray, boot: np.ndarray, undecided: int, unmarked: int | None) -> dict:
    precision, recall = _rates(point)
    false_accept_rate = _ratio(point[1], point[1] + point[3])
    boot_precision, boot_recall = _rates(boot)
    ci_low, ci_high = _interval(boot_recall)
    p_low, p_high = _interval(boot_precision)
    return {"n": int(point.sum()), **{c: int(point[i]) for i, c in enumerate(CELLS)},
            "precision": _number(precision), "recall": _number(recall), "ci_low": ci_low, "ci_high": ci_high,
            "false_accept_rate": _number(false_accept_rate),
            "precision_ci_low": p_low, "precision_ci_high": p_high, "undecided": undecided,
            **({} if unmarked is None else {"correct_without_marked_answer": unmarked})}


def _difference(point: np.ndarray, boot: np.ndarray, a: int, b: int) -> dict:
    """Stratum a minus stratum b, for recall and precision."""
    out = {}
    for name, which in (("precision", 0), ("recall", 1)):
        value = _rates(point)[which]
        samples = _rates(boot)[which]
        delta = samples[:, a] - samples[:, b]
        low, high = _interval(delta)
        diff = _number(value[a] - value[b]) if np.isfinite(value[a]) and np.isfinite(value[b]) else None
        out[name] = {"value": diff, "ci_low": low, "ci_high": high,
                     "excludes_zero": None if low is None else bool(low > 0 or high < 0)}
    return out


def stratified(verdicts: Sequence[bool | None], labels: Sequence[bool], strata: Sequence[int | None], n_strata: int,
               bootstrap: Bootstrap, marked: Sequence[bool] | None = None) -> tuple[list[dict], np.ndarray, np.ndarray]:
    """`marked`: whether each response marks a final answer in its source's format; the count of correct responses
    that mark none is reported per stratum (a reward that needs a marker must miss them)."""
    point, boot = bootstrap.counts(verdicts, labels, strata, n_strata)
    undecided = [sum(1 for v, s in zip(verdicts, strata) if s == k and v is None) for k in range(n_strata)]
    unmarked = [None if marked is None else sum(1 for m, y, s in zip(marked, labels, strata) if s == k and y and not m)
                for k in range(n_strata)]
    return [_stratum(point[k], boot[:, k], undecided[k], unmarked[k]) for k in range(n_strata)], point, boot


def length_edges(lengths: Sequence[int]) -> list[float]:
    """The three quartile boundaries of response length (characters)."""
    return [float(x) for x in np.quantile(np.asarray(lengths, dtype=float), [0.25, 0.5, 0.75])]


def length_quartile(length: int, edges: Sequence[float]) -> int:
    return int(np.searchsorted(np.asarray(edges), length, side="left"))


def reward_report(pairs: Sequence[Pair], verdicts: Sequence[bool | None], tags: BehaviorTags | None,
                  bootstrap: Bootstrap) -> dict:
    """Every figure of one reward on one pair set: overall, by behavior (if tagged), by length quartile and by the
    format the response gives its answer in (as the pair's extraction reads it: a box, several boxes, a closing
    statement, GSM8K's line ...), so that a user sees where a reward is blind before training with it."""
    labels = [p.equivalent for p in pairs]
    located = [locate_answer(p.candidate, p.extraction or BARE) for p in pairs]
    marked = [answer is not None for _, answer in located]
    overall, _, _ = stratified(verdicts, labels, [0] * len(pairs), 1, bootstrap, marked)
    report: dict = {"overall": overall[0]}
    if tags is not None:
        by_behavior = {}
        for behavior in BEHAVIOR_NAMES:
            strata = [None if c[behavior] is None else (0 if c[behavior] > 0 else 1) for c in tags.counts]
            rows, point, boot = stratified(verdicts, labels, strata, 2, bootstrap, marked)
            by_behavior[behavior] = {"present": rows[0], "absent": rows[1],
                                     "unlabelled": sum(s is None for s in strata),
                                     "difference": _difference(point, boot, 0, 1)}
        report["by_behavior"] = by_behavior
    lengths = [len(p.candidate) for p in pairs]
    edges = length_edges(lengths)
    strata = [length_quartile(n, edges) for n in lengths]
    rows, point, boot = stratified(verdicts, labels, strata, 4, bootstrap, marked)
    by_length = {"edges_chars": edges}
    for k, name in enumerate(QUARTILES):
        members = [n for n, s in zip(lengths, strata) if s == k]
        by_length[name] = {**rows[k], "chars_min": min(members, default=None), "chars_max": max(members, default=None)}
    by_length["difference_q4_q1"] = _difference(point, boot, 3, 0)
    report["by_length"] = by_length
    formats = [f for f in ANSWER_FORMATS if any(f == answer_format for answer_format, _ in located)]
    strata = [formats.index(answer_format) for answer_format, _ in located]
    rows, _, _ = stratified(verdicts, labels, strata, len(formats), bootstrap, marked)
    report["by_format"] = dict(zip(formats, rows))
    return report


def audit_report(pairs: Sequence[Pair], verdicts_by_reward: dict[str, Sequence[bool | None]],
                 tags: BehaviorTags | None, resamples: int = DEFAULT_RESAMPLES, seed: int = 0,
                 source: dict | None = None) -> dict:
    """The `--report` JSON: the first reward's figures at the top (`by_behavior`, `by_length`), every reward's under
    `rewards.<name>`, with the pair set, classifier and bootstrap settings."""
    groups = [p.group or p.id for p in pairs]
    bootstrap = Bootstrap(groups, resamples, seed)
    rewards = {name: reward_report(pairs, verdicts, tags, bootstrap) for name, verdicts in verdicts_by_reward.items()}
    first = next(iter(rewards))
    report = {
        "pairs": len(pairs), "positives": sum(p.equivalent for p in pairs),
        "negatives": sum(not p.equivalent for p in pairs), **(source or {}),
        "classifier": tags.classifier if tags else None,
        "bootstrap": {"resamples": resamples, "seed": seed, "unit": "group", "groups": bootstrap.groups,
                      "interval": "percentile 95 %"},
        "reward": first, **rewards[first], "rewards": rewards,
    }
    if tags is not None:
        report["behavior_prevalence"] = {
            b: _number(np.mean([c[b] > 0 for c in tags.counts if c[b] is not None])) if any(
                c[b] is not None for c in tags.counts) else None for b in BEHAVIOR_NAMES}
        report["classifier_errors"] = tags.errors
    return report


def write_report(report: dict, path: str | Path) -> Path:
    return write_text_atomic(path, json.dumps(report, indent=1, ensure_ascii=False))


def plot_report(report: dict, path: str | Path) -> Path:
    """Recall with and without each behavior (left) and by length quartile (right), one row per reward, with 95 %
    intervals; a star marks a difference whose interval excludes 0."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    rewards = report["rewards"]
    figure, axes = plt.subplots(len(rewards), 2, figsize=(12, 3.2 * len(rewards)), squeeze=False,
                                gridspec_kw={"width_ratios": [1.6, 1]})

    def bar(axis, x, stratum, color, label):
        value = stratum["recall"]
        if value is None:
            return
        low, high = stratum["ci_low"], stratum["ci_high"]
        error = [[value - low], [high - value]] if low is not None else None
        axis.bar(x, 100 * value, width=0.38, color=color, label=label,
                 yerr=None if error is None else np.array(error) * 100, capsize=3)
        axis.text(x, 2, f"n={stratum['tp'] + stratum['fn']}", ha="center", fontsize=7, color="white")

    for row, (name, figures) in enumerate(rewards.items()):
        left, right = axes[row]
        if "by_behavior" in figures:
            for i, behavior in enumerate(BEHAVIOR_NAMES):
                cell = figures["by_behavior"][behavior]
                bar(left, i - 0.2, cell["present"], "tab:blue", "with" if i == 0 else None)
                bar(left, i + 0.2, cell["absent"], "tab:gray", "without" if i == 0 else None)
                if cell["difference"]["recall"]["excludes_zero"]:
                    left.text(i, 103, "*", ha="center", fontsize=14)
            left.set_xticks(range(len(BEHAVIOR_NAMES)), [b.replace("_", "\n") for b in BEHAVIOR_NAMES], fontsize=8)
            left.legend(fontsize=8, loc="lower right")
        left.set_ylim(0, 110)
        left.set_ylabel("recall %")
        left.set_title(f"{name}: recall with / without ({report.get('classifier') or 'untagged'})", fontsize=9)
        for i, quartile in enumerate(QUARTILES):
            bar(right, i, figures["by_length"][quartile], "tab:orange", None)
        if figures["by_length"]["difference_q4_q1"]["recall"]["excludes_zero"]:
            right.text(3, 103, "*", ha="center", fontsize=14)
        right.set_xticks(range(4), QUARTILES)
        right.set_ylim(0, 110)
        right.set_title("recall by response-length quartile", fontsize=9)
    figure.suptitle(f"{report['pairs']:,} pairs, {report.get('label_source', '')}; 95 % bootstrap intervals, "
                    "* = difference excludes 0", fontsize=9)
    figure.tight_layout()
    with atomic_path(path) as partial:
        figure.savefig(partial, dpi=110, format="png")  # the .partial suffix would hide the format from matplotlib
    plt.close(figure)
    return path


@dataclass
class StratifiedAudit:
    report: dict
    results: dict  # reward data_source -> verifier_audit.AuditResult
    tags: BehaviorTags | None


def run_stratified_audit(pairs: Sequence[Pair], rewards: Sequence[str], classifier: str | None = None,
                         resamples: int = DEFAULT_RESAMPLES, seed: int = 0, threads: int | None = None,
                         source: dict | None = None, progress: bool = True) -> StratifiedAudit:
    """Scores every pair with each reward, tags the responses once, and computes every stratified figure."""
    if not pairs:
        raise InputError("no pairs to audit")
    names = list(dict.fromkeys(get_reward(r).data_source for r in rewards or ["math"]))  # unknown: a clear error now
    Bootstrap([p.group or p.id for p in pairs], resamples, seed)  # bad --bootstrap: fail before any work
    tags = tag_pairs(pairs, classifier, progress=progress) if classifier else None
    results = {name: run_audit(list(pairs), reward=name, threads=threads, progress=progress) for name in names}
    verdicts = {name: [v.verdict for v in result.verdicts] for name, result in results.items()}
    report = audit_report(pairs, verdicts, tags, resamples, seed, source)
    for name, result in results.items():
        report["rewards"][name]["seconds"] = round(result.seconds, 2)
    return StratifiedAudit(report, results, tags)

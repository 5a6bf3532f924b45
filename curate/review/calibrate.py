"""Precision, recall and F1 per behavior on the user's own corpus, from the labels a reader gave.

Labels drawn by `curate review` carry their stratum and its size: each stands for stratum_size / labeled_in_stratum
documents of the corpus (the inverse of its inclusion probability, counted over the documents actually read, so a
reader who stopped early is weighed by what was read). The weighted counts give the corpus-level figures, so that
oversampling a rare behavior does not raise its apparent precision; their 95 % intervals come from a stratified
bootstrap (each stratum resampled within itself). Labels without a design (written by hand, or a simple random sample)
give the plain figures, with Wilson intervals for precision and recall and a bootstrap one for F1.

The classifier's prediction is the attribute row's count (present when above 0); where the rows hold scores, the
precision/recall curve over the threshold is computed with the same weights.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import duckdb
import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from curate.behaviors import BEHAVIOR_NAMES
from curate.data_cards.cards import update_card_section
from curate.files import atomic_open, atomic_path
from curate.pipelines.query import attribute_shards, open_shards
from curate.review.labels import UserLabel, read_labels
from curate.review.sample import ReviewError

Z95 = 1.959963984540054  # the standard normal's 97.5th percentile
THRESHOLDS = np.round(np.arange(0.05, 0.951, 0.05), 2)


@dataclass
class Joined:
    """The labeled documents that the tags know, as arrays in one order."""

    ids: list[str]
    gold: np.ndarray  # (documents, behaviors) 0/1
    predicted: np.ndarray  # (documents, behaviors) 0/1
    scores: np.ndarray | None  # (documents, behaviors), or None when the rows carry no scores
    strata: np.ndarray | None  # stratum per document, or None without a design
    weights: np.ndarray  # documents of the corpus each labeled one stands for (1 without a design)
    classifier: str
    not_tagged: int  # labeled ids with an error row (no prediction to check)


def join(labels: list[UserLabel], tags: Path) -> Joined:
    files = attribute_shards(tags)
    if not files:
        raise ReviewError(f"no attribute shards under {tags}: give the tags folder the labeled documents came from")
    with duckdb.connect() as connection:
        columns = open_shards(connection, files)
        connection.execute("CREATE TEMP TABLE wanted (id VARCHAR)")
        connection.executemany("INSERT INTO wanted VALUES (?)", [(label.id,) for label in labels])
        scores = [f"scores.{b}" for b in BEHAVIOR_NAMES] if "scores" in columns else []
        classifier = "classifier" if "classifier" in columns else "NULL"
        rows = connection.sql(f"SELECT id, {classifier}, {', '.join(BEHAVIOR_NAMES + tuple(scores))} "
                              "FROM shards JOIN wanted USING (id)").fetchall()
    by_id = {row[0]: row for row in rows}
    unknown = [label.id for label in labels if label.id not in by_id]
    if unknown:
        raise ReviewError(f"{len(unknown)} labeled ids are not in {tags} (e.g. {unknown[0]!r}): give the --tags the "
                          "labeled documents were drawn from")
    designed = [label.stratum is not None for label in labels]
    if any(designed) and not all(designed):
        raise ReviewError("some labels carry a sampling stratum and some do not: calibrate the review's labels and "
                          "hand-written ones in separate files")
    kept = [label for label in labels if all(v is not None for v in by_id[label.id][2 : 2 + len(BEHAVIOR_NAMES)])]
    if not kept:
        raise ReviewError("none of the labeled documents has known counts in the tags (all rows carry an error)")
    n = len(BEHAVIOR_NAMES)
    gold = np.array([[label.labels[b] for b in BEHAVIOR_NAMES] for label in kept], dtype=int)
    predicted = np.array([[int(c > 0) for c in by_id[label.id][2 : 2 + n]] for label in kept], dtype=int)
    score_rows = [by_id[label.id][2 + n:] for label in kept]
    has_scores = bool(scores) and all(s is not None for row in score_rows for s in row)
    strata, weights = None, np.ones(len(kept))
    if all(designed):
        strata = np.array([label.stratum for label in kept])
        sizes = {label.stratum: label.stratum_size for label in kept}
        read = {s: int((strata == s).sum()) for s in sizes}
        weights = np.array([sizes[s] / read[s] for s in strata])
    names = sorted({by_id[label.id][1] for label in kept if by_id[label.id][1]})
    return Joined([label.id for label in kept], gold, predicted,
                  np.array(score_rows, dtype=float) if has_scores else None, strata, weights,
                  ", ".join(names) or tags.name, len(labels) - len(kept))


def ratio(numerator: float, denominator: float) -> float | None:
    return numerator / denominator if denominator > 0 else None


def figures(gold: np.ndarray, predicted: np.ndarray, weights: np.ndarray) -> tuple:
    """Weighted precision, recall and F1 of one behavior (None where undefined)."""
    true_positive = float(np.sum(weights * gold * predicted))
    precision = ratio(true_positive, float(np.sum(weights * predicted)))
    recall = ratio(true_positive, float(np.sum(weights * gold)))
    f1 = None if precision is None or recall is None else (
        0.0 if precision + recall == 0 else 2 * precision * recall / (precision + recall))
    return precision, recall, f1


def wilson(successes: int, trials: int) -> tuple[float | None, float | None]:
    """The Wilson score 95 % interval of a proportion."""
    if trials == 0:
        return None, None
    share = successes / trials
    centre = (share + Z95**2 / (2 * trials)) / (1 + Z95**2 / trials)
    half = Z95 * math.sqrt(share * (1 - share) / trials + Z95**2 / (4 * trials**2)) / (1 + Z95**2 / trials)
    return max(0.0, centre - half), min(1.0, centre + half)


def bootstrap_rows(strata: np.ndarray | None, documents: int, resamples: int, seed: int) -> np.ndarray:
    """(resamples, documents) row indices: each stratum resampled within itself (the whole sample without strata)."""
    rng = np.random.default_rng(seed)
    groups = [np.arange(documents)] if strata is None else [np.flatnonzero(strata == s) for s in np.unique(strata)]
    columns = [members[rng.integers(0, len(members), size=(resamples, len(members)))] for members in groups]
    return np.concatenate(columns, axis=1)


def bootstrap_interval(gold, predicted, weights, rows: np.ndarray) -> dict[str, tuple]:
    """Percentile 95 % intervals of precision, recall and F1 over the bootstrap resamples (a resample where a figure
    is undefined is left out of that figure's interval)."""
    g, p, w = gold[rows], predicted[rows], weights[rows]
    true_positive = np.sum(w * g * p, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        precision = true_positive / np.sum(w * p, axis=1)
        recall = true_positive / np.sum(w * g, axis=1)
        f1 = np.where(precision + recall > 0, 2 * precision * recall / (precision + recall), 0.0)
    f1 = np.where(np.isnan(precision) | np.isnan(recall), np.nan, f1)
    out = {}
    for name, values in (("precision", precision), ("recall", recall), ("f1", f1)):
        values = values[~np.isnan(values)]
        out[name] = (None, None) if not len(values) else (float(np.percentile(values, 2.5)),
                                                          float(np.percentile(values, 97.5)))
    return out


def figure(value, low, high) -> dict:
    return {"value": value, "ci_low": low, "ci_high": high}


def calibrate(labels_path: Path, tags: Path, output: Path, resamples: int = 2000, seed: int = 0,
              card: Path | None = None) -> dict:
    """Writes OUTPUT/calibration.json and OUTPUT/pr_curve.png (when the tags carry scores), and the figures into the
    card of the dataset `card` when given; returns the report."""
    if card is not None and not (card / "README.md").exists():
        raise ReviewError(f"{card} holds no README.md card: give a dataset `curate build` wrote from these tags")
    joined = join(read_labels(labels_path), tags)
    weighted = joined.strata is not None
    rows = bootstrap_rows(joined.strata, len(joined.ids), resamples, seed)
    behaviors = {}
    for k, behavior in enumerate(BEHAVIOR_NAMES):
        gold, predicted = joined.gold[:, k], joined.predicted[:, k]
        precision, recall, f1 = figures(gold, predicted, joined.weights)
        intervals = bootstrap_interval(gold, predicted, joined.weights, rows)
        if not weighted:  # plain counts: the Wilson interval, which holds up at small counts and near 0 or 1
            true_positive = int(np.sum(gold * predicted))
            intervals["precision"] = wilson(true_positive, int(predicted.sum()))
            intervals["recall"] = wilson(true_positive, int(gold.sum()))
        behaviors[behavior] = {
            **{name: figure(value, *intervals[name]) if value is not None else figure(None, None, None)
               for name, value in (("precision", precision), ("recall", recall), ("f1", f1))},
            "n_labeled": len(joined.ids),
            "n_labeled_present": int(gold.sum()),
            "n_predicted_present": int(predicted.sum()),
            "prevalence": float(np.sum(joined.weights * gold) / np.sum(joined.weights)),
        }
        if joined.scores is not None:
            behaviors[behavior]["curve"] = [
                dict(zip(("threshold", "precision", "recall"), (float(t), *figures(
                    gold, (joined.scores[:, k] >= t).astype(int), joined.weights)[:2]))) for t in THRESHOLDS]
    report = {"classifier": joined.classifier, "labels": str(labels_path), "tags": str(tags),
              "weighted": weighted, "design": "stratified, weighted by stratum size / labeled in stratum" if weighted
              else "none (plain figures)", "documents": len(joined.ids), "left_out_error_rows": joined.not_tagged,
              "interval": ("stratified bootstrap percentile" if weighted else "Wilson (precision, recall); bootstrap "
                           "percentile (F1)") + f", 95 %, {resamples} resamples, seed {seed}",
              "behaviors": behaviors}
    output.mkdir(parents=True, exist_ok=True)
    with atomic_open(output / "calibration.json") as sink:
        sink.write(json.dumps(report, indent=1) + "\n")
    if joined.scores is not None:
        plot_curves(behaviors, output / "pr_curve.png", joined.classifier)
    if card is not None:
        update_card_section(card, CARD_SECTION, card_section(report, output / "calibration.json"))
    return report


CARD_SECTION = "calibration"


def card_section(report: dict, path: Path) -> str:
    """The figures as a dataset card's section: what a reader of the dataset needs to weigh its labels."""
    def cell(f: dict) -> str:
        return "-" if f["value"] is None else f"{f['value']:.2f} [{f['ci_low']:.2f}, {f['ci_high']:.2f}]"

    how = ("weighted back to the corpus by the review's sampling design" if report["weighted"]
           else "plain figures (the labels came without a sampling design)")
    lines = ["## Labels checked on this corpus", "",
             f"A reader labeled {report['documents']} documents of this corpus (`curate review`); against those labels "
             f"`{report['classifier']}` measures as below, {how}, with 95 % intervals ({report['interval']}). "
             f"Full report: `{path}`.", "",
             "| behavior | precision | recall | F1 | labeled present |", "|---|---|---|---|---|"]
    lines += [f"| {b} | {cell(d['precision'])} | {cell(d['recall'])} | {cell(d['f1'])} | {d['n_labeled_present']} |"
              for b, d in report["behaviors"].items()]
    return "\n".join(lines)


def error_bar(f: dict) -> list[list[float]]:
    """A figure's interval as matplotlib's error bar: [[below the value], [above it]]."""
    return [[f["value"] - f["ci_low"]], [f["ci_high"] - f["value"]]]


def plot_curves(behaviors: dict, path: Path, classifier: str) -> Path:
    """Precision against recall as the threshold moves, one panel per behavior; the classifier's own label marked."""
    figure_, axes = plt.subplots(1, len(behaviors), figsize=(4 * len(behaviors), 4), sharey=True)
    for axis, (behavior, data) in zip(np.atleast_1d(axes), behaviors.items()):
        points = [(p["recall"], p["precision"]) for p in data["curve"] if p["recall"] is not None
                  and p["precision"] is not None]
        if points:
            axis.plot(*zip(*points), marker=".", color="tab:blue")
        precision, recall = data["precision"], data["recall"]
        if precision["value"] is not None and recall["value"] is not None:
            axis.errorbar(recall["value"], precision["value"], color="tab:red", fmt="o", capsize=3,
                          xerr=error_bar(recall), yerr=error_bar(precision))
        axis.set(title=f"{behavior} (n={data['n_labeled']})", xlabel="recall", xlim=(0, 1.02), ylim=(0, 1.02))
    np.atleast_1d(axes)[0].set_ylabel("precision")
    figure_.suptitle(f"{classifier} on your labels: precision/recall over the threshold (red: its label, 95 % CI)")
    figure_.tight_layout()
    try:
        with atomic_path(path) as partial:
            figure_.savefig(partial, dpi=100, format="png")
    finally:
        plt.close(figure_)
    return path

"""`curate adapt`: a shipped n-gram classifier fitted to the user's corpus, measured on the user's labels first.

Two refits, both on the base model's own features (its vocabulary and idf, and its cue classifier's counts), so that
the user's few hundred labels move the model rather than replace it:
- heads: the logistic heads refit on the shipped training labels (JSON lines of text and labels, when given) plus the
  user's, each user label weighing `user_weight` shipped ones;
- thresholds: the base heads kept, each behavior's threshold moved to the one with the best F1 on the user's labels.
Either is scored by k-fold cross-validation over the user's labels (a fold's labels never train the model that is
scored on them) beside the base model on the same folds, then fitted on all the labels and written to a new
MODELS/NAME_vN/ (N one above the highest there; a shipped model's folder is refused). A moved threshold t is folded
into the head's intercept (minus logit t), so the written model decides at 0.5 like every n-gram model.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from curate.behaviors import BEHAVIOR_NAMES
from curate.classifiers import get_classifier
from curate.classifiers.cues_ngram import MODELS, NgramModel, counts_of, fit_heads
from curate.classifiers.user_ngram import is_shipped
from curate.files import atomic_folder
from curate.review.jobs import AdaptJob
from curate.review.labels import parse_line, read_labels
from curate.review.sample import SAMPLE_FILE, ReviewError, texts_of

REFITS = ("heads", "thresholds")
# The shipped heads' regularization (cues_ngram_v1's C; bench/train_cues_ngram.py): the refit keeps the base's.
REGULARIZATION = {"cues_ngram_v1": 4.0, "cues_ngram_v2": 16.0}
THRESHOLDS = np.round(np.arange(0.05, 0.951, 0.05), 2)


@dataclass
class AdaptResult:
    directory: Path
    user_labels: int
    shipped_labels: int
    cross_validation: dict[str, dict]
    base_macro_f1: float
    adapted_macro_f1: float


def f1_score(gold: np.ndarray, predicted: np.ndarray) -> float:
    true_positive = int(np.sum(gold * predicted))
    denominator = int(gold.sum() + predicted.sum())
    return 2 * true_positive / denominator if denominator else 0.0


def best_threshold(gold: np.ndarray, probabilities: np.ndarray) -> float:
    """The threshold with the best F1 (the one nearest 0.5 among ties)."""
    return max(THRESHOLDS, key=lambda t: (f1_score(gold, (probabilities >= t).astype(int)), -abs(t - 0.5)))


def user_texts(labels_path: Path, ids: list[str], spec) -> dict[str, str]:
    """The labeled documents' texts: from the review sample beside the labels file, else from the corpus."""
    texts: dict[str, str] = {}
    sample = labels_path.parent / SAMPLE_FILE
    if sample.exists():
        for line in sample.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            texts[record["id"]] = record["text"]
    missing = {doc_id for doc_id in ids if doc_id not in texts}
    if missing:
        texts |= texts_of(spec, missing)
    missing = [doc_id for doc_id in ids if doc_id not in texts]
    if missing:
        raise ReviewError(f"{len(missing)} labeled ids (e.g. {missing[0]!r}) are neither in {sample} nor in the "
                          f"corpus {spec.path}: give the --input the labeled documents come from")
    return texts


def shipped_items(path: Path | None) -> tuple[list[str], np.ndarray]:
    """Texts and labels the base was trained on: JSON lines with `text` and `labels`."""
    if path is None:
        return [], np.zeros((0, len(BEHAVIOR_NAMES)), int)
    texts, gold = [], []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            record = json.loads(line)
            if not isinstance(record.get("text"), str):
                raise ReviewError(f"{path}:{number}: a shipped label needs its text; write the file with "
                                  "`python bench/training_labels.py --version v1 -o FILE` in a curate checkout")
            texts.append(record["text"])
            gold.append([parse_line(line, f"{path}:{number}").labels[b] for b in BEHAVIOR_NAMES])
    return texts, np.array(gold, int).reshape(-1, len(BEHAVIOR_NAMES))


def next_version(models: Path, name: str) -> Path:
    pattern = re.compile(rf"^{re.escape(name)}_v(\d+)$")
    taken = [int(m[1]) for p in models.glob(f"{name}_v*") if (m := pattern.match(p.name))] if models.exists() else []
    return models / f"{name}_v{max(taken, default=0) + 1}"


def adapt(job: AdaptJob) -> AdaptResult:
    if job.refit not in REFITS:
        raise ReviewError(f"--refit {job.refit!r}: choose heads or thresholds")
    if job.base not in REGULARIZATION:
        raise ReviewError(f"--base {job.base!r}: adapt starts from a shipped n-gram model "
                          f"({', '.join(REGULARIZATION)})")
    if is_shipped(job.models):
        raise ReviewError(f"--models {job.models} is the shipped models' folder; give a folder of your own")
    if not re.fullmatch(r"[a-z][a-z0-9_]*", job.name):
        raise ReviewError(f"--name {job.name!r}: lower-case letters, digits and _, starting with a letter")
    labels = read_labels(job.labels)
    if len(labels) < 2 * job.folds:
        raise ReviewError(f"{len(labels)} labels are too few for {job.folds}-fold cross-validation; label at least "
                          f"{2 * job.folds} documents (100-200 give useful figures)")
    texts_by_id = user_texts(job.labels, [label.id for label in labels], job.corpus)
    base = NgramModel.load(MODELS / job.base)
    cues = get_classifier(base.cues)
    user_texts_ = [texts_by_id[label.id] for label in labels]
    user_gold = np.array([[label.labels[b] for b in BEHAVIOR_NAMES] for label in labels], int)
    shipped_texts, shipped_gold = shipped_items(job.shipped_labels)
    all_texts = user_texts_ + shipped_texts
    cue_counts = counts_of(cues.classify(all_texts))
    matrix = base.features.matrix(all_texts, cue_counts)
    users = len(user_texts_)
    gold = np.vstack([user_gold, shipped_gold])
    weights = np.concatenate([np.full(users, job.user_weight), np.ones(len(shipped_texts))])
    base_probabilities = base.probabilities(user_texts_, cue_counts[:users])

    def fit(train_users: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Coefficients, intercepts and thresholds fitted on these user rows (and every shipped row)."""
        if job.refit == "thresholds":
            thresholds = np.array([best_threshold(user_gold[train_users, k], base_probabilities[train_users, k])
                                   for k in range(len(BEHAVIOR_NAMES))])
            return base.coefficients, base.intercepts, thresholds
        rows = np.concatenate([train_users, np.arange(users, len(all_texts))])
        for k, behavior in enumerate(BEHAVIOR_NAMES):
            if len(set(gold[rows, k])) < 2:
                raise ReviewError(f"every training label of {behavior} is {gold[rows[0], k]}: a head needs both; "
                                  "label more documents, add --shipped-labels, or use --refit thresholds")
        # Fitted on the columns these rows use: an all-zero column's L2-penalized weight is exactly 0, and leaving
        # the vocabulary's unused n-grams out makes the fit about 40 times faster with the same weights (1e-11).
        training = matrix[rows]
        active = np.unique(training.nonzero()[1])
        heads = fit_heads(training[:, active], {b: gold[rows, k] for k, b in enumerate(BEHAVIOR_NAMES)},
                          REGULARIZATION[job.base], weights=weights[rows])
        coefficients = np.zeros((len(BEHAVIOR_NAMES), matrix.shape[1]))
        coefficients[:, active] = np.vstack([h.coef_[0] for h in heads])
        return coefficients, np.array([h.intercept_[0] for h in heads]), np.full(len(BEHAVIOR_NAMES), 0.5)

    folds = np.random.default_rng(job.seed).permutation(users) % job.folds
    adapted = np.zeros_like(user_gold)
    for fold in range(job.folds):
        held = np.flatnonzero(folds == fold)
        coefficients, intercepts, thresholds = fit(np.flatnonzero(folds != fold))
        margin = matrix[held] @ coefficients.T + intercepts
        adapted[held] = (1 / (1 + np.exp(-margin)) >= thresholds).astype(int)
    base_predicted = (base_probabilities >= 0.5).astype(int)
    coefficients, intercepts, thresholds = fit(np.arange(users))
    cross_validation = {b: {"base_f1": f1_score(user_gold[:, k], base_predicted[:, k]),
                            "adapted_f1": f1_score(user_gold[:, k], adapted[:, k]),
                            "threshold": float(thresholds[k])} for k, b in enumerate(BEHAVIOR_NAMES)}
    base_macro = float(np.mean([v["base_f1"] for v in cross_validation.values()]))
    adapted_macro = float(np.mean([v["adapted_f1"] for v in cross_validation.values()]))
    logit = np.array([math.log(t / (1 - t)) for t in thresholds])
    model = NgramModel(base.features, coefficients, intercepts - logit, base.cues,
                       {**base.trained_on, "user_labels": users, "shipped_labels_given": len(shipped_texts)})
    directory = next_version(job.models, job.name)
    with atomic_folder(directory) as partial:
        model.save(partial)
        meta = json.loads((partial / "model.json").read_text(encoding="utf-8"))
        meta["adapted"] = {"from": job.base, "refit": job.refit, "labels": str(job.labels),
                           "shipped_labels": None if job.shipped_labels is None else str(job.shipped_labels),
                           "user_weight": job.user_weight, "folds": job.folds, "seed": job.seed,
                           "thresholds_folded_into_intercepts": dict(zip(BEHAVIOR_NAMES, map(float, thresholds))),
                           "cross_validation": cross_validation, "base_macro_f1": base_macro,
                           "adapted_macro_f1": adapted_macro}
        (partial / "model.json").write_text(json.dumps(meta, indent=0, ensure_ascii=False) + "\n", encoding="utf-8")
    return AdaptResult(directory, users, len(shipped_texts), cross_validation, base_macro, adapted_macro)

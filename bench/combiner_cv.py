"""Does a learned combiner beat the cues? Cross-validated F1 of a logistic head over a cue classifier's counts, over
MiniLM sentence embeddings, and over both, against the cue classifier's own presence labels, on the labeled real
texts of the tuning sets (the dev and held-out sets, blind rounds 1-3; round 5 stays out: it is the test set).

    HF_HUB_OFFLINE=1 python bench/combiner_cv.py [--classifier cues_v5] [--folds 5]

The head is sklearn's LogisticRegression with balanced class weights; its threshold is chosen on each training
fold (the F1-best of 33 steps), never on the fold it is scored on. Embeddings are those of the distilled
classifier (curate.classifiers.distilled.Embedder: token windows of the text, averaged). Measured 2026-12-01 with
cues_v5 over 1,598 texts: no behavior gains (backward chaining 0.58 -> 0.49 with embeddings), so no combiner ships.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.cue_accuracy import is_countdown, load_items
from curate.behaviors import BEHAVIOR_NAMES
from curate.classifiers import get_classifier
from curate.classifiers.distilled import Embedder

TUNING_SETS = ("dev", "heldout", "blindset", "blindset2", "blindset3")


def f1(gold: np.ndarray, predicted: np.ndarray) -> float:
    tp = int(((gold == 1) & (predicted == 1)).sum())
    fp = int(((gold == 0) & (predicted == 1)).sum())
    fn = int(((gold == 1) & (predicted == 0)).sum())
    return 2 * tp / (2 * tp + fp + fn) if tp else 0.0


def cross_validated(features: np.ndarray, gold: np.ndarray, folds: int) -> float:
    predicted = np.zeros(len(gold), int)
    for train, test in StratifiedKFold(folds, shuffle=True, random_state=0).split(features, gold):
        head = LogisticRegression(C=1.0, max_iter=2000, class_weight="balanced").fit(features[train], gold[train])
        scores = head.predict_proba(features[train])[:, 1]
        threshold = max(np.linspace(0.1, 0.9, 33), key=lambda t: f1(gold[train], (scores >= t).astype(int)))
        predicted[test] = (head.predict_proba(features[test])[:, 1] >= threshold).astype(int)
    return f1(gold, predicted)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--classifier", default="cues_v5")
    parser.add_argument("--folds", type=int, default=5)
    args = parser.parse_args()
    items = [item for name in TUNING_SETS for item in load_items(name) if not is_countdown(item)]
    texts = [item["text"] for item in items]
    labels = get_classifier(args.classifier).classify(texts)
    counts = np.array([[label.counts[b] or 0 for b in BEHAVIOR_NAMES] for label in labels], float)
    cues = np.hstack([np.log1p(counts), (counts > 0).astype(float)])
    embeddings = Embedder().embed(texts)
    both = np.hstack([embeddings, cues])
    print(f"{len(items)} labeled real texts; {args.folds}-fold cross-validated F1\n")
    print(f"| behavior | {args.classifier} | head on cue counts | head on embeddings | head on both |")
    print("|---|---|---|---|---|")
    for i, behavior in enumerate(BEHAVIOR_NAMES):
        gold = np.array([item["labels"][behavior] for item in items])
        cells = [cross_validated(x, gold, args.folds) for x in (cues, embeddings, both)]
        print(f"| {behavior} | {f1(gold, (counts[:, i] > 0).astype(int)):.3f} | " + " | ".join(f"{c:.3f}" for c in cells)
              + " |")


if __name__ == "__main__":
    main()

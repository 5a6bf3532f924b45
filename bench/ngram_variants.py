"""Two ways to lift the n-gram heads' backward-chaining label on real text, measured leaving one round out: neither
pays, so neither ships.

    python bench/ngram_variants.py [--hold-out blindset5,blindset13,blindset15,precision4]

Backward chaining is the weak label on real text (F1 about 0.25 on rounds 15 and 19, precision 0.15-0.36 read by
hand), and its false positives are mostly worked solutions restating their goal ("I need to find the distance
between the foci"). Two guesses, each scored on every `--hold-out` round with cues_ngram_v2's settings (C = 16,
balanced classes, the same features), trained on every other tuning set; the test-only rounds are never read:

1. **Domain-split heads** ("frustratingly easy" feature augmentation): each feature appears three times, shared,
   Countdown-only and real-text-only, so the real-text backward-chaining weights need not follow Countdown's "we need
   N more". The domain of a held-out text comes from a logistic classifier trained on the other sets' domains.
2. **A higher backward-chaining threshold** on real text, in case the head ranks well but fires too easily.

Figures of the run this was written with (2026-12-02): domain-split mean macro F1 0.726 -> 0.728 over the seven rounds,
better on 4 of 7, backward chaining on real text unchanged (0.29, 0.36, 0.23, 0.27 -> 0.29, 0.36, 0.23, 0.29); the
domain classifier is right on 99-100 % of held-out texts. Thresholds 0.5 -> 0.9 move real-text precision from 0.29,
0.50, 0.27, 0.15 to 0.50, 0.43, 0.50, 0.33 while recall on rounds 5, 13 and 15 falls to 0.11-0.17 (precision4 has
two true ones in all; both stay, among 6 labels): the head does not rank its positives first, so no threshold
reaches the 0.8 precision target.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.cue_accuracy import EVALS, is_countdown, load_blindset
from bench.train_cues_ngram import CUES, REGULARIZATION, labeled_texts, prf
from curate.behaviors import BEHAVIOR_NAMES
from curate.classifiers import get_classifier
from curate.classifiers.cues_ngram import NgramFeatures, counts_of, fit_heads

REAL_ROUNDS = ("blindset5", "blindset13", "blindset15", "precision4")
COUNTDOWN_ROUNDS = ("blindset12", "blindset14", "blindset17")
# Read after cues_ngram_v2 was trained: tuning text for the next revision, never a training set of v2.
PRECISION4 = EVALS / "blindset" / "precision4" / "labels.jsonl"
THRESHOLDS = (0.5, 0.6, 0.7, 0.8, 0.9)


def heads(matrix, rows, gold):
    return fit_heads(matrix[rows], {b: g[rows] for b, g in gold.items()}, REGULARIZATION["v2"])


def domain_split(matrix, countdown: np.ndarray):
    """Shared, Countdown-only and real-only copies of every feature."""
    from scipy.sparse import diags, hstack

    return hstack([matrix, diags(countdown) @ matrix, diags(1 - countdown) @ matrix]).tocsr()


def main() -> None:
    from sklearn.linear_model import LogisticRegression

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hold-out", default=",".join(REAL_ROUNDS + COUNTDOWN_ROUNDS))
    args = parser.parse_args()
    items = labeled_texts("v2") + [{**item, "set": "precision4"} for item in load_blindset(None, PRECISION4)]
    texts = [item["text"] for item in items]
    counts = counts_of(get_classifier(CUES).classify(texts))
    sets = np.array([item["set"] for item in items])
    countdown = np.array([is_countdown(item) for item in items], float)
    gold = {b: np.array([item["labels"][b] for item in items]) for b in BEHAVIOR_NAMES}
    bc = BEHAVIOR_NAMES.index("backward_chaining")
    print(f"{len(items)} labeled texts\n")
    print("| held-out round | texts | domain right | macro F1 plain -> split | backward chaining F1 plain -> split |")
    print("|---|---|---|---|---|")
    curves = {}
    for held in [h for h in args.hold_out.split(",") if h]:
        test = np.where(sets == held)[0]
        # v2's own training sets: precision4 was read after v2 was written, so it is scored here, never trained on.
        rest = np.where((sets != held) & (sets != "precision4"))[0]
        features = NgramFeatures.fit([texts[i] for i in rest])
        matrix = features.matrix(texts, counts)
        detector = LogisticRegression(C=4.0, max_iter=3000).fit(matrix[rest], countdown[rest])
        domain = countdown.copy()
        domain[test] = detector.predict(matrix[test])
        split = domain_split(matrix, domain)
        plain_heads, split_heads = heads(matrix, rest, gold), heads(split, rest, gold)
        plain = [prf(gold[b][test], plain_heads[k].predict(matrix[test])) for k, b in enumerate(BEHAVIOR_NAMES)]
        parted = [prf(gold[b][test], split_heads[k].predict(split[test])) for k, b in enumerate(BEHAVIOR_NAMES)]
        print(f"| {held} | {len(test)} | {np.mean(domain[test] == countdown[test]):.3f} | "
              f"{np.mean([s[2] for s in plain]):.3f} -> {np.mean([s[2] for s in parted]):.3f} | "
              f"{plain[bc][2]:.2f} -> {parted[bc][2]:.2f} |")
        if held in REAL_ROUNDS:
            curves[held] = (gold["backward_chaining"][test], plain_heads[bc].predict_proba(matrix[test])[:, 1])
    if curves:
        print("\nBackward chaining on real text, plain heads, by threshold: precision / recall (labels given)\n")
        print("| threshold | " + " | ".join(curves) + " |")
        print("|---|" + "---|" * len(curves))
        for threshold in THRESHOLDS:
            cells = []
            for truth, probability in curves.values():
                predicted = (probability >= threshold).astype(int)
                precision, recall, _ = prf(truth, predicted)
                cells.append(f"{precision:.2f} / {recall:.2f} ({int(predicted.sum())})")
            print(f"| {threshold} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()

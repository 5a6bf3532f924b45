"""Train `cues_ngram_v1` (curate/classifiers/cues_ngram.py) on the project's labeled texts, and measure it by leaving
one blind round out at a time.

    python bench/train_cues_ngram.py [--hold-out blindset10,blindset11,blindset12,blindset5,blindset13] [--write]

Every labeled set is read (the dev and held-out sets, blind rounds 1-13, both precision reads). The cue counts are
`cues_v11`'s, computed once. For each `--hold-out` round a model is trained on every other set and scored on that
round only, beside cues_v11's own labels; nothing is tuned on the held-out round (the settings were chosen before
this script existed, on the same leave-one-round-out scheme over rounds 10-13 and 5). `--write` then trains on
every set and writes the shipped model to curate/classifiers/models/cues_ngram_v1/. A round labeled after the
model was written (round 14) is its first fresh test.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.cue_accuracy import LABELS, TESTS, load_blindset, load_items, scores
from curate.behaviors import BEHAVIOR_NAMES
from curate.classifiers import get_classifier
from curate.classifiers.cues_ngram import MODEL_DIR, counts_of, train

CUES = "cues_v11"
PRECISION_READS = {"precision": TESTS / "blindset" / "precision" / "labels.jsonl",
                   "precision2": TESTS / "blindset" / "precision2" / "labels.jsonl"}
# Labeled after cues_ngram_v1 was written: its test, never its training.
NOT_TRAINED_ON = {"blindset14", "blindset15", "blindset17"}


def labeled_texts() -> list[dict]:
    items = []
    for name in LABELS:
        if name not in NOT_TRAINED_ON:
            items += [{**item, "set": name} for item in load_items(name)]
    for name, path in PRECISION_READS.items():
        items += [{**item, "set": name} for item in load_blindset(None, path)]
    return items


def prf(gold: np.ndarray, predicted: np.ndarray) -> tuple[float, float, float]:
    return scores(list(zip(gold.tolist(), predicted.tolist())))[:3]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hold-out", default="blindset10,blindset11,blindset12,blindset5,blindset13")
    parser.add_argument("--write", action="store_true", help="train on every set and write the shipped model")
    args = parser.parse_args()
    items = labeled_texts()
    texts = [item["text"] for item in items]
    counts = counts_of(get_classifier(CUES).classify(texts))
    gold = {b: np.array([item["labels"][b] for item in items]) for b in BEHAVIOR_NAMES}
    sets = np.array([item["set"] for item in items])
    print(f"{len(items)} labeled texts; cue counts from {CUES}\n")
    print(f"| held-out round | texts | {CUES} macro F1 | cues_ngram macro F1 | per behavior F1 ({CUES} -> ngram; P of ngram) |")
    print("|---|---|---|---|---|")
    for held in [h for h in args.hold_out.split(",") if h]:
        test, rest = np.where(sets == held)[0], np.where(sets != held)[0]
        model = train([texts[i] for i in rest], counts[rest], {b: g[rest] for b, g in gold.items()}, CUES, {})
        predicted = model.probabilities([texts[i] for i in test], counts[test]) >= 0.5
        cells, base, head = [], [], []
        for k, behavior in enumerate(BEHAVIOR_NAMES):
            b = prf(gold[behavior][test], (counts[test, k] > 0).astype(int))
            h = prf(gold[behavior][test], predicted[:, k].astype(int))
            base.append(b[2])
            head.append(h[2])
            cells.append(f"{behavior} {b[2]:.2f} -> {h[2]:.2f} (P {h[0]:.2f})")
        print(f"| {held} | {len(test)} | {np.mean(base):.3f} | {np.mean(head):.3f} | {'; '.join(cells)} |")
    if args.write:
        trained_on = {name: int((sets == name).sum()) for name in dict.fromkeys(sets)}
        model = train(texts, counts, gold, CUES, trained_on)
        model.save(MODEL_DIR)
        print(f"\nwrote {MODEL_DIR} ({len(model.features.vocabulary):,} n-grams, trained on {len(texts):,} texts)")


if __name__ == "__main__":
    main()

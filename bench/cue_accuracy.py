"""Precision, recall and F1 of a behavior classifier on the hand-labeled development set (tests/devset).

    python bench/cue_accuracy.py [--classifier cues] [--by-source] [--errors BEHAVIOR]

Presence is count >= 1. The set's texts are read from ../shared/data; see tests/devset/GUIDE.md.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from curate.behaviors import BEHAVIOR_NAMES  # noqa: E402
from curate.classifiers import get_classifier  # noqa: E402
from tests.devset.resolve import DevsetUnavailable, load_devset  # noqa: E402


def scores(pairs: list[tuple[int, int]]) -> tuple[float, float, float, int]:
    tp = sum(1 for gold, pred in pairs if gold and pred)
    fp = sum(1 for gold, pred in pairs if not gold and pred)
    fn = sum(1 for gold, pred in pairs if gold and not pred)
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1, tp + fn


def evaluate(classifier_spec: str = "cues") -> tuple[list[dict], list]:
    items = load_devset()
    labels = get_classifier(classifier_spec).classify([item["text"] for item in items])
    return items, labels


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--classifier", default="cues")
    parser.add_argument("--by-source", action="store_true")
    parser.add_argument("--errors", help="print false positives/negatives of this behavior")
    args = parser.parse_args()
    try:
        items, labels = evaluate(args.classifier)
    except DevsetUnavailable as error:
        sys.exit(f"dev set unavailable: {error}")
    groups: dict[str, list[int]] = defaultdict(list)
    for i, item in enumerate(items):
        groups["all"].append(i)
        if args.by_source:
            groups[item["source"].split("/")[0]].append(i)
    print(f"classifier {args.classifier}: {len(items)} labeled items\n")
    print("| subset | behavior | positives | precision | recall | F1 |")
    print("|---|---|---|---|---|---|")
    for group, indices in groups.items():
        for b in BEHAVIOR_NAMES:
            pairs = [(items[i]["labels"][b], int((labels[i].counts[b] or 0) > 0)) for i in indices]
            p, r, f, n = scores(pairs)
            print(f"| {group} | {b} | {n} | {p:.2f} | {r:.2f} | {f:.2f} |")
    if args.errors:
        b = args.errors
        for item, label in zip(items, labels):
            gold, pred = item["labels"][b], int((label.counts[b] or 0) > 0)
            if gold != pred:
                kind = "FALSE POSITIVE" if pred else "FALSE NEGATIVE"
                cues = [item["text"][e.start:e.end] for e in label.evidence if e.behavior == b]
                print(f"\n=== {kind} {item['id']} cues={cues}\n{item['text'][:1500]}")


if __name__ == "__main__":
    main()

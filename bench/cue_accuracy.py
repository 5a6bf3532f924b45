"""Precision, recall and F1 of a behavior classifier on a hand-labeled set: the development set (tests/devset) or
the held-out set (tests/heldout), optionally one of its halves.

    python bench/cue_accuracy.py [--classifier cues] [--set dev|heldout] [--split tune|test]
                                 [--by-source] [--errors BEHAVIOR]

Presence is count >= 1. The texts are read from ../shared/data; see tests/devset/GUIDE.md and
tests/heldout/GUIDE.md. Read errors (--errors) on the dev set or the held-out tune half only: the test half is
the honest figure only as long as nobody tunes against it.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from curate.behaviors import BEHAVIOR_NAMES
from curate.classifiers import get_classifier
from tests.devset.resolve import LABELS_PATH as DEV_LABELS
from tests.devset.resolve import DevsetUnavailable, load_devset

LABELS = {"dev": DEV_LABELS, "heldout": Path(__file__).resolve().parents[1] / "tests" / "heldout" / "labels.jsonl"}


def scores(pairs: list[tuple[int, int]]) -> tuple[float, float, float, int]:
    tp = sum(1 for gold, pred in pairs if gold and pred)
    fp = sum(1 for gold, pred in pairs if not gold and pred)
    fn = sum(1 for gold, pred in pairs if gold and not pred)
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1, tp + fn


def evaluate(classifier_spec: str = "cues", labelled_set: str = "dev", split: str | None = None) -> tuple[list[dict], list]:
    items = load_devset(labels_path=LABELS[labelled_set])
    if split is not None:
        items = [item for item in items if item.get("split") == split]
        if not items:
            raise ValueError(f"the {labelled_set} set has no items in split {split!r}")
    labels = get_classifier(classifier_spec).classify([item["text"] for item in items])
    return items, labels


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--classifier", default="cues")
    parser.add_argument("--set", dest="labelled_set", choices=sorted(LABELS), default="dev")
    parser.add_argument("--split", choices=("tune", "test"), help="one half of the held-out set")
    parser.add_argument("--by-source", action="store_true")
    parser.add_argument("--errors", help="print false positives/negatives of this behavior")
    args = parser.parse_args()
    try:
        items, labels = evaluate(args.classifier, args.labelled_set, args.split)
    except DevsetUnavailable as error:
        sys.exit(f"labelled set unavailable: {error}")
    except ValueError as error:
        sys.exit(str(error))
    groups: dict[str, list[int]] = defaultdict(list)
    for i, item in enumerate(items):
        groups["all"].append(i)
        if args.by_source:
            groups[item["source"].split("/")[0]].append(i)
    subset = args.labelled_set + (f"/{args.split}" if args.split else "")
    print(f"classifier {args.classifier}: {len(items)} labeled items ({subset})\n")
    print("| subset | behavior | positives | precision | recall | F1 |")
    print("|---|---|---|---|---|---|")
    for group, indices in groups.items():
        for b in BEHAVIOR_NAMES:
            pairs = [(items[i]["labels"][b], int((labels[i].counts[b] or 0) > 0)) for i in indices]
            p, r, f, n = scores(pairs)
            print(f"| {group} | {b} | {n} | {p:.2f} | {r:.2f} | {f:.2f} |")
        if group == "all":
            macro = sum(
                scores([(items[i]["labels"][b], int((labels[i].counts[b] or 0) > 0)) for i in indices])[2]
                for b in BEHAVIOR_NAMES
            ) / len(BEHAVIOR_NAMES)
            print(f"| all | macro F1 | | | | {macro:.2f} |")
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

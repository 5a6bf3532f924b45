"""Precision, recall and F1 of a behavior classifier on a hand-labeled set: the development set (evals/devset), the
held-out set (evals/heldout) or the blind set (evals/blindset, real texts plus Countdown traces), optionally one
of its halves.

    python bench/cue_accuracy.py [--classifier cues[,cues_v2,keyword]] [--set dev|heldout|blindset]
                                 [--split tune|test] [--by-source] [--errors BEHAVIOR] [--trace-only]

Presence is count >= 1. `keyword` is the naive floor of bench/keyword_baseline.py (one fixed regex per behavior).
With several classifiers, one summary row per classifier and group gives each behavior's F1 and the macro F1.
On the blind set the groups are always `real` (forum, solution and trace texts) and `countdown`, the two the
targets are set on; --by-source adds each source. The texts are read from ../shared/data; see the GUIDE.md of each
set. Read errors (--errors) on the dev set or a tune half only: a test half is the honest figure only as long as
nobody tunes against it.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from curate.behaviors import BEHAVIOR_NAMES
from curate.classifiers import get_classifier
from evals.devset.resolve import LABELS_PATH as DEV_LABELS
from evals.devset.resolve import DevsetUnavailable, load_devset

EVALS = Path(__file__).resolve().parents[1] / "evals"
LABELS = {"dev": DEV_LABELS, "heldout": EVALS / "heldout" / "labels.jsonl", "blindset": EVALS / "blindset" / "labels.jsonl",
          "blindset2": EVALS / "blindset" / "round2" / "labels.jsonl",
          "blindset3": EVALS / "blindset" / "round3" / "labels.jsonl",
          "blindset5": EVALS / "blindset" / "round5" / "labels.jsonl",
          "blindset7": EVALS / "blindset" / "round7" / "labels.jsonl",
          "blindset8": EVALS / "blindset" / "round8" / "labels.jsonl",
          "blindset9": EVALS / "blindset" / "round9" / "labels.jsonl",
          "blindset10": EVALS / "blindset" / "round10" / "labels.jsonl",
          "blindset11": EVALS / "blindset" / "round11" / "labels.jsonl",
          "blindset12": EVALS / "blindset" / "round12" / "labels.jsonl",
          "blindset13": EVALS / "blindset" / "round13" / "labels.jsonl",
          "blindset14": EVALS / "blindset" / "round14" / "labels.jsonl",
          "blindset15": EVALS / "blindset" / "round15" / "labels.jsonl",
          "blindset17": EVALS / "blindset" / "round17" / "labels.jsonl",
          "blindset18": EVALS / "blindset" / "round18" / "labels.jsonl",
          "blindset19": EVALS / "blindset" / "round19" / "labels.jsonl"}
BLIND_ROUNDS = {name for name in LABELS if name.startswith("blindset")}
# Test sets only: their errors are not printed, so nobody tunes against them. Rounds 2 and 3 were each read once to
# report (cues_v3/v4, then cues_v5) and are tuning text since; round 5 is the test set that replaced them. Round 7
# (180 Countdown traces written after cues_v6 was frozen) was read once to report cues_v6 (7988b26) and is the tuning
# text of cues_v7's Countdown cues since; rounds 8 and 9 replaced it in turn, each read once to report the version
# before (v7, v8) and then tuning the next (v8, v9), as rounds 10 and 11 did (read once for v9 and v10, tuning
# cues_v10 and cues_v11); round 12 is the fresh Countdown set after them. Round 13 (300 real texts, drawn as round 5
# was) is the real-text test set of the first real-text revision after cues_v6. cues_ngram_v1 was then trained on
# every labeled set, rounds 5, 12 and 13 included, so none of them is untouched any more; round 14 (Countdown traces
# labeled after that model was written) was read once to report it and trained nothing since. Rounds 15 (262 real
# texts, drawn as round 5 was) and 17 (180 Countdown traces by an eighth writer) were labeled after it too: the test
# sets of the next revision, each read once to report cues_ngram_v1, and training text of cues_ngram_v2 since. Rounds
# 18 (Countdown) and 19 (real texts), labeled after cues_ngram_v2 was written, are its test sets.
TEST_ONLY = {"blindset18", "blindset19"}


def scores(pairs: list[tuple[int, int]]) -> tuple[float, float, float, int]:
    tp = sum(1 for gold, pred in pairs if gold and pred)
    fp = sum(1 for gold, pred in pairs if not gold and pred)
    fn = sum(1 for gold, pred in pairs if gold and not pred)
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1, tp + fn


def classifier(spec: str):
    if spec == "keyword":
        from bench.keyword_baseline import KeywordBaseline

        return KeywordBaseline()
    return get_classifier(spec)


def load_items(labelled_set: str = "dev", split: str | None = None) -> list[dict]:
    if labelled_set in BLIND_ROUNDS:
        items = load_blindset(split, LABELS[labelled_set])
    else:
        items = load_devset(labels_path=LABELS[labelled_set])
    if split is not None:
        items = [item for item in items if item.get("split") == split]
    if not items:
        raise ValueError(f"the {labelled_set} set has no items in split {split!r}")
    return items


def load_blindset(split: str | None, labels_path: Path) -> list[dict]:
    """A blind set round's labeled items of one half (or all): shared-data texts and Countdown traces
    (evals/blindset; rounds 2, 3 and 5 in evals/blindset/roundN, real texts only, and rounds 7 to 10, Countdown
    traces only; all test)."""
    if not labels_path.exists():
        raise DevsetUnavailable(f"the blind set's labels are not there yet ({labels_path})")
    from evals.blindset.resolve import load_blindset as resolve_blindset

    lines = [line for line in labels_path.read_text(encoding="utf-8").splitlines() if line.strip()]
    if split is not None:
        # Only the asked half's texts are resolved: reading a tune half never loads a test text.
        lines = [line for line in lines if json.loads(line).get("split") == split]
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "labels.jsonl"
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        return resolve_blindset(items_path=path)


def evaluate(classifier_spec: str = "cues", labelled_set: str = "dev", split: str | None = None,
             trace_only: bool = False) -> tuple[list[dict], list]:
    items = load_items(labelled_set, split)
    labels = classifier(classifier_spec).classify([text_of(item, trace_only) for item in items])
    return items, labels


def text_of(item: dict, trace_only: bool) -> str:
    """The text as the readers read it, or with `trace_only` a Countdown trace without the problem statement above it
    (as a policy's response comes, before `audit-policy` puts its problem back above it)."""
    if trace_only and is_countdown(item):
        return item["text"].split("\n\n", 1)[1]
    return item["text"]


def is_countdown(item: dict) -> bool:
    return item["id"].startswith("cd-") or item["source"].split("/")[0] == "countdown"


def groups_of(items: list[dict], labelled_set: str, by_source: bool) -> dict[str, list[int]]:
    groups: dict[str, list[int]] = defaultdict(list)
    for i, item in enumerate(items):
        groups["all"].append(i)
        if labelled_set in BLIND_ROUNDS:
            groups["countdown" if is_countdown(item) else "real"].append(i)
        if by_source and not (labelled_set in BLIND_ROUNDS and is_countdown(item)):  # its own group
            groups[item["source"].split("/")[0]].append(i)
    return groups


def presence(items: list[dict], labels: list, indices: list[int], behavior: str) -> list[tuple[int, int]]:
    return [(items[i]["labels"][behavior], int((labels[i].counts[behavior] or 0) > 0)) for i in indices]


def macro_f1(items: list[dict], labels: list, indices: list[int]) -> float:
    return sum(scores(presence(items, labels, indices, b))[2] for b in BEHAVIOR_NAMES) / len(BEHAVIOR_NAMES)


def summary(specs: list[str], labelled_set: str, split: str | None, by_source: bool, trace_only: bool = False) -> None:
    items = load_items(labelled_set, split)
    groups = groups_of(items, labelled_set, by_source)
    print(f"{len(items)} labeled items ({labelled_set}{f'/{split}' if split else ''}); cells are F1 (P / R)\n")
    print("| classifier | group | items | " + " | ".join(f"{b} (pos)" for b in BEHAVIOR_NAMES) + " | macro F1 |")
    print("|---" * (4 + len(BEHAVIOR_NAMES)) + "|")
    for spec in specs:
        labels = classifier(spec).classify([text_of(item, trace_only) for item in items])
        for group, indices in groups.items():
            cells = []
            for b in BEHAVIOR_NAMES:
                p, r, f, n = scores(presence(items, labels, indices, b))
                cells.append(f"{f:.2f} ({p:.2f} / {r:.2f}) [{n}]")
            print(f"| {spec} | {group} | {len(indices)} | " + " | ".join(cells)
                  + f" | {macro_f1(items, labels, indices):.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--classifier", default="cues")
    parser.add_argument("--set", dest="labelled_set", choices=sorted(LABELS), default="dev")
    parser.add_argument("--split", choices=("tune", "test"), help="one half of the held-out or blind set")
    parser.add_argument("--by-source", action="store_true")
    parser.add_argument("--errors", help="print false positives/negatives of this behavior")
    parser.add_argument("--trace-only", action="store_true",
                        help="classify each Countdown trace without the problem statement the readers saw above it")
    args = parser.parse_args()
    specs = [spec.strip() for spec in args.classifier.split(",") if spec.strip()]
    if args.errors and args.labelled_set in TEST_ONLY:
        sys.exit(f"--errors is refused on {args.labelled_set}: it is a test set, read once to report")
    try:
        if len(specs) > 1:
            if args.errors:
                sys.exit("--errors reads one classifier's errors; name one")
            summary(specs, args.labelled_set, args.split, args.by_source, args.trace_only)
            return
        items, labels = evaluate(args.classifier, args.labelled_set, args.split, args.trace_only)
    except DevsetUnavailable as error:
        sys.exit(f"labelled set unavailable: {error}")
    except ValueError as error:
        sys.exit(str(error))
    groups = groups_of(items, args.labelled_set, args.by_source)
    subset = args.labelled_set + (f"/{args.split}" if args.split else "")
    print(f"classifier {args.classifier}: {len(items)} labeled items ({subset})\n")
    print("| subset | behavior | positives | precision | recall | F1 |")
    print("|---|---|---|---|---|---|")
    for group, indices in groups.items():
        for b in BEHAVIOR_NAMES:
            p, r, f, n = scores(presence(items, labels, indices, b))
            print(f"| {group} | {b} | {n} | {p:.2f} | {r:.2f} | {f:.2f} |")
        print(f"| {group} | macro F1 | | | | {macro_f1(items, labels, indices):.2f} |")
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

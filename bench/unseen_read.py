"""Score the classifiers on the unseen-source read: MATH-500's reference solutions (competition solutions), a source
none of them trained on, each text quoted by two readers blind to each other and to every classifier
(evals/spans/unseen/, drawn by evals/spans/draw_unseen.py; no text shares a word 8-gram with a labeled or written
text).

    python bench/unseen_read.py                 # the dev part: the shipped classifiers and the keyword floor
    python bench/unseen_read.py --candidates    # also spans_v3's recipe retrained with the texts written here
    python bench/unseen_read.py --part test     # the test part (scored once, after the model was written)
    python bench/unseen_read.py --part test --adapt   # also `curate adapt` fitted on the dev part's labels

`--adapt` is the review-and-calibrate loop as a user runs it: the dev part's labels stand for a user's reviewed
sample of their own corpus, `curate adapt` (through its CLI, thresholds and heads with the shipped training labels)
fits cues_ngram_v1 to them, and the adapted models are scored beside the rest on the part asked for (the test part:
texts none of them saw).

Document F1 per behavior with a 95 % bootstrap interval and the number of texts with it (n+), macro F1 over the four
behaviors and over those with at least 5 texts; for every classifier, its evidence spans against the readers'
(share of predicted spans overlapping a reader's span of that behavior, share of reader spans found).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.keyword_baseline import KeywordBaseline
from bench.train_spans import f1, interval
from curate.behaviors import BEHAVIOR_NAMES
from curate.classifiers import get_classifier
from evals.spans.draw_unseen import UNSEEN, resolve

SHIPPED = ("cues_v12", "cues_ngram_v1", "spans_v1", "spans_v2", "spans_v3")
# A behavior with fewer texts than this in the read gives an F1 of one or two texts: the second macro leaves it out.
MIN_POSITIVES = 5


def candidates(folder: Path) -> dict[str, object]:
    """spans_v3's recipe trained on spans_v3's texts and the texts written here."""
    from bench import train_spans as recipe
    from curate.classifiers.spans_v2 import SpanDocumentClassifier

    items = recipe.labeled_items()
    rows = recipe.unit_rows([item for item in items if item["set"] not in recipe.TEST_SETS], recipe.span_labels())
    kept, dropped = recipe.shipped_training(items, rows, written=True)
    recipe.add_cues(kept)
    target = folder / "spans_v3_with_written"
    recipe.write_model("spans_v3", kept, dropped, folder=target, balance_by="genre")
    return {"spans_v3 recipe + written texts": SpanDocumentClassifier("spans_v3", folder=target)}


def adapted(folder: Path, items: list[dict], read: dict[str, dict], texts: dict[str, str]) -> dict[str, object]:
    """cues_ngram_v1 fitted by `curate adapt` to the labels of `items` (the dev part; the corpus it reads holds only
    their texts), its thresholds and its heads."""
    import subprocess

    corpus, labels, shipped = folder / "corpus.jsonl", folder / "labels.jsonl", folder / "shipped_v1.jsonl"
    corpus.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in texts.items()))
    labels.write_text("".join(json.dumps({"id": item["id"], "labels": read[item["id"]]["labels"]}) + "\n"
                              for item in items))
    subprocess.run([sys.executable, str(ROOT / "bench" / "training_labels.py"), "--version", "v1", "-o",
                    str(shipped)], check=True)
    out = {}
    for refit, name, extra in (("thresholds", "adapted_thresholds", []),
                               ("heads", "adapted_heads", ["--shipped-labels", str(shipped)])):
        subprocess.run([sys.executable, "-m", "curate.cli", "adapt", "--labels", str(labels), "--input",
                        str(corpus), "--models", str(folder / "models"), "--refit", refit, "--name", name, *extra],
                       check=True)
        out[f"cues_ngram_v1 adapted to the dev part ({refit})"] = get_classifier(
            f"user_ngram:{folder / 'models' / f'{name}_v1'}")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--candidates", action="store_true", help="also train and score spans_v3's recipe with "
                        "the written texts (a minute or two)")
    parser.add_argument("--adapt", action="store_true", help="also cues_ngram_v1 fitted to the dev part's labels "
                        "by `curate adapt` (minutes)")
    parser.add_argument("--part", choices=("dev", "test"), default="dev", help="the dev part (compared candidates "
                        "and had its errors read) or the test part (drawn after, scored once)")
    args = parser.parse_args()
    every = [json.loads(line) for line in (UNSEEN / "items.jsonl").read_text().splitlines()]
    items = [item for item in every if item["part"] == args.part]
    read = {row["id"]: row for row in map(json.loads, (UNSEEN / "labels.jsonl").read_text().splitlines())}
    texts = resolve(items)
    ids = [item["id"] for item in items]
    gold = np.array([[read[i]["labels"][b] for b in BEHAVIOR_NAMES] for i in ids], dtype=bool)
    classifiers: dict[str, object] = {"keyword": KeywordBaseline(), **{name: get_classifier(name) for name in SHIPPED}}
    with tempfile.TemporaryDirectory() as scratch:
        if args.candidates:
            classifiers.update(candidates(Path(scratch)))
        if args.adapt:
            if args.part == "dev":
                parser.error("--adapt fits the dev part's labels: score it on --part test")
            dev = [item for item in every if item["part"] == "dev"]
            classifiers.update(adapted(Path(scratch), dev, read, resolve(dev)))
        counted = [k for k in range(len(BEHAVIOR_NAMES)) if gold[:, k].sum() >= MIN_POSITIVES]
        print(f"| classifier | macro F1 | macro F1, behaviors with n+ >= {MIN_POSITIVES} | " +
              " | ".join(f"{b} (n+={int(gold[:, k].sum())})" for k, b in enumerate(BEHAVIOR_NAMES)) +
              " | span precision | span recall |")
        print("|---|---|---|" + "---|" * len(BEHAVIOR_NAMES) + "---|---|")
        for name, classifier in classifiers.items():
            labels = classifier.classify([texts[i] for i in ids])
            guess = np.array([[bool(label.counts[b]) for b in BEHAVIOR_NAMES] for label in labels])
            scores = [f1(gold[:, k], guess[:, k]) for k in range(len(BEHAVIOR_NAMES))]
            cells = [f"{scores[k]:.2f} [{low:.2f}, {high:.2f}]"
                     for k, (low, high) in enumerate(interval(gold[:, k], guess[:, k], np.random.default_rng(0), 1000)
                                                     for k in range(len(scores)))]
            predicted = right = theirs_total = found = 0
            for i, label in zip(ids, labels):
                theirs = read[i]["spans"]
                for e in label.evidence:
                    predicted += 1
                    right += any(s["behavior"] == e.behavior and e.start < s["end"] and s["start"] < e.end
                                 for s in theirs)
                for s in theirs:
                    theirs_total += 1
                    found += any(s["behavior"] == e.behavior and e.start < s["end"] and s["start"] < e.end
                                 for e in label.evidence)
            print(f"| {name} | {np.mean(scores):.3f} | {np.mean([scores[k] for k in counted]):.3f} | "
                  + " | ".join(cells) + f" | {right / max(1, predicted):.2f} ({predicted}) | "
                  f"{found / max(1, theirs_total):.2f} ({theirs_total}) |", flush=True)


if __name__ == "__main__":
    main()

"""How many reviewed texts of a genre it never saw does `curate adapt` need? A learning curve of the
review-and-calibrate loop, run through the CLI as a user runs it.

    python bench/adapt_curve.py [--genre forum --genre short_model_step] [--sizes 50,100,200,400]

For each genre: its labeled texts (outside the test rounds 18/19) are shuffled (seeded); the first ones stand for a
user's reviewed sample, the rest, less every text sharing a word 8-gram with a reviewed one, are the test. The
shipped training labels handed to `curate adapt --shipped-labels` are cues_ngram_v1's, less every text of the genre
and every text sharing a word 8-gram with one, so the adapted heads learn the genre only from the reviewed sample
(the features stay cues_ngram_v1's, whose vocabulary was fitted with the genre in it). Rows: cues_ngram_v1's recipe
trained on those shipped labels alone (0 reviewed), the adapted heads for each sample size, and the shipped
cues_ngram_v1 for reference (it trained on the genre: not an unseen figure). Macro F1 over the four behaviors on the
same test texts. Only `--refit heads` is measured: `--refit thresholds` keeps cues_ngram_v1's heads, which trained on
every labeled genre, so its figure here would be in-sample.

    python bench/adapt_curve.py --genre forum --user-weight 1   # a reviewed label weighing one shipped label
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.train_cues_ngram import labeled_texts
from bench.train_spans import TEST_SETS, f1, word_shingles
from curate.behaviors import BEHAVIOR_NAMES
from curate.classifiers import get_classifier
from curate.classifiers.cues_ngram import MODELS, NgramModel, counts_of, train
from evals.spans.draw import genre_of, labeled_items


def macro(classifier, texts: list[str], gold: np.ndarray) -> tuple[float, list[float]]:
    labels = classifier.classify(texts)
    guess = np.array([[bool(label.counts[b]) for b in BEHAVIOR_NAMES] for label in labels])
    per = [f1(gold[:, k], guess[:, k]) for k in range(len(BEHAVIOR_NAMES))]
    return float(np.mean(per)), per


def write_jsonl(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))


def curve(genre: str, sizes: list[int], folder: Path, adapt_options: list[str], labeled: list[dict],
          shipped_v1: list[dict]) -> None:
    """One genre's learning curve; `labeled` is every labeled text, `shipped_v1` cues_ngram_v1's training texts."""
    items = [item for item in labeled if item["set"] not in TEST_SETS and genre_of(item["source"]) == genre]
    random.Random(20261207).shuffle(items)
    pool = items[:max(sizes)]
    pool_shingles = set().union(*(word_shingles(item["text"]) for item in pool))
    test = [item for item in items[max(sizes):] if not word_shingles(item["text"]) & pool_shingles]
    genre_shingles = set().union(*(word_shingles(item["text"]) for item in items))
    shipped = [item for item in shipped_v1 if genre_of(item["source"]) != genre
               and not word_shingles(item["text"]) & genre_shingles]
    shipped_path = folder / f"shipped-{genre}.jsonl"
    write_jsonl(shipped_path, [{"id": item["id"], "set": item["set"], "text": item["text"],
                                "labels": {b: int(item["labels"][b]) for b in BEHAVIOR_NAMES}} for item in shipped])
    texts = [item["text"] for item in test]
    gold = np.array([[item["labels"][b] for b in BEHAVIOR_NAMES] for item in test], dtype=bool)
    positives = " / ".join(str(int(gold[:, k].sum())) for k in range(len(BEHAVIOR_NAMES)))
    print(f"\n{genre}: {len(test)} test texts (with V / B / S / BC: {positives}); {len(shipped)} shipped labels "
          f"without the genre\n")
    print("| reviewed texts | model | macro F1 | " + " | ".join(BEHAVIOR_NAMES) + " |")
    print("|---|---|---|" + "---|" * len(BEHAVIOR_NAMES))

    def row(size: str, name: str, classifier) -> None:
        score, per = macro(classifier, texts, gold)
        print(f"| {size} | {name} | {score:.3f} | " + " | ".join(f"{x:.2f}" for x in per) + " |", flush=True)

    base = NgramModel.load(MODELS / "cues_ngram_v1")
    cue_labels = get_classifier(base.cues).classify([item["text"] for item in shipped])
    alone = train([item["text"] for item in shipped], counts_of(cue_labels),
                  {b: [item["labels"][b] for item in shipped] for b in BEHAVIOR_NAMES}, base.cues, {})
    alone_folder = folder / f"alone-{genre}"
    alone.save(alone_folder)
    row("0", "cues_ngram_v1's recipe, shipped labels without the genre", get_classifier(f"user_ngram:{alone_folder}"))
    for size in sizes:
        reviewed = pool[:size]
        corpus, labels = folder / f"corpus-{genre}-{size}.jsonl", folder / f"labels-{genre}-{size}.jsonl"
        write_jsonl(corpus, [{"id": item["id"], "text": item["text"]} for item in reviewed])
        write_jsonl(labels, [{"id": item["id"], "labels": {b: int(item["labels"][b]) for b in BEHAVIOR_NAMES}}
                             for item in reviewed])
        name = f"adapted_{genre}_{size}"
        subprocess.run([sys.executable, "-m", "curate.cli", "adapt", "--labels", str(labels), "--input", str(corpus),
                        "--models", str(folder / "models"), "--shipped-labels", str(shipped_path), "--name", name,
                        *adapt_options], check=True, stdout=subprocess.DEVNULL)
        row(str(size), f"curate adapt {' '.join(adapt_options)}",
            get_classifier(f"user_ngram:{folder / 'models' / f'{name}_v1'}"))
    row("(all, in training)", "shipped cues_ngram_v1 (trained on this genre)", get_classifier("cues_ngram_v1"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--genre", action="append", help="a real-text genre (repeatable; default forum and "
                        "short_model_step)")
    parser.add_argument("--sizes", default="50,100,200,400", help="reviewed sample sizes, comma-separated")
    parser.add_argument("--user-weight", default="5", help="curate adapt's --user-weight")
    args = parser.parse_args()
    adapt_options = ["--refit", "heads", "--user-weight", args.user_weight]
    sizes = sorted(int(size) for size in args.sizes.split(","))
    labeled, shipped_v1 = labeled_items(), labeled_texts("v1")
    with tempfile.TemporaryDirectory() as scratch:
        for genre in args.genre or ["forum", "short_model_step"]:
            curve(genre, sizes, Path(scratch), adapt_options, labeled, shipped_v1)


if __name__ == "__main__":
    main()

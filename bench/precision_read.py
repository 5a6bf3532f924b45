"""How often a backtracking or backward-chaining label is right on random real text: a blind precision read.

    python evals/blindset/draw.py --round 4 --out /tmp/prec/candidates.jsonl --items /tmp/prec/pool_items.jsonl
    python bench/precision_read.py select --pool /tmp/prec/pool_items.jsonl --classifier cues_v5 \\
        --out /tmp/prec/reading.jsonl
    ... two readers label /tmp/prec/reading.jsonl with evals/blindset/GUIDE.md; evals/blindset/agreement.py merges
    python bench/precision_read.py score --labels evals/blindset/precision/labels.jsonl

The pool is a fresh draw (round 4 of draw.py: no dev, held-out or round-1..3 text), and only its random pools are
used, so "random real text" means what it says. `select` classifies those texts, takes up to --per-behavior texts the
classifier labels backtracking and as many it labels backward chaining, adds as many texts drawn at random from the
rest, and shuffles them: the readers label all four behaviors of every text without knowing which texts were picked
or why, so a picked text is read like any other. The reading material (ids and texts) goes to --out, outside the
repository; the item list (locators, what the classifier said, why each was picked) to --items.

`score` reports, for each behavior, the precision of the classifier's positive labels among the texts picked at
random as well as those picked for it, with a Wilson interval: the issue's target is precision >= 0.8 for a
backtracking or backward-chaining label.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from curate.behaviors import BEHAVIOR_NAMES
from curate.classifiers import get_classifier
from evals.blindset.resolve import load_blindset

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
ITEMS = REPO / "evals" / "blindset" / "precision" / "items.jsonl"
PICKED_FOR = ("backtracking", "backward_chaining")
SEED = 20261205


def wilson(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


def select(pool: Path, classifier: str, per_behavior: int, out: Path, items_path: Path) -> None:
    if REPO in out.resolve().parents:
        sys.exit("--out must be outside the repository: real texts are not stored in it")
    locators = {row["id"]: row["locator"] for row in map(json.loads, pool.read_text(encoding="utf-8").splitlines())}
    texts = [item for item in load_blindset(items_path=pool) if item["selection"] == "random"]
    labels = get_classifier(classifier).classify([item["text"] for item in texts])
    predicted = [{b: int((label.counts[b] or 0) > 0) for b in BEHAVIOR_NAMES} for label in labels]
    rng = random.Random(SEED)
    picked: dict[int, list[str]] = {}
    for behavior in PICKED_FOR:
        positives = [i for i, p in enumerate(predicted) if p[behavior]]
        for i in rng.sample(positives, min(per_behavior, len(positives))):
            picked.setdefault(i, []).append(behavior)
    rest = [i for i in range(len(texts)) if i not in picked]
    for i in rng.sample(rest, min(len(picked), len(rest))):
        picked[i] = ["random"]
    order = list(picked)
    rng.shuffle(order)
    items = [
        {"id": texts[i]["id"], "source": texts[i]["source"], "locator": locators[texts[i]["id"]],
         "selection": texts[i]["selection"], "split": "test", "classifier": classifier,
         "predicted": predicted[i], "picked_for": picked[i]}
        for i in order
    ]
    items_path.parent.mkdir(parents=True, exist_ok=True)
    items_path.write_text("".join(json.dumps(item, ensure_ascii=False) + "\n" for item in items), encoding="utf-8")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(json.dumps({"id": texts[i]["id"], "source": texts[i]["source"], "text": texts[i]["text"]},
                                      ensure_ascii=False) + "\n" for i in order), encoding="utf-8")
    share = {b: sum(p[b] for p in predicted) for b in BEHAVIOR_NAMES}
    print(f"{len(texts)} random pool texts; {classifier} labels per behavior: {share}")
    print(f"picked {len(items)}: " + ", ".join(f"{b} {sum(b in it['picked_for'] for it in items)}"
                                              for b in (*PICKED_FOR, "random")))


def score(labels_path: Path) -> None:
    rows = [json.loads(line) for line in labels_path.read_text(encoding="utf-8").splitlines() if line.strip()]
    print(f"{len(rows)} texts read ({rows[0]['classifier']}); precision of the classifier's positive labels\n")
    print("| behavior | labeled positive | right | precision | 95% interval |")
    print("|---|---|---|---|---|")
    for behavior in BEHAVIOR_NAMES:
        positives = [row for row in rows if row["predicted"][behavior]]
        right = sum(row["labels"][behavior] for row in positives)
        low, high = wilson(right, len(positives))
        precision = right / len(positives) if positives else 0.0
        print(f"| {behavior} | {len(positives)} | {right} | {precision:.2f} | [{low:.2f}, {high:.2f}] |")
    drawn = [row for row in rows if row["picked_for"] == ["random"]]
    print(f"\nAmong the {len(drawn)} texts drawn at random (not picked for a label): recall of the classifier")
    for behavior in BEHAVIOR_NAMES:
        gold = [row for row in drawn if row["labels"][behavior]]
        found = sum(row["predicted"][behavior] for row in gold)
        print(f"  {behavior}: {found} of {len(gold)} present")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    pick = commands.add_parser("select")
    pick.add_argument("--pool", type=Path, required=True)
    pick.add_argument("--classifier", default="cues_v5")
    pick.add_argument("--per-behavior", type=int, default=60)
    pick.add_argument("--out", type=Path, required=True)
    pick.add_argument("--items", type=Path, default=ITEMS)
    read = commands.add_parser("score")
    read.add_argument("--labels", type=Path, default=ITEMS.parent / "labels.jsonl")
    args = parser.parse_args(argv)
    if args.command == "select":
        select(args.pool, args.classifier, args.per_behavior, args.out, args.items)
    else:
        score(args.labels)


if __name__ == "__main__":
    main()

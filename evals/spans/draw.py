"""Draw the texts of the span read: labeled texts whose behavior instances readers quote.

    python evals/spans/draw.py [--per-genre 60] [--seed 20261206]

Writes ``evals/spans/items.jsonl`` (one locator per text: the labeled set and item id it comes from, its genre and
the SHA-256 prefix of its text; no text) and ``/tmp/spans/reading.jsonl`` (``{"id", "text"}``: the readers' only
input). Texts come from every labeled set (evals/devset, evals/heldout, evals/blindset and its rounds and precision
reads), grouped by genre so that a figure can leave one genre out. Within a genre the draw is seeded and
stratified: up to a quarter of the quota per behavior from texts labeled with it (rare behaviors first, so that
backward chaining is not crowded out), the rest from texts labeled with none, so that readers also quote in texts a
document label calls empty. Readers never see the document labels, the selection or any classifier output.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.cue_accuracy import LABELS, load_blindset, load_items  # noqa: E402
from curate.behaviors import BEHAVIOR_NAMES  # noqa: E402

HERE = Path(__file__).resolve().parent
PRECISION_READS = ("precision", "precision2", "precision3", "precision4")
# Genre by the first folder of a text's source: what a leave-one-genre-out figure holds out together.
GENRES = {"countdown": "countdown", "longcot_skythought": "long_model_trace", "stackexchange_math": "forum",
          "prm800k": "short_model_step", "gsm8k": "worked_solution", "aqua": "mcqa_rationale",
          "llm_adapters": "mcqa_rationale"}
# Rare behaviors first: a text counts towards the first of its behaviors in this order.
RARITY_ORDER = ("backward_chaining", "backtracking", "verification", "subgoal_setting")


def genre_of(source: str) -> str:
    return GENRES[source.split("/")[0]]


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def labeled_items() -> list[dict]:
    items = []
    for name in LABELS:
        items += [{**item, "set": name} for item in load_items(name)]
    for name in PRECISION_READS:
        items += [{**item, "set": name} for item in load_blindset(None, HERE.parent / "blindset" / name / "labels.jsonl")]
    seen, unique = set(), []
    for item in items:  # one text labeled in two sets is read once
        key = digest(item["text"])
        if key not in seen:
            seen.add(key)
            unique.append(item)
    return unique


def draw(items: list[dict], per_genre: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    chosen = []
    for genre in sorted(set(GENRES.values())):
        pool = [item for item in items if genre_of(item["source"]) == genre]
        rng.shuffle(pool)
        picked: list[dict] = []
        for behavior in RARITY_ORDER:
            with_it = [item for item in pool if item["labels"][behavior] and item not in picked]
            picked += with_it[: per_genre // 4]
        empty = [item for item in pool if not any(item["labels"].values())]
        picked += empty[: max(0, per_genre - len(picked))]
        chosen += picked[:per_genre]
    rng.shuffle(chosen)
    return chosen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--per-genre", type=int, default=60)
    parser.add_argument("--seed", type=int, default=20261206)
    parser.add_argument("--reading", type=Path, default=Path("/tmp/spans/reading.jsonl"))
    args = parser.parse_args()
    chosen = draw(labeled_items(), args.per_genre, args.seed)
    args.reading.parent.mkdir(parents=True, exist_ok=True)
    with open(HERE / "items.jsonl", "w") as items_out, open(args.reading, "w") as reading_out:
        for n, item in enumerate(chosen, 1):
            span_id = f"sp-{n:04d}"
            items_out.write(json.dumps({"id": span_id, "set": item["set"], "item_id": item["id"],
                                        "source": item["source"], "genre": genre_of(item["source"]),
                                        "sha256": digest(item["text"])}) + "\n")
            reading_out.write(json.dumps({"id": span_id, "text": item["text"]}) + "\n")
    print(f"{len(chosen)} texts -> {HERE / 'items.jsonl'} and {args.reading}", file=sys.stderr)


if __name__ == "__main__":
    main()

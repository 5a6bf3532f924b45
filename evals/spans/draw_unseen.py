"""Draw the unseen-source read: MATH-500's reference solutions (competition solutions), a source no classifier
here trained on, for readers to quote each behavior instance in.

    python evals/spans/draw_unseen.py [--count 160] [--seed 20261207]

No labeled text of evals/ and no text written here comes from `../shared/data/math500`; the long model traces of
`longcot_skythought` answer the same problems, so a solution that shares a word 8-gram with any labeled or written
text is left out (the figure must not score a near-duplicate of a training text). The draw is seeded and plain
random, with no look at the texts' behaviors: `--count` texts form the "dev" part (compared candidates and had
their errors read), every other solution the "test" part (drawn after the dev part was read, so that no look at it
shaped a model; scored once, after the model is written). Writes ``evals/spans/unseen/items.jsonl`` (locators: the
part, the file, the problem's ``unique_id`` and the SHA-256 prefix of the text; no text) and
``/tmp/unseen/reading_<part>.jsonl`` (``{"id", "text"}``: the readers' only input).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from evals.devset.resolve import shared_data_dir
from evals.spans.draw import digest, labeled_items

HERE = Path(__file__).resolve().parent
UNSEEN = HERE / "unseen"
SOURCE = "math500/test.jsonl"
GENRE = "competition_solution"


def solutions() -> dict[str, str]:
    """unique_id -> reference solution of MATH-500."""
    rows = map(json.loads, (shared_data_dir(None) / SOURCE).read_text().splitlines())
    return {row["unique_id"]: row["solution"] for row in rows}


def resolve(items: list[dict]) -> dict[str, str]:
    """Read id -> text, checked against the digest its locator keeps."""
    by_key, texts = solutions(), {}
    for item in items:
        text = by_key[item["unique_id"]]
        if digest(text) != item["sha256"]:
            raise SystemExit(f"{item['id']}: {SOURCE} changed since the draw (digest {digest(text)})")
        texts[item["id"]] = text
    return texts


def main() -> None:
    from bench.train_spans import word_shingles, written_texts

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=160)
    parser.add_argument("--seed", type=int, default=20261207)
    args = parser.parse_args()
    known = [item["text"] for item in labeled_items()] + [item["text"] for item in written_texts()[0]]
    seen = set().union(*map(word_shingles, known))
    pool = sorted((key, text) for key, text in solutions().items() if not word_shingles(text) & seen)
    print(f"{len(pool)} of {len(solutions())} solutions share no word 8-gram with a labeled or written text",
          file=sys.stderr)
    dev = random.Random(args.seed).sample(pool, args.count)
    test = [entry for entry in pool if entry not in dev]
    random.Random(args.seed + 1).shuffle(test)
    UNSEEN.mkdir(exist_ok=True)
    reading = Path("/tmp/unseen")
    reading.mkdir(exist_ok=True)
    with open(UNSEEN / "items.jsonl", "w") as items:
        for part, chosen, first in (("dev", dev, 1), ("test", test, len(dev) + 1)):
            with open(reading / f"reading_{part}.jsonl", "w") as texts:
                for n, (key, text) in enumerate(chosen, first):
                    read_id = f"un-{n:04d}"
                    items.write(json.dumps({"id": read_id, "part": part, "source": SOURCE, "unique_id": key,
                                            "genre": GENRE, "sha256": digest(text)}) + "\n")
                    texts.write(json.dumps({"id": read_id, "text": text}) + "\n")


if __name__ == "__main__":
    main()

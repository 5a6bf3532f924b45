"""Write the texts and labels a shipped n-gram model was trained on, as JSON lines `curate adapt --shipped-labels`
reads ({"id", "set", "text", "labels"}): the user's labels then refit the heads beside the shipped ones.

    python bench/training_labels.py --version v1 -o shipped_v1.jsonl

The sets are bench/train_cues_ngram.py's (what cues_ngram_v1 / v2 were trained on); their texts come from evals/ and
the shared data the blind rounds point at.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.train_cues_ngram import NOT_TRAINED_ON, labeled_texts
from curate.behaviors import BEHAVIOR_NAMES
from curate.files import atomic_open


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", choices=sorted(NOT_TRAINED_ON), default="v1")
    parser.add_argument("-o", "--output", type=Path, required=True)
    args = parser.parse_args()
    items = labeled_texts(args.version)
    with atomic_open(args.output) as sink:
        for item in items:
            labels = {b: int(item["labels"][b]) for b in BEHAVIOR_NAMES}
            sink.write(json.dumps({"id": item["id"], "set": item["set"], "text": item["text"], "labels": labels},
                                  ensure_ascii=False) + "\n")
    print(f"wrote {len(items):,} labeled texts of cues_ngram_{args.version}'s training to {args.output}")


if __name__ == "__main__":
    main()

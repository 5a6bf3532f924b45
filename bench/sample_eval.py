"""Agreement of a classifier with the behaviors the sample corpus's authors wrote into each document.

    python bench/sample_eval.py [--classifier cues]

The sample corpus (curate/sample_data/corpus) records `intended_behaviors` per document. It was written for
this project with deliberately varied phrasing, so it measures how far the cues generalise beyond the
dev set; presence is count >= 1.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.cue_accuracy import scores  # noqa: E402
from curate.behaviors import BEHAVIOR_NAMES  # noqa: E402
from curate.classifiers import get_classifier  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--classifier", default="cues")
    args = parser.parse_args()
    docs = [json.loads(line) for f in sorted((ROOT / "curate/sample_data/corpus").glob("*.jsonl")) for line in f.open()]
    labels = get_classifier(args.classifier).classify([d["text"] for d in docs])
    print(f"classifier {args.classifier}: {len(docs)} sample documents\n")
    print("| behavior | positives | precision | recall | F1 |\n|---|---|---|---|---|")
    for b in BEHAVIOR_NAMES:
        pairs = [(int(b in d["intended_behaviors"]), int((l.counts[b] or 0) > 0)) for d, l in zip(docs, labels)]
        p, r, f, n = scores(pairs)
        print(f"| {b} | {n} | {p:.2f} | {r:.2f} | {f:.2f} |")


if __name__ == "__main__":
    main()

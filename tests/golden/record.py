"""Golden labels: what each released in-process classifier says about a fixed corpus, so that a change to any
released version's output fails a test (tests/classifiers/test_golden.py) instead of silently moving the inputs of
every model trained on it.

`corpus.jsonl` holds 60 texts copied, not referenced, so that moving or editing their origin cannot move the
goldens: every 10th text of curate/sample_data/corpus (30) and 3 Countdown traces (a small-model, a strong-model and
a near-miss one) from each of ten blind-set draws under evals/blindset (30); each row's `origin` says where it was
copied from.

Record the golden file of a NEW version (refuses to overwrite one that exists, since a released version must not
change; --force only for a version that was never released):

    .venv/bin/python -m tests.golden.record cues_v13
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

GOLDEN_DIR = Path(__file__).resolve().parent
CORPUS = GOLDEN_DIR / "corpus.jsonl"
# Scores are stored to this many decimals and compared with SCORE_TOLERANCE, so that a last-bit difference between
# BLAS builds is not read as a changed version while any real change to a head or a feature still is.
SCORE_DECIMALS = 4
SCORE_TOLERANCE = 1e-3

# Registered classifiers that cannot label this corpus in process on CPU, with the tests that cover them instead.
NOT_GOLDEN = {
    "llm_v1": "asks a model server (tests/classifiers/test_llm_classifier.py serves a tiny model)",
    "cascade_v1": "asks a model server behind its cue gate (tests/classifiers/test_llm_classifier.py)",
    "llm_spans_v1": "asks a model server for quotes (tests/classifiers/test_llm_spans.py serves a stand-in and a tiny "
                    "model)",
    "distilled_v1": "needs a user's model directory (tests/classifiers/test_distilled.py trains one)",
    "user_ngram_v1": "needs a user's model directory written by curate adapt (tests/review/test_adapt.py)",
}


def golden_path(name: str) -> Path:
    return GOLDEN_DIR / f"{name}.json"


def read_corpus() -> list[dict]:
    return [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines()]


def _rounded(score: float | None) -> float | None:
    return None if score is None else round(float(score), SCORE_DECIMALS)


def golden_output(name: str) -> dict:
    """The classifier `name`'s labels of the golden corpus, as plain JSON: counts, evidence spans, rounded scores."""
    from curate.classifiers import get_classifier

    classifier = get_classifier(name)
    corpus = read_corpus()
    labels = classifier.classify([row["text"] for row in corpus])
    return {
        "classifier": name,
        "prompt_version": classifier.prompt_version,
        "labels": [
            {
                "id": row["id"],
                "counts": label.counts,
                "evidence": [[e.behavior, e.start, e.end, _rounded(getattr(e, "score", None))] for e in label.evidence],
                "scores": None if label.scores is None else {b: _rounded(s) for b, s in label.scores.items()},
                "error": label.error,
            }
            for row, label in zip(corpus, labels, strict=True)
        ],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write a new classifier version's golden labels.")
    parser.add_argument("names", nargs="+", help="registered classifier names, e.g. cues_v13")
    parser.add_argument("--force", action="store_true",
                        help="overwrite an existing golden file (only for a version never released)")
    args = parser.parse_args(argv)
    for name in args.names:
        path = golden_path(name)
        if path.exists() and not args.force:
            print(f"{path} exists: a released version's labels must not change; pass --force only if {name} "
                  "was never released", file=sys.stderr)
            return 2
        path.write_text(json.dumps(golden_output(name), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Precision and recall of the MCQA -> open-answer filter on the hand-labeled set.

    .venv/bin/python bench/mcqa_precision.py [--data ../shared/data] [--show-errors]

precision: kept items that are truly convertible (stem stands alone, gold is gradable) and whose
           converted answer verifies against the hand-written open answer
recall:    convertible items that were kept with such an answer
Labels: evals/mcqa_labels/labels.jsonl (ids only, read by hand from the files below).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from curate.builders.mcqa import Converted, convert_bounded, read_items  # noqa: E402
from curate.rewards.equivalence import parse_latex, verify_parsed  # noqa: E402

SOURCES = ["llm_adapters/mathqa_test.json", "mmlu_stem_qwen/test.jsonl", "mmlu_math/*_val.csv", "mmlu_math/*_dev.csv",
           "llm_adapters/arc_challenge_train.json"]


def evaluate(data: Path, labels_path: Path) -> dict:
    labels = {r["id"]: r for r in map(json.loads, labels_path.read_text().splitlines())}
    results = {}
    for pattern in SOURCES:
        for item in read_items(str(data / pattern)):
            if item.id in labels:
                results[item.id] = convert_bounded(item)
    missing = sorted(set(labels) - set(results))
    kept = correct_kept = convertible = 0
    errors = []
    for item_id, label in labels.items():
        result = results.get(item_id)
        is_kept = isinstance(result, Converted)
        right = bool(is_kept and label["convertible"] and verify_parsed(parse_latex(label["answer"]), parse_latex(result.answer)))
        kept += is_kept
        correct_kept += right
        convertible += label["convertible"]
        if is_kept and not right:
            errors.append(("false keep", item_id, result.answer, label["note"]))
        elif label["convertible"] and not is_kept:
            errors.append(("missed", item_id, getattr(result, "reason", "not read"), label["note"]))
    suspect_kept = sum(1 for i, l in labels.items() if l["gold_suspect"] and isinstance(results.get(i), Converted))
    return {
        "labeled": len(labels), "convertible": convertible, "kept": kept, "kept_correct": correct_kept,
        "precision": correct_kept / kept if kept else float("nan"),
        "recall": correct_kept / convertible if convertible else float("nan"),
        "kept_with_suspect_gold": suspect_kept, "missing_ids": missing, "errors": errors,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--labels", type=Path, default=ROOT / "evals" / "mcqa_labels" / "labels.jsonl")
    parser.add_argument("--show-errors", action="store_true")
    args = parser.parse_args()
    started = time.perf_counter()
    r = evaluate(args.data, args.labels)
    print(f"labeled items        {r['labeled']}")
    print(f"truly convertible    {r['convertible']}")
    print(f"kept                 {r['kept']}  (correct {r['kept_correct']})")
    print(f"precision            {r['precision']:.3f}   target >= 0.95")
    print(f"recall               {r['recall']:.3f}   target >= 0.70")
    print(f"kept, gold suspect   {r['kept_with_suspect_gold']}  (source gold looks wrong; counted as convertible)")
    if r["missing_ids"]:
        print(f"labeled ids not found in the data: {r['missing_ids']}")
    print(f"seconds              {time.perf_counter() - started:.1f}")
    if args.show_errors:
        for kind, item_id, what, note in r["errors"]:
            print(f"  {kind:10s} {item_id:45s} {what[:70]!s:70s} {note}")


if __name__ == "__main__":
    main()

"""Precision of `curate mcqa` on a read sample: 100 kept items per local source (all if fewer), read by hand.

    .venv/bin/python bench/mcqa_read_sample.py [--data ../shared/data]            # precision per source
    .venv/bin/python bench/mcqa_read_sample.py --dump /tmp/sample.jsonl          # the sample, to read (not in the repo)

The sample: every source is converted as `curate mcqa` converts it; the kept items are ordered by locator and
100 are drawn with random.Random(f"{SEED}:{source}"). The judgments, one per sampled item, are in
bench/mcqa_read_sample.jsonl (source, file, row, verdict, reason; no question text, the data's licenses).
An item is `ok` when its stem alone asks a well-posed question answerable without the options (no constant
the stem never gives, no "which of the following") AND its emitted answer is the correct answer, in a form a
solver's answer can be matched against. `bad` otherwise; the reason says which. `bad_gold` marks an item whose
source key is wrong (the conversion is faithful, the row is still a verifier error).

Precision = ok / judged, with a Wilson 95 % interval. The judgments were made against the builder at the
commit named in the file's first line; the figure is shown for all judged items and for those still kept now
(a structural rule added after the reading removes items, never adds them).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from curate.builders.mcqa import Converted, convert_bounded, read_items  # noqa: E402

SEED = 0
SAMPLE = 100
JUDGMENTS = ROOT / "bench" / "mcqa_read_sample.jsonl"
SOURCES = {
    "aqua": ["aqua/dev.json", "aqua/test.json"],
    "mathqa": ["llm_adapters/mathqa_test.json"],
    "mmlu_math": ["mmlu_math"],
    "mmlu_stem": ["mmlu_stem_qwen/test.jsonl"],
    "aqua_rationales": ["llm_adapters/aqua_test_with_model_rationales.json"],
    "arc": ["llm_adapters/arc_challenge_test.json", "llm_adapters/arc_challenge_train.json"],
}


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    if n == 0:
        return float("nan"), float("nan")
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


def locator(item_id: str) -> tuple[str, int]:
    source, _, row = item_id.rpartition(":")
    return source, int(row)


def kept_items(data: Path, name: str) -> tuple[int, list[tuple[Converted, object]]]:
    """(items read, [(converted, original item)]) for one source."""
    total, kept = 0, []
    for pattern in SOURCES[name]:
        for item in read_items(str(data / pattern)):
            total += 1
            result = convert_bounded(item)
            if isinstance(result, Converted):
                kept.append((result, item))
    kept.sort(key=lambda pair: locator(pair[0].id))
    return total, kept


def sample(kept: list, name: str) -> list:
    if len(kept) <= SAMPLE:
        return list(kept)
    return sorted(random.Random(f"{SEED}:{name}").sample(kept, SAMPLE), key=lambda pair: locator(pair[0].id))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--dump", type=Path, help="write the sample with its text here, to read")
    parser.add_argument("--judgments", type=Path, default=JUDGMENTS)
    args = parser.parse_args()
    started = time.perf_counter()
    judged: dict[tuple[str, int], dict] = {}
    if args.judgments.exists() and not args.dump:
        for line in args.judgments.read_text().splitlines()[1:]:
            row = json.loads(line)
            judged[(row["file"], row["row"])] = row
    dump = args.dump.open("w") if args.dump else None
    print(f"{'source':16s} {'read':>6s} {'kept':>6s} {'sampled':>7s} {'ok':>4s} {'precision':>9s}  Wilson 95 %")
    for name in SOURCES:
        total, kept = kept_items(args.data, name)
        drawn = sample(kept, name)
        if dump:
            for converted, item in drawn:
                file, row = locator(converted.id)
                dump.write(json.dumps({"source": name, "file": file, "row": row, "stem": item.question,
                                       "options": item.options, "gold": item.gold_letter,
                                       "question": converted.question, "answer": converted.answer,
                                       "answer_type": converted.answer_type}) + "\n")
            print(f"{name:16s} {total:6d} {len(kept):6d} {len(drawn):7d}")
            continue
        # The judged sample was drawn from the kept items when it was judged; the items of it that are still
        # kept are a uniform sample of today's kept items (a rule only removes items), so both figures are shown.
        still = {locator(c.id) for c, _ in kept}
        rows = [r for r in judged.values() if r["source"] == name]
        for label, subset in (("judged", rows), ("still kept", [r for r in rows if (r["file"], r["row"]) in still])):
            ok = sum(r["verdict"] == "ok" for r in subset)
            lo, hi = wilson(ok, len(subset))
            print(f"{name:16s} {total:6d} {len(kept):6d} {len(subset):7d} {ok:4d} "
                  f"{ok / len(subset) if subset else float('nan'):9.3f}  [{lo:.3f}, {hi:.3f}]  {label}")
    print(f"seconds {time.perf_counter() - started:.0f}")


if __name__ == "__main__":
    main()

"""Documents/s of `dedup` and `decontam` on ~40 MB of real text vs a bare datatrove read -> write of the same input.

The text is the shared data (Stack Exchange threads, Sky-T1 traces, GSM8K, MATH-500, AQuA), copied until the
corpus reaches the target size; copies after the first carry a numbered prefix, so they are near duplicates.

    .venv/bin/python bench/dedup_report.py [--shared ../shared/data] [--mb 40] [--tasks 2]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from datatrove.executor import LocalPipelineExecutor
from datatrove.pipeline.readers import JsonlReader
from datatrove.pipeline.writers import ParquetWriter

from curate.pipelines.decontam import decontaminate
from curate.pipelines.dedup import dedup


def real_texts(shared: Path) -> list[str]:
    texts = []
    for path in sorted((shared / "stackexchange_math").glob("*.jsonl")):
        for line in path.open():
            t = json.loads(line)
            texts.append("\n\n".join([t["question"]["title"], t["question"]["body_text"], *(a["body_text"] for a in t["answers"])]))
    for path in sorted((shared / "longcot_skythought").glob("*.jsonl")):
        texts += [json.loads(line)["code"][0] for line in path.open()]
    for name in ("train.jsonl", "example_model_solutions.jsonl"):
        texts += [(lambda r: r["question"] + "\n" + r.get("answer", r.get("ground_truth", "")))(json.loads(line))
                  for line in (shared / "gsm8k" / name).open()]
    texts += [json.loads(line)["problem"] + "\n" + json.loads(line)["solution"] for line in (shared / "math500" / "test.jsonl").open()]
    return texts


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--shared", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data")
    parser.add_argument("--mb", type=float, default=40)
    parser.add_argument("--tasks", type=int, default=2)
    args = parser.parse_args()
    texts = real_texts(args.shared)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        (tmp / "corpus").mkdir()
        size, n, copy = 0, 0, 0
        files = [(tmp / "corpus" / f"part{i}.jsonl").open("w") for i in range(args.tasks)]
        while size < args.mb * 1e6:
            for text in texts:
                text = text if copy == 0 else f"[copy {copy}] {text}"
                line = json.dumps({"id": f"d{n}", "text": text}) + "\n"
                files[n % args.tasks].write(line)
                size += len(line.encode())
                n += 1
            copy += 1
        for f in files:
            f.close()
        print(f"corpus: {n:,} documents, {size / 1e6:.1f} MB, {len(texts):,} distinct real texts, {args.tasks} tasks")

        started = time.perf_counter()
        LocalPipelineExecutor(
            pipeline=[JsonlReader(str(tmp / "corpus")), ParquetWriter(str(tmp / "bare"))],
            tasks=args.tasks, workers=args.tasks, logging_dir=str(tmp / "bare_logs"),
        ).run()
        bare = time.perf_counter() - started

        started = time.perf_counter()
        d = dedup(tmp / "corpus", tmp / "dedup", tasks=args.tasks, workers=args.tasks, progress=False)
        dedup_s = time.perf_counter() - started

        started = time.perf_counter()
        c = decontaminate(tmp / "corpus", tmp / "decontam", "gsm8k,math500,aqua,mmlu_stem", benchmarks_dir=args.shared,
                          tasks=args.tasks, workers=args.tasks, progress=False)
        decontam_s = time.perf_counter() - started

    print(f"{'step':<28}{'seconds':>10}{'documents/s':>14}{'MB/s':>8}")
    for name, seconds in (("datatrove read -> write", bare), ("dedup (exact + MinHash)", dedup_s),
                          ("decontam (13-grams, 4 sets)", decontam_s)):
        print(f"{name:<28}{seconds:>10.1f}{n / seconds:>14,.0f}{size / 1e6 / seconds:>8.2f}")
    print(f"dedup: {d.exact_removed:,} exact + {d.near_removed:,} near duplicates removed, {d.kept:,} kept")
    print(f"decontam: {c.removed:,} removed {c.hits}")


if __name__ == "__main__":
    main()

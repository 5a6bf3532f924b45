"""Throughput and memory of `tag --classifier cues` against a bare datatrove read -> write of the same input.

    python bench/tag_throughput.py [--mb 2] [--workers 1]

The corpus is real text from ../shared/data (Stack Exchange posts, PRM800K steps, Sky-T1 traces, GSM8K
solutions), repeated and shuffled to the requested size. Each measurement runs in a fresh process so
its peak RSS is its own. Targets: tag/bare throughput ratio >= 0.5; peak RSS at 10x <= 1.2 x peak RSS at 1x.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("CURATE_SHARED_DATA", ROOT.parent / "shared" / "data"))


def real_texts() -> list[str]:
    import pyarrow.parquet as pq

    texts = []
    for path in sorted((SHARED / "stackexchange_math").glob("*.jsonl")):
        for line in path.open():
            thread = json.loads(line)
            texts.append(thread["question"]["body_text"])
            texts += [a["body_text"] for a in thread["answers"]]
    texts += [r for r in pq.read_table(SHARED / "prm800k/phase1_test.stepwise-critic.parquet", columns=["next_response"]).column(0).to_pylist() if r]
    for path in sorted((SHARED / "longcot_skythought").glob("*.jsonl")):
        texts += [json.loads(line)["code"][0] for line in path.open()]
    texts += [json.loads(line)["answer"] for line in (SHARED / "gsm8k/test_socratic.jsonl").open()]
    return [t for t in texts if t and t.strip()]


def make_corpus(folder: Path, megabytes: float, texts: list[str], seed: int = 0) -> tuple[int, int]:
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    target, written, docs, shard = megabytes * 1e6, 0, 0, 0
    handle = (folder / "part-000.jsonl").open("w")
    while written < target:
        order = texts[:]
        rng.shuffle(order)
        for text in order:
            line = json.dumps({"id": f"doc-{docs}", "text": text}) + "\n"
            handle.write(line)
            written += len(text.encode())
            docs += 1
            if docs % 20000 == 0:
                handle.close()
                shard += 1
                handle = (folder / f"part-{shard:03d}.jsonl").open("w")
            if written >= target:
                break
    handle.close()
    return docs, written


def child(mode: str, corpus: str, out: str, workers: int) -> None:
    """Runs one measurement in this process and prints seconds."""
    started = time.perf_counter()
    if mode == "bare":
        from datatrove.executor import LocalPipelineExecutor
        from datatrove.pipeline.readers import JsonlReader
        from datatrove.pipeline.writers import JsonlWriter

        LocalPipelineExecutor(
            [JsonlReader(corpus), JsonlWriter(out)], tasks=workers, workers=workers, logging_dir=out + "/_logs"
        ).run()
    else:
        from curate.pipelines.readers import InputSpec
        from curate.pipelines.tag import run_tagging

        run_tagging(InputSpec(path=corpus), out, "cues", tasks=workers, workers=workers, progress=False)
    print(json.dumps({"seconds": time.perf_counter() - started}))


def measure(mode: str, corpus: Path, workers: int) -> dict:
    with tempfile.TemporaryDirectory() as out:
        code = (f"import sys; sys.path.insert(0, {str(ROOT)!r}); from bench.tag_throughput import child; "
                f"child({mode!r}, {str(corpus)!r}, {out!r}, {workers})")
        script = f"import resource, subprocess, sys, json; p = subprocess.run([sys.executable, '-c', {code!r}], capture_output=True, text=True); " \
                 "print(p.stdout.strip().splitlines()[-1] if p.returncode == 0 else 'ERR ' + p.stderr[-2000:]); " \
                 "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
        lines = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True).stdout.strip().splitlines()
        if lines[0].startswith("ERR"):
            raise RuntimeError(lines[0])
        return {"seconds": json.loads(lines[0])["seconds"], "peak_rss_mb": int(lines[1]) / 1024}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=float, default=2.0, help="size of the 1x corpus in MB of text")
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args()
    if not SHARED.is_dir():
        sys.exit(f"shared data not found at {SHARED}")
    texts = real_texts()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for scale in (1, 10):
            corpus = Path(tmp) / f"corpus{scale}"
            docs, size = make_corpus(corpus, args.mb * scale, texts)
            for mode in ("bare", "cues"):
                result = measure(mode, corpus, args.workers)
                rows.append({"scale": scale, "mode": mode, "docs": docs, "mb": size / 1e6, **result})
    print(f"corpus: {len(texts)} real texts from {SHARED}, repeated and shuffled; workers={args.workers}\n")
    print("| input | step | documents | MB | seconds | documents/s | MB/s | peak RSS MB |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['scale']}x | {'datatrove read->write' if r['mode'] == 'bare' else 'tag --classifier cues'} | "
              f"{r['docs']:,} | {r['mb']:.1f} | {r['seconds']:.1f} | {r['docs'] / r['seconds']:,.0f} | "
              f"{r['mb'] / r['seconds']:.2f} | {r['peak_rss_mb']:.0f} |")
    by = {(r["scale"], r["mode"]): r for r in rows}
    for scale in (1, 10):
        ratio = (by[scale, "cues"]["mb"] / by[scale, "cues"]["seconds"]) / (by[scale, "bare"]["mb"] / by[scale, "bare"]["seconds"])
        print(f"\nthroughput ratio tag/bare at {scale}x: {ratio:.3f} (target >= 0.5)")
    growth = by[10, "cues"]["peak_rss_mb"] / by[1, "cues"]["peak_rss_mb"]
    print(f"peak RSS of tag, 10x / 1x: {growth:.2f} (target <= 1.2)")


if __name__ == "__main__":
    main()

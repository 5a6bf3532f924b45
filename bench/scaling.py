"""Scaling of `curate tag` (cues classifier): documents/s with 1 and 2 local workers, Ray against local
on the same input, and peak RSS of the whole process tree as the input grows.

    .venv/bin/python bench/scaling.py --files 8 --per-file 4000 [--ray]

Each measurement is a fresh `curate tag` subprocess into a fresh output directory, so nothing is
skipped as already done; peak RSS is sampled from the process tree every 50 ms.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def write_corpus(folder: Path, files: int, per_file: int) -> int:
    from tests.test_scale import sample_texts

    texts = sample_texts()
    folder.mkdir(parents=True)
    for f in range(files):
        with (folder / f"part-{f:03d}.jsonl").open("w") as out:
            for i in range(per_file):
                out.write(json.dumps({"id": f"{f}-{i}", "text": texts[(f * per_file + i) % len(texts)]}) + "\n")
    return files * per_file


def run(corpus: Path, out: Path, tasks: int, workers: int, executor: str) -> tuple[float, float]:
    command = [sys.executable, "-m", "curate.cli", "tag", "--input", str(corpus), "--output", str(out),
               "--tasks", str(tasks), "--workers", str(workers), "--executor", executor]
    started = time.perf_counter()
    process = psutil.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    peak = 0
    stop = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not stop.is_set():
            try:
                tree = [process, *process.children(recursive=True)]
                peak = max(peak, sum(p.memory_info().rss for p in tree if p.is_running()))
            except psutil.Error:
                pass
            time.sleep(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    _, stderr = process.communicate()
    stop.set()
    sampler.join()
    if process.returncode != 0:
        raise SystemExit(f"curate tag failed:\n{stderr.decode()[-3000:]}")
    return time.perf_counter() - started, peak / 2**20


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--per-file", type=int, default=4000)
    parser.add_argument("--ray", action="store_true", help="also time --executor ray")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        n = write_corpus(tmp / "corpus", args.files, args.per_file)
        print(f"corpus: {args.files} files, {n:,} documents")
        seconds = {}
        for workers in (1, 2):
            seconds[workers], rss = run(tmp / "corpus", tmp / f"w{workers}", args.files, workers, "local")
            print(f"local, {workers} worker(s): {seconds[workers]:.1f} s, {n / seconds[workers]:,.0f} docs/s, peak RSS {rss:,.0f} MiB")
        print(f"speed-up 2 vs 1 workers: {seconds[1] / seconds[2]:.2f}x (target >= 1.7x)")
        if args.ray:
            ray_s, rss = run(tmp / "corpus", tmp / "ray", args.files, 2, "ray")
            print(f"ray, 2 workers: {ray_s:.1f} s, peak RSS {rss:,.0f} MiB; overhead vs local: "
                  f"{100 * (ray_s / seconds[2] - 1):+.0f} % (target <= 15 %)")
        for scale in (1, 4):
            corpus = tmp / f"rss{scale}"
            m = write_corpus(corpus, 2, args.per_file * scale)
            s, rss = run(corpus, tmp / f"rss-out{scale}", 2, 1, "local")
            print(f"RSS check: {m:,} documents, 1 worker: peak RSS {rss:,.0f} MiB ({s:.1f} s)")


if __name__ == "__main__":
    main()

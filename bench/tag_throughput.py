"""Throughput and memory of `tag --classifier cues` against a bare datatrove read -> write of the same input.

    python bench/tag_throughput.py [--mb 4] [--rounds 3]

The corpus is real text from ../shared/data (Stack Exchange posts, PRM800K steps, Sky-T1 traces, GSM8K
solutions), repeated and shuffled to the requested size. Every measurement is a whole process (`curate tag`
as a user runs it, start-up included, against a bare datatrove jsonl read -> write of the same files), so its
peak RSS is its own; the rounds alternate them, and medians are printed. Targets: tag/bare throughput ratio
>= 0.5 (goal 0.7); peak RSS at 10x <= 1.2 x peak RSS at 1x; `curate tag` on a tiny input done in < 2 s (and
`curate --help`, which loads no pipeline). Last, in this process: where classify's time goes (cProfile of the
classifier `curate tag` runs, on a warm vocabulary as in a long run), and cues_v3's classify with and without the
prefilter (the gain of prefilter.py alone).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
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


def run_process(argv: list[str]) -> dict:
    """Runs a whole process (interpreter start-up and imports included) and reports its wall time and peak RSS."""
    script = ("import resource, subprocess, sys, time; t = time.perf_counter(); "
              "p = subprocess.run(sys.argv[1:], capture_output=True, text=True); s = time.perf_counter() - t; "
              "print(p.returncode, s, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); "
              "sys.stderr.write(p.stderr[-2000:] if p.returncode else '')")
    done = subprocess.run([sys.executable, "-c", script, *argv], check=False, capture_output=True, text=True)
    code, seconds, rss = done.stdout.split()
    if code != "0":
        raise RuntimeError(f"{argv} exited {code}: {done.stderr}")
    return {"seconds": float(seconds), "peak_rss_mb": int(rss) / 1024}


BARE = ("import sys; from datatrove.executor import LocalPipelineExecutor; "
        "from datatrove.pipeline.readers import JsonlReader; from datatrove.pipeline.writers import JsonlWriter; "
        "LocalPipelineExecutor([JsonlReader(sys.argv[1]), JsonlWriter(sys.argv[2])], tasks=1, workers=1, "
        "logging_dir=sys.argv[2] + '/_logs').run()")


def measure(mode: str, corpus: Path) -> dict:
    """One whole process over `corpus`: `curate tag --classifier cues`, or datatrove's bare jsonl read -> write."""
    curate = str(Path(sys.executable).parent / "curate")
    with tempfile.TemporaryDirectory() as out:
        if mode == "bare":
            return run_process([sys.executable, "-c", BARE, str(corpus), out])
        return run_process([curate, "tag", "--input", str(corpus), "--output", out, "--classifier", "cues"])


def sample_of(texts: list[str], megabytes: float, seed: int) -> tuple[list[str], float]:
    rng = random.Random(seed)
    sample, size = [], 0
    while size < megabytes * 1e6:
        sample.append(rng.choice(texts))
        size += len(sample[-1].encode())
    return sample, size / 1e6


# Where classify's time goes, by the functions that do each part (cumulative time, so callees are included).
PARTS = (
    ("prefilter (the places a cue may count, on the raw text)", "prefilter.py", "select"),
    ("spaCy tokenizer", "language.py", "pipe"),
    ("matchers (PhraseMatcher, anchored Matchers)", "cues.py", "_matches"),
    ("sentence marking", "cues.py", "mark_sentences"),
    ("context rules", "cues.py", "_accept"),
)


def profile(texts: list[str], megabytes: float) -> dict:
    """cProfile of the classifier `curate tag --classifier cues` runs, over real texts, its vocabulary first warmed
    on other texts (a fresh one spends a sixth of the tokenizer's time creating lexemes, which a long run does not)."""
    import cProfile
    import pstats

    from curate.classifiers.base import get_classifier, resolve_name

    classifier = get_classifier("cues")
    classifier.classify(sample_of(texts, megabytes / 2, seed=3)[0])
    sample, size = sample_of(texts, megabytes, seed=2)
    profiler = cProfile.Profile()
    profiler.enable()
    classifier.classify(sample)
    profiler.disable()
    stats = pstats.Stats(profiler).stats
    total = max(ct for (_, _, name), (_, _, _, ct, _) in stats.items() if name == "classify")
    parts = {label: sum(ct for (path, _, name), (_, _, _, ct, _) in stats.items()
                        if path.endswith(file) and name == function)
             for label, file, function in PARTS}
    parts["other (chunking, counting, evidence)"] = total - sum(parts.values())
    return {"classifier": resolve_name("cues")[0], "mb": size, "seconds": total, "parts": parts}


def prefilter_gain(texts: list[str], megabytes: float) -> dict:
    """In this process: cues_v3's classify over the same texts with and without the prefilter (no I/O), in CPU
    seconds (the machine may be shared), and whether the labels are the same."""
    from curate.classifiers.cue_rules import read_version
    from curate.classifiers.cues import CueClassifier

    sample, size = sample_of(texts, megabytes, seed=1)
    out: dict = {"mb": size}
    labels = {}
    for label, on in (("plain", False), ("prefilter", True), ("plain2", False), ("prefilter2", True)):
        classifier = CueClassifier(cues=read_version("cues_v3").cues, name="cues_v3", prefilter=on)
        started = time.process_time()
        labels[on] = classifier.classify(sample)
        out[label] = time.process_time() - started
    out["identical"] = labels[False] == labels[True]
    return out


def median(values: list[float]) -> float:
    return statistics.median(values)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=float, default=4.0, help="size of the small corpus in MB of text (the large is 10x)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--gain-mb", type=float, default=1.0, help="MB for the in-process prefilter on/off comparison")
    parser.add_argument("--profile-mb", type=float, default=1.0, help="MB for the in-process profile of classify")
    args = parser.parse_args()
    if not SHARED.is_dir():
        sys.exit(f"shared data not found at {SHARED}")
    texts = real_texts()
    load_before = os.getloadavg()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tiny = Path(tmp) / "tiny"
        make_corpus(tiny, 0.001, texts)
        corpora = {}
        for scale in (1, 10):
            corpora[scale] = Path(tmp) / f"corpus{scale}"
            corpora[scale] = (corpora[scale], *make_corpus(corpora[scale], args.mb * scale, texts))
        startup, help_startup = [], []
        # Alternated: each round runs every measurement once, so load on a shared machine hits all of them alike.
        for round_ in range(args.rounds):
            startup.append(measure("cues", tiny)["seconds"])
            help_startup.append(run_process([str(Path(sys.executable).parent / "curate"), "--help"])["seconds"])
            for scale, (corpus, docs, size) in corpora.items():
                for mode in ("bare", "cues"):
                    rows.append({"round": round_, "scale": scale, "mode": mode, "docs": docs, "mb": size / 1e6,
                                 **measure(mode, corpus)})
    profiled = profile(texts, args.profile_mb)
    gain = prefilter_gain(texts, args.gain_mb)
    print(f"corpus: {len(texts)} real texts from {SHARED}, repeated and shuffled; 1 task, 1 worker; "
          f"{args.rounds} alternated rounds, medians; load average (1, 5, 15 min) before "
          f"{[round(x, 1) for x in load_before]}, after {[round(x, 1) for x in os.getloadavg()]}\n")
    print("| input | step | documents | MB | seconds (median) | MB/s | peak RSS MB (max) |")
    print("|---|---|---|---|---|---|---|")
    by = {}
    for scale in (1, 10):
        for mode in ("bare", "cues"):
            runs = [r for r in rows if r["scale"] == scale and r["mode"] == mode]
            seconds, rss = median([r["seconds"] for r in runs]), max(r["peak_rss_mb"] for r in runs)
            by[scale, mode] = {"seconds": seconds, "rss": rss, "mb": runs[0]["mb"],
                               "all": [round(r["seconds"], 1) for r in runs]}
            print(f"| {runs[0]['mb']:.0f} MB | {'datatrove read->write' if mode == 'bare' else 'curate tag --classifier cues'} | "
                  f"{runs[0]['docs']:,} | {runs[0]['mb']:.1f} | {seconds:.1f} {by[scale, mode]['all']} | "
                  f"{runs[0]['mb'] / seconds:.2f} | {rss:.0f} |")
    for scale in (1, 10):
        ratios = [b["seconds"] / c["seconds"] for b, c in zip(
            [r for r in rows if r["scale"] == scale and r["mode"] == "bare"],
            [r for r in rows if r["scale"] == scale and r["mode"] == "cues"])]
        print(f"\nthroughput ratio tag/bare at {by[scale, 'cues']['mb']:.0f} MB: median of rounds {median(ratios):.3f} "
              f"{[round(r, 3) for r in ratios]} (target >= 0.5, goal 0.7)")
    print(f"peak RSS of tag, {by[10, 'cues']['mb']:.0f} MB / {by[1, 'cues']['mb']:.0f} MB: "
          f"{by[10, 'cues']['rss'] / by[1, 'cues']['rss']:.2f} (target <= 1.2)")
    print(f"start-up: `curate tag` on a {0.001 * 1e3:.0f} kB input, whole process: median {median(startup):.2f} s "
          f"{[round(s, 2) for s in startup]} (target < 2 s)")
    print(f"start-up: `curate --help`, whole process: median {median(help_startup):.2f} s "
          f"{[round(s, 2) for s in help_startup]}")
    print(f"\nwhere classify's time goes ({profiled['classifier']}, cProfile, {profiled['mb']:.1f} MB, warm vocabulary, "
          f"{profiled['seconds']:.1f} s with profiling):")
    for label, seconds in profiled["parts"].items():
        print(f"  {label}: {100 * seconds / profiled['seconds']:.0f} %")
    plain, filtered = median([gain["plain"], gain["plain2"]]), median([gain["prefilter"], gain["prefilter2"]])
    print(f"cues_v3 classify in process on {gain['mb']:.1f} MB: without prefilter {plain:.2f} CPU s, with {filtered:.2f} "
          f"CPU s ({plain / filtered:.2f}x), labels {'identical' if gain['identical'] else 'DIFFERENT'}")


if __name__ == "__main__":
    main()

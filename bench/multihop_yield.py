"""Multi-hop yield and speed on GSM8K train (CPU): how many valid chains per second, at what link acceptance.

    python bench/multihop_yield.py [--input ../shared/data/gsm8k/train.jsonl] [--n 1000] [--hops 2 2-4 5]

Target: at least 1,000 valid 2-hop chains in under a minute, source parsing included. Times are split into
parsing the sources into executable graphs and building the chains; every chain is re-executed from its
stored hops inside the timed build, as the builder does before writing.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from curate.builders.multihop import (  # noqa: E402
    ChainBuilder,
    MultihopStats,
    ablation_rows,
    load_sources,
    parse_hop_range,
    reexecute,
)
from curate.pipelines.readers import InputSpec  # noqa: E402

SHARED = Path(os.environ.get("CURATE_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--input", default=str(SHARED / "gsm8k" / "train.jsonl"))
    parser.add_argument("--n", type=int, default=1000, help="chains per setting")
    parser.add_argument("--hops", nargs="+", default=["2", "2-4", "5"])
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if not Path(args.input).exists():
        sys.exit(f"{args.input} not found (set CURATE_SHARED_DATA)")

    started = time.perf_counter()
    problems, source_stats = load_sources(InputSpec(path=args.input, text_key="question"), progress=False)
    parse_seconds = time.perf_counter() - started
    sources = {p.id: p for p in problems}
    print(f"sources: {source_stats.sources_read:,} read, {source_stats.sources_executable:,} executable "
          f"({100 * source_stats.sources_executable / source_stats.sources_read:.1f} %), "
          f"{source_stats.sources_with_slots:,} with a replaceable number; parsed in {parse_seconds:.2f} s "
          f"({source_stats.sources_read / parse_seconds:,.0f} problems/s)")
    print(f"  set aside: {dict(source_stats.source_rejects.most_common())}")
    print(f"{'hops':>5} {'chains':>7} {'build s':>8} {'chains/s':>9} {'accept':>7} {'attempts':>8}  top link rejects")
    for hops_text in args.hops:
        hops = parse_hop_range(hops_text)
        stats = MultihopStats()
        sink = io.StringIO()
        started = time.perf_counter()
        chains = ChainBuilder(problems, seed=args.seed).build(args.n, hops, stats, sink, sink, progress=False)
        for index, chain in enumerate(chains):
            for rows in ablation_rows(f"c{index}", chain).values():
                for row in rows:
                    reexecute(row, sources)
        seconds = time.perf_counter() - started
        top = ", ".join(f"{k} {v}" for k, v in stats.link_rejects.most_common(3))
        print(f"{hops_text:>5} {len(chains):>7,} {seconds:>8.2f} {len(chains) / seconds:>9,.0f} "
              f"{100 * stats.acceptance_rate:>6.1f}% {stats.chain_attempts:>8,}  {top}")
        if hops == (2, 2):
            total = parse_seconds + seconds
            verdict = "meets" if len(chains) >= 1000 and total < 60 else "misses"
            print(f"      2-hop target: {len(chains):,} chains in {total:.1f} s with parsing -> {verdict} the target")


if __name__ == "__main__":
    main()

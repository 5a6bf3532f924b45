"""How well `curate cpt` matches enriched and minimized sets on real text: token gap and length KS statistic per
seed and --length-match mode (none: stratified filling only; range: both pools cut to their common length range
first; common: that range plus per-bin weights both pools can supply), against the published pipeline's way (the
first rows of each pool until the budget, no length matching). `removed` counts the candidates the range took out.

Corpus: Sky-T1 long traces and Stack Exchange answers from ../shared/data, tagged with cues_v1; tokens counted by
a byte-level BPE trained on the bundled sample corpus (tests/tiny_model.py).

    .venv/bin/python bench/cpt_match.py [--data ../shared/data] [--tokens 60k] [--modes none,range,common]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def build_corpus(data: Path, path: Path) -> None:
    with path.open("w") as f:
        for source in sorted((data / "longcot_skythought").glob("*.jsonl")):
            for i, line in enumerate(source.read_text().splitlines()):
                f.write(json.dumps({"id": f"{source.stem}/{i}", "text": json.loads(line)["code"][0], "domain": "trace"}) + "\n")
        for source in sorted((data / "stackexchange_math").glob("*.jsonl")):
            for line in source.read_text().splitlines():
                for answer in json.loads(line)["answers"]:
                    if answer.get("body_text"):
                        f.write(json.dumps({"id": f"se/{answer['id']}", "text": answer["body_text"], "domain": "stackexchange"}) + "\n")


def main() -> None:
    import duckdb

    from curate.builders.cpt import CPTSelection, ks_statistic, parse_token_count, run_cpt
    from curate.pipelines.readers import InputSpec
    from curate.pipelines.tag import run_tagging
    from tests.support.tiny_model import make_tiny_chat_model

    parser = argparse.ArgumentParser()
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--tokens", default="60k")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--modes", default="none,range,common")
    parser.add_argument("--length-trim", type=float, default=0.025)
    args = parser.parse_args()
    from curate.builders.cpt import CPTError, length_removed

    budget = parse_token_count(args.tokens)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        corpus = tmp / "corpus.jsonl"
        build_corpus(args.data, corpus)
        tokenizer = str(make_tiny_chat_model(tmp / "model"))
        tags = run_tagging(InputSpec(str(corpus)), tmp / "tags", "cues", progress=False).tags_dir
        print(f"corpus: {sum(1 for _ in corpus.open()):,} documents; budget {budget:,} tokens; tokenizer: BPE-1024 (sample corpus)")
        print(f"{'seed':>4} {'mode':>6} {'enriched tok':>13} {'minimized tok':>14} {'gap %':>7} {'KS':>7} "
              f"{'removed e/m':>12} {'naive gap %':>12} {'naive KS':>9} {'s':>6}")
        ks: dict[str, list[float]] = {}
        for seed, mode in ((seed, mode) for seed in range(args.seeds) for mode in args.modes.split(",")):
            started = time.perf_counter()
            try:
                result = run_cpt(tags, InputSpec(str(corpus)), budget, tokenizer, tmp / f"out{seed}",
                                 CPTSelection(seed=seed), export=False, progress=False, length_match=mode,
                                 length_trim=args.length_trim)
            except CPTError as error:
                print(f"{seed:>4} {mode:>6} failed: {error}")
                continue
            seconds = time.perf_counter() - started
            r = result.report
            ks.setdefault(mode, []).append(r.ks_statistic)
            removed = length_removed(result.pools, r)
            # The published way: pools in file order, first rows until the budget, no length matching.
            pool = f"{tmp}/out{seed}/.curate/pool/data/*.parquet"
            naive = {}
            for variant in ("enriched", "minimized"):
                rows = duckdb.sql(f"SELECT n_tokens FROM read_parquet('{pool}') WHERE pool = '{variant}' ORDER BY id").fetchall()
                taken, total = [], 0
                for (n,) in rows:
                    if total >= budget:
                        break
                    taken.append(n)
                    total += n
                naive[variant] = taken
            n_e, n_m = sum(naive["enriched"]), sum(naive["minimized"])
            print(f"{seed:>4} {mode:>6} {r.enriched_tokens:>13,} {r.minimized_tokens:>14,} "
                  f"{100 * abs(r.enriched_tokens - r.minimized_tokens) / budget:>7.2f} {r.ks_statistic:>7.3f} "
                  f"{removed['enriched']:>5,}/{removed['minimized']:<6,} "
                  # The naive figures only mean something on the unrestricted pool (mode none).
                  + (f"{100 * abs(n_e - n_m) / budget:>12.2f} {ks_statistic(naive['enriched'], naive['minimized']):>9.3f} "
                     if mode == "none" else f"{'-':>12} {'-':>9} ") + f"{seconds:>6.1f}")
        for mode, values in ks.items():
            print(f"mean KS {mode}: {sum(values) / len(values):.3f} over {len(values)} seeds")


if __name__ == "__main__":
    main()

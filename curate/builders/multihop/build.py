"""`curate multihop` and the multihop flow: the job checked, its output claimed, its source problems cleaned and
read, chains drawn, the rows of the three ablation sets written (each re-executed first), then the stats and the
card."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from curate.builders.base import BuildOutput
from curate.builders.jobs import MultihopJob
from curate.builders.multihop.card import write_card
from curate.builders.multihop.chains import ChainBuilder, parse_hop_range
from curate.builders.multihop.cleaning import clean_sources
from curate.builders.multihop.rows import SCHEMA, SETS, ChainRows
from curate.builders.multihop.sources import load_sources
from curate.builders.multihop.stats import MultihopStats
from curate.errors import InputError, OptionError
from curate.files import atomic_open, write_text_atomic
from curate.pipelines.readers import InputSpec
from curate.pipelines.state import STATE, write_once
from curate.pipelines.tag import file_fingerprints


@dataclass
class MultihopResult:
    output: Path
    stats: MultihopStats
    parameters: dict


def run_multihop(job: MultihopJob, progress: bool = True) -> MultihopResult:
    """Builds the job's chains into its output, whatever the output holds (`multihop` claims it first). The job's
    cleaning (`dedup` / `decontam`, benchmarks as `curate decontam --against`) cleans the source problems before
    chaining, so that the full, half and single sets stay built from the same problems."""
    spec, hops, answer_key = source_spec(job), check_hops(job), job.answer_key
    n, seed, max_ratio, tries_per_link = job.n, job.seed, job.max_ratio, job.tries_per_link
    dedup, decontam, benchmarks_dir = job.cleaning.dedup, job.cleaning.decontam, job.cleaning.benchmarks_dir
    if n < 1:
        raise OptionError("n must be at least 1")
    output = Path(job.output)
    (output / STATE).mkdir(parents=True, exist_ok=True)
    parameters = {
        **spec.fingerprint(), "split": spec.split, "answer_key": answer_key, "n": n, "hops": f"{hops[0]}-{hops[1]}",
        "seed": seed, "max_ratio": max_ratio, "tries_per_link": tries_per_link, "dedup": dedup, "decontam": decontam,
        "benchmarks_dir": str(benchmarks_dir) if benchmarks_dir else None, "license": job.license,
    }
    excluded, sections = clean_sources(spec, output, answer_key, dedup, decontam, benchmarks_dir, progress)
    with BuildOutput(rejects=output / "rejects" / "sources.jsonl") as sources_out:
        problems, stats = load_sources(spec, answer_key=answer_key, progress=progress, excluded=excluded,
                                       out=sources_out)
    if not problems:
        raise InputError(f"no usable source problem in {spec.path} ({dict(stats.source_rejects)})")

    builder = ChainBuilder(problems, seed=seed, max_ratio=max_ratio, tries_per_link=tries_per_link)
    with atomic_open(output / "rejects" / "links.jsonl") as links, \
            atomic_open(output / "rejects" / "chains.jsonl") as failed:
        chains = builder.build(n, hops, stats, links, failed, progress=progress)

    sources = {p.id: p for p in problems}
    uses: Counter = Counter(hop.problem.id for chain in chains for hop in chain)
    with BuildOutput({name: output / "data" / f"{name}-00000.parquet" for name in SETS}, SCHEMA, row_group=None) as out:
        ChainRows(sources, f"multihop-s{seed}-").run(enumerate(chains), out)
    stats.rows = dict(out.rows)
    stats.distinct_sources = len(uses)
    stats.max_source_uses = max(uses.values(), default=0)

    write_text_atomic(output / STATE / "parameters.json", json.dumps(parameters, indent=2))
    write_text_atomic(output / STATE / "stats.json", json.dumps(stats.to_dict(), indent=2))
    write_card(output, parameters, stats, sections)
    return MultihopResult(output=output, stats=stats, parameters=parameters)


def check_hops(job: MultihopJob) -> tuple[int, int]:
    """The job's hop range; a malformed one fails here, before anything is claimed (the flow checks its parameters
    with it)."""
    return parse_hop_range(job.hops)


def source_spec(job: MultihopJob) -> InputSpec:
    """The source problems of the job, read as a corpus whose text is the question."""
    return InputSpec(path=job.input, text_key=job.question_key, id_key=job.id_key, split=job.split)


def multihop(job: MultihopJob, progress: bool = True, refresh: bool = False) -> MultihopResult | None:
    """Runs `curate multihop` and the multihop flow: claims the output for `job.record()` (a folder holding another
    dataset is refused unless `job.overwrite`), then builds the chains. None when the output is up to date; `refresh`
    builds it all the same (a flow whose cached result is stale)."""
    check_hops(job)
    spec = source_spec(job)
    if not spec.is_hub:
        spec.list_files()  # a local input that names no file fails here, in one line (NoInputFilesError)
    return write_once(job.output, "multihop", job.record(), lambda: run_multihop(job, progress=progress),
                      inputs=file_fingerprints(spec), overwrite=job.overwrite, refresh=refresh)

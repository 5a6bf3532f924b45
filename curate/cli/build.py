"""Commands that build datasets: build, cpt, priming, multihop, mcqa, dedup, decontam."""

from __future__ import annotations

import functools
import inspect
import time
from collections.abc import Callable

import typer

from curate.builders.jobs import BuildJob, CPTJob, McqaJob, MultihopJob, PrimingJob
from curate.cli.app import app, console
from curate.cli.groups import job_command
from curate.cli.options import cleaning_rows, summary, tag_rows, up_to_date
from curate.pipelines.jobs import DecontamJob, DedupJob


@app.command()
@job_command(BuildJob)
def build(job: BuildJob) -> None:
    """Tag (reusing finished shards), select with DuckDB and write a parquet dataset with a card.

    With --executor slurm each stage is submitted as a job array; rerun the command when it has finished.

    Examples:

        curate build --behaviors backtracking                      # bundled sample corpus

        curate build --behaviors backtracking,verification --input 'corpus/*.jsonl' --output out/

        curate build --behaviors none --input corpus.parquet --output minimized/
    """
    from curate.builders.behavior import build as run_build_job

    started = time.perf_counter()
    result = run_build_job(job)
    output = job.dataset_dir
    if result is None:
        up_to_date(output)
        return
    seconds = time.perf_counter() - started
    rows = tag_rows(result.tags_dir, result.tags_dir / "rejects", seconds)
    rows.insert(4, ("selected", f"{result.selected:,}"))
    rows.insert(5, ("duplicate ids dropped across files", f"{result.cross_file_duplicates:,}"))
    rows += [("dataset", str(output / "data")), ("card", str(output / "README.md"))]
    summary(f"Built {output}", rows)


@app.command()
@job_command(MultihopJob)
def multihop(job: MultihopJob) -> None:
    """Chain verifiable problems so that each answer feeds the next: `full`, `half` and `single` ablation splits.

    Solutions are re-executed from their calculator annotations (no eval); every link and every problem that
    could not be used is kept under OUTPUT/rejects/ with its reason. Examples:

        curate multihop --input gsm8k/train.jsonl --hops 2-4 --n 5000 --seed 0 --output datasets/multihop

        curate multihop --input gsm8k/test.jsonl --hops 3 --n 500 --output datasets/multihop-test

        curate multihop --input gsm8k/train.jsonl --dedup --decontam gsm8k,math500 --benchmarks-dir ../shared/data -o out/

    --dedup/--decontam clean the source problems before chaining, so the three splits stay matched.
    """
    from curate.builders.multihop import multihop as run_multihop_job

    started = time.perf_counter()
    result = run_multihop_job(job)
    output = job.output
    if result is None:
        up_to_date(output)
        return
    seconds = time.perf_counter() - started
    s = result.stats
    rows = [
        ("sources read / executable", f"{s.sources_read:,} / {s.sources_executable:,}"),
        ("sources set aside", ", ".join(f"{k}: {v:,}" for k, v in s.source_rejects.most_common()) or "0"),
        ("chains built", f"{s.rows.get('full', 0):,} of {job.n:,} asked ({s.chain_attempts:,} attempts)"),
        ("hop counts", ", ".join(f"{k}: {v:,}" for k, v in sorted(s.hop_counts.items()))),
        ("links accepted", f"{s.links_accepted:,} / {s.link_proposals:,} ({100 * s.acceptance_rate:.1f} %)"),
        ("links rejected", ", ".join(f"{k}: {v:,}" for k, v in s.link_rejects.most_common()) or "0"),
        ("rows full / half / single", " / ".join(f"{s.rows.get(k, 0):,}" for k in ("full", "half", "single"))),
        *cleaning_rows(output, job.cleaning),
        ("seconds", f"{seconds:,.1f}"),
        ("dataset", str(output / "data")),
        ("card", str(output / "README.md")),
        ("rejects", str(output / "rejects")),
    ]
    summary(f"Built {output}", rows)


def typed_problem_space(command: Callable) -> Callable:
    """Applies `curate priming`'s --preset before its job is made: the problem-space options typed on the command
    line (read from the context, which a job cannot see) override it, the others take the preset's values (the
    priming flow does the same with the parameters it is given)."""

    @functools.wraps(command)
    def with_preset(ctx: typer.Context, **values):
        from curate.builders.priming import PROBLEM_SPACE, preset_options

        if values["preset"] is not None:
            # By name: typer ships its own copy of click, whose ParameterSource is another class than click's.
            typed = {name: values[name] for name in PROBLEM_SPACE
                     if getattr(ctx.get_parameter_source(name), "name", "DEFAULT") not in ("DEFAULT", "DEFAULT_MAP")}
            values |= preset_options(values["preset"], typed) | {"preset": None}
        return command(**values)

    signature = inspect.signature(command)
    context = inspect.Parameter("ctx", inspect.Parameter.KEYWORD_ONLY, annotation=typer.Context)
    del with_preset.__wrapped__  # typer must read the signature below, not the command's own
    with_preset.__signature__ = signature.replace(parameters=[context, *signature.parameters.values()])
    with_preset.__annotations__ = {"ctx": typer.Context, **command.__annotations__}
    return with_preset


@app.command()
@typed_problem_space
@job_command(PrimingJob)
def priming(job: PrimingJob) -> None:
    """Countdown priming datasets: behavior-controlled traces, checked by a classifier, with SFT and verl columns.

    Examples:

        curate priming --variant only_backtracking --answers incorrect --n 1000 --output priming/bt_wrong

        curate priming --variant all --n 1000 --tokenizer Qwen/Qwen2.5-3B --output priming/

        curate priming --variant placeholder_cot --tokenizer meta-llama/Llama-3.2-3B --output priming/placeholder

        curate priming --variant backtracking_verification --writer llm --model Qwen/Qwen2.5-72B-Instruct --backend vllm --n 1000 -o priming/bv_llm

        curate priming --variant all_strategies --dedup --decontam gsm8k --benchmarks-dir ../shared/data -o priming/bt

        curate priming --variant all_strategies --answers any --preset tinyzero --format-score 0.1 -o priming/tz
    """
    from curate.builders.priming import build_priming_set, priming_sets

    sets = priming_sets(job)
    if job.variant.strip() == "all" and not job.tokenizer:
        console.print("[yellow]placeholder_cot skipped: it needs --tokenizer.[/]")
    rows = []
    for target, config in sets:
        result = build_priming_set(job, target, config)
        if result is None:
            up_to_date(target)
            continue
        splits = result.stats["splits"]
        accuracy = {s: f"{100 * v['answer_accuracy']:.0f} %" for s, v in splits.items()}
        rows.append((f"{config.variant} ({config.answers})", (
            f"{result.rows['train']:,} train / {result.rows['test']:,} test, accepted "
            f"{100 * result.acceptance_rate:.1f} % of {result.attempted:,}, accuracy {accuracy} → {target}")))
        rows += [(f"  rejected: {reason}", f"{count:,}") for reason, count in result.rejected.items()]
        if "judge" in result.stats:
            judged = result.stats["judge"]["all"]
            rows.append(("  LLM judge", (f"accepted {judged['accepted']:,} of {judged['judged']:,} judged traces "
                                         f"({judged['traces'] - judged['judged']:,} unreadable or failed)")))
        rows += [(f"  {label}", value) for label, value in cleaning_rows(target, job.cleaning)]
    if rows:
        summary("Priming datasets", rows)


@app.command("dedup")
@job_command(DedupJob)
def dedup_command(job: DedupJob) -> None:
    """Remove exact duplicates (normalized-text hash) and near duplicates (datatrove MinHash).

    Removed rows go to OUTPUT/rejects/duplicates.jsonl with the id of the row kept in their place.
    The four MinHash stages run in order; with --executor slurm they are submitted as one chain of job
    arrays: rerun the command when the last has finished. A rerun resumes unless the input or options changed.

    Examples:

        curate dedup 'corpus/*.jsonl' --output deduped/ --threshold 0.8

        curate dedup datasets/math_rl --output datasets/math_rl      # in place, card section updated

        curate dedup /shared/corpus --output /shared/deduped --tasks 256 --executor slurm --slurm-partition cpu
    """
    from curate.pipelines.dedup import dedup_job

    started = time.perf_counter()
    result = dedup_job(job)
    output = job.output
    if result is None:
        up_to_date(output)
        return
    seconds = time.perf_counter() - started
    summary(f"Deduplicated → {output}", [
        ("read", f"{result.read:,}"), ("exact duplicates", f"{result.exact_removed:,}"),
        ("near duplicates", f"{result.near_removed:,}"), ("kept", f"{result.kept:,}"),
        ("unreadable (in rejects/)", f"{result.unreadable:,}"),
        ("documents/s", f"{result.read / seconds:,.0f}" if seconds > 0 else "-"),
        ("removed rows", str(output / "rejects" / "duplicates.jsonl")),
    ])


@app.command("decontam")
@job_command(DecontamJob)
def decontam_command(job: DecontamJob) -> None:
    """Remove rows that share an n-gram with benchmark items; every removal names the item and the n-gram.

    The benchmark index is built here; the filter runs on the executor. With --executor slurm, rerun the
    command when the job array has finished.

    Examples:

        curate decontam datasets/math_rl --against gsm8k,math500 --benchmarks-dir ../shared/data --output datasets/math_rl

        curate decontam corpus.jsonl --against 'eval/aime.jsonl=problem+solution,hf:openai/gsm8k@test=question' -o clean/

        curate decontam /shared/corpus --against /shared/eval/aime.jsonl=problem -o /shared/clean --tasks 256 --executor slurm --slurm-partition cpu
    """
    from curate.pipelines.decontam import decontam_job

    started = time.perf_counter()
    result = decontam_job(job)
    output = job.output
    if result is None:
        up_to_date(output)
        return
    seconds = time.perf_counter() - started
    rows = [("read", f"{result.read:,}"), ("removed", f"{result.removed:,}"), ("kept", f"{result.kept:,}")]
    rows += [(f"  {name} ({info['items']:,} items)", f"{result.hits.get(name, 0):,}") for name, info in result.index.benchmarks.items()]
    rows += [("documents/s", f"{result.read / seconds:,.0f}" if seconds > 0 else "-"),
             ("removed rows", str(output / "rejects" / "contaminated.jsonl"))]
    summary(f"Decontaminated → {output}", rows)


@app.command("mcqa")
@job_command(McqaJob)
def mcqa(job: McqaJob) -> None:
    """Convert multiple choice to open-answer questions: keep items whose stem stands without its options and
    whose gold option math-verify grades uniquely; every other item goes to rejects/ with its reason.

    Examples:

        curate mcqa --input ../shared/data/aqua/dev.json --output datasets/aqua-open

        curate mcqa -i "mmlu/*_test.csv" -i mathqa/test.json --format auto --output datasets/mcqa-open --workers 4

        curate mcqa -i mathqa/test.json --dedup --decontam aqua,mmlu_stem --benchmarks-dir ../shared/data -o out/

        curate mcqa -i aqua/dev.json --reformulate --model Qwen/Qwen2.5-72B-Instruct --backend vllm -o datasets/aqua-open
    """
    from curate.builders.mcqa import mcqa as run_mcqa_job

    started = time.perf_counter()
    result = run_mcqa_job(job)
    output = job.output
    if result is None:
        up_to_date(output)
        return
    total = result.kept + result.rejected
    rows = [("items", f"{total:,}"), ("kept", f"{result.kept:,} ({100 * result.kept / max(total, 1):.1f} %)")]
    rows += [(f"rejected: {reason}", f"{n:,}") for reason, n in result.by_reason.items()]
    rows += [(f"type: {kind}", f"{n:,}") for kind, n in result.answer_types.items()]
    rows += cleaning_rows(output, job.cleaning)
    rows += [("seconds", f"{time.perf_counter() - started:.1f}"), ("dataset", str(output / "data")),
             ("rejects", str(output / "rejects" / "rejects.jsonl")), ("card", str(output / "README.md"))]
    summary(f"MCQA → open answer: {output}", rows)


@app.command("cpt")
@job_command(CPTJob)
def cpt(job: CPTJob) -> None:
    """Build behavior-enriched and behavior-minimized CPT sets at one matched token budget, with cards and exports.

    The pass over the corpus (token counting) and the --rewrite job run on --executor; with slurm each is
    submitted in turn: rerun the command when the job has finished, and it continues from there.

    Examples:

        curate cpt --tags tags/cues_ngram_v1 --texts 'owm/*.parquet' --tokens 8.3M --tokenizer meta-llama/Llama-3.2-3B -o cpt/

        curate cpt --tags tags/llm_v1 --texts owm/ --tokens 8.3M --tokenizer Qwen/Qwen2.5-3B -k 2 --rewrite \\
            --model Qwen/Qwen2.5-32B-Instruct --backend vllm --tp 2 --pack-length 4096 -o cpt/

        curate cpt --tags /shared/tags/cues_ngram_v1 --texts /shared/owm --tokens 8.3M --tokenizer Qwen/Qwen2.5-3B --tasks 256 --executor slurm --slurm-partition cpu -o /shared/cpt
    """
    from curate.builders.cpt.matching import length_removed
    from curate.builders.cpt.run import cpt as run_cpt_job

    result = run_cpt_job(job)
    output = job.output
    if result is None:
        up_to_date(output)
        return
    report = result.report
    rows = [
        ("budget", f"{report.budget:,} tokens (± {100 * report.tolerance:g} %)"),
        ("enriched", f"{report.enriched_documents:,} documents, {report.enriched_tokens:,} tokens"),
        ("minimized", f"{report.minimized_documents:,} documents, {report.minimized_tokens:,} tokens"),
        ("length KS statistic", f"{report.ks_statistic:.4f}"),
        ("candidates", f"{result.pools.get('enriched', 0):,} enriched / {result.pools.get('minimized', 0):,} minimized"),
    ]
    if report.pool_used:
        rows.append(("pool used", (f"enriched {100 * report.pool_used['enriched']:.1f} % / minimized "
                                   f"{100 * report.pool_used['minimized']:.1f} % of the candidate tokens")))
    if report.length_match == "best":
        rows.append(("length match (best)", (f"pools share {report.shared_tokens or 0:,} tokens by stratum; "
                                             f"KS of the targets {report.target_ks or 0:.4f}")))
    elif report.length_match != "none":
        removed = length_removed(result.pools, report)
        span = f"{report.length_range[0]:,}-{report.length_range[1]:,} tokens" if report.length_range else "-"
        rows.append((f"length match ({report.length_match})", (
            f"common range {span}; removed {removed['enriched']:,} enriched / {removed['minimized']:,} minimized "
            "candidates")))
    if result.rewrite:
        for variant in ("enriched", "minimized"):
            dropped = result.rewrite.dropped[variant]
            reasons = ", ".join(f"{k}: {v}" for k, v in dropped.items()) or "none"
            rows.append((f"{variant} rewritten", (f"{result.rewrite.kept[variant]:,} kept, {sum(dropped.values()):,} "
                                                 f"dropped ({reasons})")))
        rows.append(("rewrite budgets", f"{result.rewrite.rematch_note} ({result.rewrite.rounds} round(s))"))
    if result.rejects:
        rows.append(("rejected records", ", ".join(f"{k}: {v:,}" for k, v in result.rejects.items())))
    rows += [("cards", f"{output}/enriched/README.md, {output}/minimized/README.md"), ("exports", str(output / "exports"))]
    summary(f"CPT corpora → {output}", rows)


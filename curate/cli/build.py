"""Commands that build datasets: build, cpt, priming, multihop, mcqa, dedup, decontam."""

from __future__ import annotations

import time
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from curate.behaviors import BEHAVIOR_NAMES, UnknownBehaviorError, parse_behavior_list
from curate.builders.jobs import BuildJob, McqaJob, MultihopJob
from curate.cli.app import app, console
from curate.cli.groups import cleaning_group, executor_group, input_group, job_command
from curate.cli.options import (
    ClassifierOption,
    DeviceOption,
    OverwriteOption,
    Tasks,
    Workers,
    cleaning_rows,
    fail,
    summary,
    tag_rows,
    up_to_date,
    write_once,
)
from curate.pipelines.executor_options import LOCAL, ExecutorOptions
from curate.pipelines.jobs import DecontamJob, DedupJob

if TYPE_CHECKING:  # imported when a command runs: they import datatrove
    from curate.pipelines.cleaning import Cleaning
    from curate.pipelines.readers import InputSpec


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


@app.command()
@cleaning_group(dedup="Remove exact and MinHash near duplicates (judged on the completion).",
                decontam="Remove rows whose question or completion overlaps these benchmarks (as `curate decontam "
                "--against`).")
def priming(
    ctx: typer.Context,
    variant: Annotated[str, typer.Option(help="all_strategies, only_backtracking, backtracking_verification, "
                                         "backtracking_subgoal, backtracking_backward, negative_control, empty_cot, "
                                         "placeholder_cot; a comma list or 'all' builds each into OUTPUT/VARIANT.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="Dataset directory.")],
    answers: Annotated[str, typer.Option(help="correct; incorrect (well-formed expressions with a wrong value, from natural "
                                         "failures); any (the search's own accuracy, as the reference's main sets).")] = "correct",
    n: Annotated[int, typer.Option("--n", help="Training rows.", min=0)] = 1000,
    test_n: Annotated[int, typer.Option(help="Test rows (no problem is in both splits).", min=0)] = 100,
    writer: Annotated[str, typer.Option(help="symbolic (the solver's search narrated) or llm (a teacher model).")] = "symbolic",
    classifier: ClassifierOption = "cues",
    numbers: Annotated[str, typer.Option(help="Numbers per problem (2-6); a comma list mixes sizes, e.g. 3,4.")] = "4",
    number_range: Annotated[str, typer.Option(help="LOW,HIGH of the numbers.")] = "1,99",
    target_range: Annotated[str, typer.Option(help="LOW,HIGH of the target.")] = "10,100",
    preset: Annotated[Optional[str], typer.Option(help="tinyzero: the reference study's problems (3 or 4 numbers in "
                                                "1-100, targets 10-100); --numbers/--number-range/--target-range "
                                                "given explicitly override it.")] = None,
    fractional_division: Annotated[bool, typer.Option(help="Allow divisions with a fractional result.")] = False,
    format_score: Annotated[float, typer.Option(help="Countdown reward of a well-formed wrong equation, carried by every "
                                                "row (verl extra_info.format_score); TinyZero's runs use 0.1.",
                                                min=0.0)] = 0.0,
    max_dead_ends: Annotated[int, typer.Option(help="Most dead ends a backtracking trace narrates.", min=1)] = 3,
    tokenizer: Annotated[Optional[str], typer.Option(help="Tokenizer (hub name or local dir) for placeholder_cot "
                                                     "lengths and token statistics.")] = None,
    placeholder_for: Annotated[str, typer.Option(help="Variant whose trace length placeholder_cot matches.")] = "all_strategies",
    seed: Annotated[int, typer.Option(help="Seed of problems and phrasing.")] = 0,
    model: Annotated[Optional[str], typer.Option(help="--writer llm: the teacher model (hub name or local dir).")] = None,
    backend: Annotated[str, typer.Option(help="--writer llm / --judge-model: vllm, endpoint or transformers.")] = "transformers",
    endpoint_url: Annotated[Optional[str], typer.Option(help="--backend endpoint: base URL; key from CURATE_API_KEY or OPENAI_API_KEY.")] = None,
    device: DeviceOption = "auto",
    temperature: Annotated[float, typer.Option(help="--writer llm: sampling temperature of the teacher.", min=0)] = 0.7,
    max_trace_tokens: Annotated[int, typer.Option(help="--writer llm: generation budget per trace.", min=16)] = 2048,
    concurrency: Annotated[Optional[int], typer.Option(help="--writer llm / --judge-model: requests in flight.", min=1)] = None,
    judge_model: Annotated[str | None, typer.Option(help="Also judge every written trace with this model (LLM judge, "
                                                       "Countdown prompt with the numbers and target; served by "
                                                       "--backend/--endpoint-url/--device): the card reports its "
                                                       "acceptance beside the classifier's.")] = None,
    overwrite: OverwriteOption = False,
    *,
    cleaning: Cleaning,
) -> None:
    """Countdown priming datasets: behavior-controlled traces, checked by a classifier, with SFT and verl columns.

    Examples:

        curate priming --variant only_backtracking --answers incorrect --n 1000 --output priming/bt_wrong

        curate priming --variant all --n 1000 --tokenizer Qwen/Qwen2.5-3B --output priming/

        curate priming --variant placeholder_cot --tokenizer meta-llama/Llama-3.2-3B --output priming/placeholder

        curate priming --variant backtracking_verification --writer llm --model Qwen/Qwen2.5-72B-Instruct --backend vllm --n 1000 -o priming/bv_llm

        curate priming --variant all_strategies --dedup --decontam gsm8k --benchmarks-dir ../shared/data -o priming/bt

        curate priming --variant all_strategies --answers any --preset tinyzero --format-score 0.1 -o priming/tz
    """
    from curate.builders.priming import ALL_VARIANTS, PrimingConfig, PrimingError, apply_preset, run_priming

    def pair(text: str, name: str) -> tuple[int, int]:
        try:
            low, high = (int(part) for part in text.split(","))
        except ValueError:
            fail(f"--{name} takes LOW,HIGH, got {text!r}")
        return low, high

    try:
        sizes = tuple(int(part) for part in numbers.split(",") if part.strip())
    except ValueError:
        fail(f"--numbers takes a size or a comma list of sizes (4, or 3,4), got {numbers!r}")
    given = {"n_numbers": sizes[0] if len(sizes) == 1 else sizes, "number_range": pair(number_range, "number-range"),
             "target_range": pair(target_range, "target-range")}
    # A preset sets the problem space; an option typed on the command line wins over it. (By name: typer ships its
    # own copy of click, whose ParameterSource is another class than click's.)
    typed = {"n_numbers": "numbers", "number_range": "number_range", "target_range": "target_range"}
    explicit = {k: v for k, v in given.items() if preset is None or
                getattr(ctx.get_parameter_source(typed[k]), "name", "DEFAULT") not in ("DEFAULT", "DEFAULT_MAP")}
    try:
        space = {**given, **apply_preset(preset, explicit)}
    except PrimingError as error:
        fail(str(error))

    variants = list(ALL_VARIANTS) if variant.strip() == "all" else [v.strip() for v in variant.split(",") if v.strip()]
    if variant.strip() == "all" and not tokenizer:
        variants.remove("placeholder_cot")
        console.print("[yellow]placeholder_cot skipped: it needs --tokenizer.[/]")
    rows = []
    for name in variants:
        config = PrimingConfig(
            variant=name, answers=answers, n=n, test_n=test_n, seed=seed, writer=writer, classifier=classifier,
            **space, integer_division=not fractional_division, format_score=format_score,
            max_dead_ends=max_dead_ends, tokenizer=tokenizer, placeholder_for=placeholder_for,
            llm={"model": model, "backend": backend, "endpoint_url": endpoint_url, "device": device, "temperature": temperature,
                 "max_tokens": max_trace_tokens, "concurrency": concurrency} if writer == "llm" else None,
            judge={"model": judge_model, "backend": backend, "endpoint_url": endpoint_url, "device": device,
                   "concurrency": concurrency} if judge_model else None,
        )
        target = output / name if len(variants) > 1 else output
        # Each variant's folder is one dataset; the keys are the priming flow's, so either sees the other's as its own.
        what = {**vars(config), **cleaning.arguments()}
        result = write_once(target, "priming", what, partial(run_priming, config, target, **cleaning.arguments()),
                            overwrite=overwrite)
        if result is None:
            continue
        splits = result.stats["splits"]
        accuracy = {s: f"{100 * v['answer_accuracy']:.0f} %" for s, v in splits.items()}
        rows.append((f"{name} ({answers})", f"{result.rows['train']:,} train / {result.rows['test']:,} test, "
                     f"accepted {100 * result.acceptance_rate:.1f} % of {result.attempted:,}, accuracy {accuracy} → {target}"))
        rows += [(f"  rejected: {reason}", f"{count:,}") for reason, count in result.rejected.items()]
        if "judge" in result.stats:
            judged = result.stats["judge"]["all"]
            rows.append(("  LLM judge", (f"accepted {judged['accepted']:,} of {judged['judged']:,} judged traces "
                                         f"({judged['traces'] - judged['judged']:,} unreadable or failed)")))
        rows += [(f"  {label}", value) for label, value in cleaning_rows(target, cleaning)]
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
@executor_group
@cleaning_group(dedup="Remove exact and near duplicates from the candidates first.",
                decontam="Remove candidates overlapping these benchmarks.")
@input_group(texts=True)
def cpt(
    tags: Annotated[Path, typer.Option(help="One classifier's attribute shards (e.g. tags/cues_v6).")],
    tokens: Annotated[str, typer.Option(help="Token budget of each set, e.g. 8.3M.")],
    tokenizer: Annotated[str, typer.Option(help="Tokenizer (path or hub name) that counts and packs the tokens.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="Output folder: enriched/, minimized/, exports/.")],
    behaviors: Annotated[str, typer.Option(help="Chosen behaviors (comma-separated).")] = ",".join(BEHAVIOR_NAMES),
    min_behaviors: Annotated[int, typer.Option("--min-behaviors", "-k", help="Enriched: at least k chosen behaviors.", min=1)] = 1,
    min_count: Annotated[int, typer.Option(help="A behavior counts as shown from this many instances.", min=1)] = 1,
    seed: Annotated[int, typer.Option(help="Seed of the random sample.")] = 0,
    tolerance: Annotated[float, typer.Option(help="Allowed relative gap of each token total to the budget.")] = 0.01,
    length_bins: Annotated[int, typer.Option(help="Length strata for matching the two length distributions.", min=1)] = 10,
    length_match: Annotated[str, typer.Option(help="best: both sets at the full budget, lengths matched as closely as "
                                              "both pools allow (residual KS and pool use on the card); strict: cut "
                                              "both pools to their common length range and refuse when it holds too "
                                              "few tokens (old name: common); range: the cut only; none: stratified "
                                              "filling only.")] = "best",
    length_trim: Annotated[float, typer.Option(help="Quantile trimmed off each end of each pool before the common "
                                               "length range is taken.", min=0.0, max=0.49)] = 0.025,
    oversample: Annotated[float, typer.Option(help="Candidates read into each pool, as a multiple of the budget (at the "
                                              "most characters a token takes): more gives the matching more to "
                                              "choose from.", min=1.0)] = 2.0,
    domain_key: Annotated[Optional[str], typer.Option(help="Tag column or corpus field to match the domain mix on "
                                                      "(default: a `domain` tag column where there is one).")] = None,
    rewrite: Annotated[bool, typer.Option("--rewrite", help="Rewrite both sets as question / thoughts / answer.")] = False,
    rewrite_oversample: Annotated[float, typer.Option(help="--rewrite: source tokens rewritten first, as a multiple of "
                                                      "the budget (the set plus more of its pool); later rounds "
                                                      "rewrite what the kept rewrites still lack, so that both "
                                                      "rewritten sets are matched at the budget.", min=1.0)] = 1.25,
    require_solution: Annotated[bool, typer.Option("--require-solution", help="Keep only documents that state a problem "
                                                   "and work out its solution (judged by --solution-judge); the "
                                                   "others are rejected with their reason.")] = False,
    solution_judge: Annotated[str, typer.Option(help="--require-solution: cues (a CPU rule) or llm (the is_solution "
                                                "prompt on --model / --backend, the server --rewrite uses).")] = "cues",
    model: Annotated[Optional[str], typer.Option(help="--rewrite / --solution-judge llm: the model (path or name).")] = None,
    backend: Annotated[str, typer.Option(help="--rewrite: vllm, endpoint or transformers.")] = "transformers",
    endpoint_url: Annotated[Optional[str], typer.Option(help="--backend endpoint: base URL; key from CURATE_API_KEY.")] = None,
    max_doc_tokens: Annotated[int, typer.Option(help="--rewrite: documents cut to this many model tokens.", min=16)] = 3072,
    max_new_tokens: Annotated[int, typer.Option(help="--rewrite: generation limit per document.", min=1)] = 4096,
    tp: Annotated[int, typer.Option(help="--backend vllm: tensor parallel size.", min=1)] = 1,
    dp: Annotated[int, typer.Option(help="--backend vllm: data parallel size.", min=1)] = 1,
    concurrency: Annotated[Optional[int], typer.Option(help="--rewrite: requests in flight.", min=1)] = None,
    pack_length: Annotated[int, typer.Option(help="Tokens per packed sequence.", min=2)] = 4096,
    pack_format: Annotated[str, typer.Option(help="Packed sequences as parquet or memmap (tokens.bin).")] = "parquet",
    tasks: Tasks = 1,
    workers: Workers = 1,
    license: Annotated[str, typer.Option(help="License of the source text, for the cards.")] = "other",
    gpus_per_task: Annotated[int, typer.Option(help="--rewrite: GPUs per model server (ray and slurm reserve them; "
                                               "local gives each task its own). The corpus pass uses none.", min=0)] = 0,
    overwrite: OverwriteOption = False,
    *,
    runs_on: ExecutorOptions = LOCAL,
    cleaning: Cleaning,
    corpus: InputSpec,
) -> None:
    """Build behavior-enriched and behavior-minimized CPT sets at one matched token budget, with cards and exports.

    The pass over the corpus (token counting) and the --rewrite job run on --executor; with slurm each is
    submitted in turn: rerun the command when the job has finished, and it continues from there.

    Examples:

        curate cpt --tags tags/cues_v6 --texts 'owm/*.parquet' --tokens 8.3M --tokenizer meta-llama/Llama-3.2-3B -o cpt/

        curate cpt --tags tags/llm_v1 --texts owm/ --tokens 8.3M --tokenizer Qwen/Qwen2.5-3B -k 2 --rewrite \\
            --model Qwen/Qwen2.5-32B-Instruct --backend vllm --tp 2 --pack-length 4096 -o cpt/

        curate cpt --tags /shared/tags/cues_v6 --texts /shared/owm --tokens 8.3M --tokenizer Qwen/Qwen2.5-3B --tasks 256 --executor slurm --slurm-partition cpu -o /shared/cpt
    """
    from curate.builders.cpt import CPTError, CPTSelection, RewriteOptions, SolutionJudgeOptions, run_cpt

    chosen = parse_behavior_list(behaviors)
    if not chosen:
        raise UnknownBehaviorError("--behaviors is empty")
    selection = CPTSelection(behaviors=chosen, min_behaviors=min_behaviors, min_count=min_count, seed=seed)
    if rewrite and not model:
        raise CPTError("--rewrite needs --model")
    options = RewriteOptions(model=model, backend=backend, endpoint_url=endpoint_url, max_doc_tokens=max_doc_tokens,
                             max_new_tokens=max_new_tokens, tp=tp, dp=dp, concurrency=concurrency) if rewrite else None
    if solution_judge not in ("cues", "llm"):
        raise CPTError(f"--solution-judge must be cues or llm, not {solution_judge!r}")
    judge_llm = require_solution and solution_judge == "llm"
    if judge_llm and not model:
        raise CPTError("--solution-judge llm needs --model")
    judge = SolutionJudgeOptions(model=model, backend=backend, endpoint_url=endpoint_url, max_doc_tokens=max_doc_tokens,
                                 tp=tp, dp=dp, concurrency=concurrency) if judge_llm else None
    if gpus_per_task and not (rewrite or judge_llm):
        fail("--gpus-per-task applies to --rewrite and --solution-judge llm only")
    from curate.pipelines.state import folder_signature
    from curate.pipelines.tag import file_fingerprints

    what = {"tags": tags, "texts": corpus.path, "tokens": tokens, "tokenizer": tokenizer, "behaviors": behaviors,
            "min_behaviors": min_behaviors, "min_count": min_count, "seed": seed, "tolerance": tolerance,
            "length_bins": length_bins, "length_match": length_match, "length_trim": length_trim, "oversample": oversample,
            "domain_key": domain_key, "text_key": corpus.text_key, "id_key": corpus.id_key, "split": corpus.split,
            **cleaning.arguments(), "rewrite": rewrite, "model": model,
            "max_doc_tokens": max_doc_tokens, "max_new_tokens": max_new_tokens, "pack_length": pack_length,
            "rewrite_oversample": rewrite_oversample, "require_solution": require_solution,
            "solution_judge": solution_judge,
            "pack_format": pack_format, "license": license}
    # An unfinished run (a Slurm stage submitted, an interrupt) keeps its record: the same command continues it.
    result = write_once(output, "cpt", what, lambda: run_cpt(
        tags, corpus, tokens, tokenizer, output, selection, tolerance=tolerance, length_bins=length_bins,
        length_match=length_match, length_trim=length_trim, domain_key=domain_key, rewrite=options,
        pack_length=pack_length, pack_format=pack_format, tasks=tasks, workers=workers,
        require_solution=solution_judge if require_solution else None, solution_judge=judge,
        rewrite_oversample=rewrite_oversample, license=license, oversample=oversample, executor=runs_on,
        overwrite=overwrite, **cleaning.arguments()),
        overwrite=overwrite, inputs={"tags": folder_signature(tags), "texts": file_fingerprints(corpus)})
    if result is None:
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
        from curate.builders.cpt import length_removed

        removed = length_removed(result.pools, report)
        span = f"{report.length_range[0]:,}-{report.length_range[1]:,} tokens" if report.length_range else "-"
        rows.append((f"length match ({report.length_match})", f"common range {span}; removed {removed['enriched']:,} "
                                                             f"enriched / {removed['minimized']:,} minimized candidates"))
    if result.rewrite:
        for variant in ("enriched", "minimized"):
            dropped = result.rewrite.dropped[variant]
            rows.append((f"{variant} rewritten", f"{result.rewrite.kept[variant]:,} kept, {sum(dropped.values()):,} dropped "
                                                 f"({', '.join(f'{k}: {v}' for k, v in dropped.items()) or 'none'})"))
        rows.append(("rewrite budgets", f"{result.rewrite.rematch_note} ({result.rewrite.rounds} round(s))"))
    if result.rejects:
        rows.append(("rejected records", ", ".join(f"{k}: {v:,}" for k, v in result.rejects.items())))
    rows += [("cards", f"{output}/enriched/README.md, {output}/minimized/README.md"), ("exports", str(output / "exports"))]
    summary(f"CPT corpora → {output}", rows)


"""Commands that label a corpus: tag, tag-llm, eval-gate, stats, distill, classifiers."""

from __future__ import annotations

import time

import typer
from rich.table import Table

from curate.behaviors import BEHAVIOR_NAMES
from curate.cli.app import app, console
from curate.cli.groups import job_command
from curate.cli.options import summary, tag_rows, update_rows
from curate.pipelines.jobs import DistillJob, EvalGateJob, StatsJob, TagJob, TagLLMJob


@app.command()
@job_command(TagJob)
def tag(job: TagJob) -> None:
    """Tag a corpus: write one attribute row per document to OUTPUT/CLASSIFIER/ (parquet).

    `--classifier llm --model M --backend vllm|endpoint|transformers` (or `cascade`) runs `curate tag-llm`.

    A rerun skips finished tasks (also after a kill, and across executors). Examples:

        curate tag --input 'corpus/*.jsonl' --output tags/ --tasks 64 --workers 2

        curate tag --input /shared/corpus --output /shared/tags --tasks 512 --executor ray --ray-address auto

        curate tag --input /shared/corpus --output /shared/tags --tasks 512 --executor slurm --slurm-partition cpu --slurm-dry-run

        curate tag --input 'corpus/*.parquet' --text-key text --output tags/ --classifier cues

        curate tag --input hf:open-web-math/open-web-math --streaming --limit 100000 --output tags/

        curate tag --classifier llm --model Qwen/Qwen2.5-32B-Instruct --backend vllm --input 'owm/*.parquet' -o tags/

        curate tag --classifier llm --model Qwen/Qwen2.5-32B-Instruct --backend vllm --tasks 8 --workers 4 --gpus-per-task 2 --input 'owm/*.parquet' -o tags/
    """
    from curate.classifiers import needs_model_server

    started = time.perf_counter()
    if needs_model_server(job.classifier):
        from curate.pipelines.tagging import tag as run_tag_job

        llm_tag_summary(run_tag_job(job))
        return
    from curate.pipelines.tag import tag_job  # cues start without the LLM job stack (curate.pipelines.tagging)

    result = tag_job(job)
    rows = tag_rows(result.tags_dir, result.rejects_dir, time.perf_counter() - started) + update_rows(result)
    summary(f"Tagged → {result.tags_dir}", rows)


@app.command()
@job_command(StatsJob)
def stats(job: StatsJob) -> None:
    """Prevalence, co-occurrence, count histogram and null rate per behavior (DuckDB over the shards).

    Example:

        curate stats tags/ --plot prevalence.png
    """
    from curate.pipelines.query import HISTOGRAM_BUCKETS
    from curate.pipelines.stats import tag_stats

    result = tag_stats(job)
    for u in result.unfinished:  # figures over tags whose tasks did not all finish describe part of the corpus
        console.print(f"[yellow]warning:[/] {u.tags_dir}: {u.unfinished} of {u.total} tagging tasks are unfinished, so "
                      "these figures leave part of the corpus out; run the same `curate tag` command again to finish")
    # Three narrow tables, behaviors abbreviated in column headers (legend below), so that an 80-column terminal
    # shows every header and every count whole, even with counts in the millions.
    short = dict(zip(BEHAVIOR_NAMES, ("verify", "backtrack", "subgoal", "backward"), strict=True))
    for s in result.classifiers:
        table = Table(title=f"{s.classifier}: {s.documents:,} documents, {s.characters:,} characters, {s.errors:,} errors")
        for column in ["behavior", "documents", "prevalence", "mean count", "null rate"]:
            table.add_column(column, justify="left" if column == "behavior" else "right")
        for b in BEHAVIOR_NAMES:
            table.add_row(b, f"{s.present[b]:,}", f"{100 * s.prevalence[b]:.1f} %", f"{s.mean_count_when_present[b]:.2f}",
                          f"{100 * s.null_rate[b]:.1f} %")
        console.print(table)
        console.print(per_behavior_table("documents by count", "count", short,
                                         {k: {b: s.histogram[b][k] for b in BEHAVIOR_NAMES} for k in HISTOGRAM_BUCKETS}))
        console.print(per_behavior_table("co-occurrence (documents with both)", "", short, s.cooccurrence))
        console.print(", ".join(f"{short[b]} = {b}" for b in BEHAVIOR_NAMES), soft_wrap=False)
        console.print(f"any behavior: {s.any_behavior:,}   none: {s.no_behavior:,}")
    if result.plot:
        console.print(f"plot → {result.plot}")


@app.command("tag-llm")
@job_command(TagLLMJob)
def tag_llm(job: TagLLMJob) -> None:
    """Tag a corpus with an LLM (llm_v1, or cascade_v1 with --gate) through datatrove's InferenceRunner.

    Shards land in OUTPUT/llm_v1/ with the raw answers for audit; `curate build --tags OUTPUT --classifier llm`
    then selects from them. Rerunning resumes. Every task starts its own server; with --gpus-per-task N each
    server gets N GPUs of its own (vLLM's --tp defaults to N). Examples:

        curate tag-llm --model Qwen/Qwen2.5-32B-Instruct --backend vllm --tp 2 --input 'owm/*.parquet' -o tags/

        curate tag-llm --model Qwen/Qwen2.5-32B-Instruct --backend vllm --tasks 8 --workers 4 --gpus-per-task 2 --input 'owm/*.parquet' -o tags/

        curate tag-llm --model Qwen/Qwen2.5-32B-Instruct --backend vllm --tasks 64 --workers 16 --gpus-per-task 2 --executor slurm --slurm-partition gpu --input /shared/owm -o /shared/tags

        curate tag-llm --model Qwen/Qwen2.5-7B-Instruct --backend vllm --tasks 32 --workers 8 --gpus-per-task 1 --executor ray --ray-address auto --input /shared/owm -o /shared/tags

        CURATE_API_KEY=... curate tag-llm --model gpt-4o-mini --tokenizer Qwen/Qwen2.5-7B-Instruct --backend endpoint --endpoint-url https://api.openai.com/v1 --mode joint --structured

        curate tag-llm --model Qwen/Qwen2.5-0.5B-Instruct --backend transformers --device cpu --gate cues --limit 50
    """
    from curate.pipelines.tagging import tag_llm as run_tag_llm_job

    llm_tag_summary(run_tag_llm_job(job))


def llm_tag_summary(result) -> None:
    """What an LLM tagging run (tag-llm, tag --classifier llm) did: its rows, requests, failures and throughput."""
    rows = [r for r in tag_rows(result.tags_dir, result.rejects_dir, result.seconds) if r[0] != "documents/s"]
    rows += [
        ("sent to the LLM", f"{result.llm_documents:,}"),
        ("requests", f"{result.requests:,}"),
        ("request failures (counts null)", f"{result.request_failures:,}"),
        *[(k, f"{100 * v:.1f} %" if k == "parse-failure rate" else f"{v:,.1f}") for k, v in result.rates().items()],
        ("prompt / generated tokens", f"{result.prompt_tokens:,} / {result.completion_tokens:,}"),
    ]
    summary(f"LLM-tagged → {result.tags_dir}", rows)


@app.command("eval-gate")
@job_command(EvalGateJob)
def eval_gate(job: EvalGateJob) -> None:
    """Recall of a cascade gate against LLM labels on a sample, and the share of LLM requests it saves.

    Example:

        curate eval-gate --labels tags/llm_v1 --input 'owm/*.parquet' --gate cues --sample 5000
    """
    from curate.pipelines.eval_gate import evaluate_gate

    report, missing = evaluate_gate(job)
    pct = lambda v: "-" if v is None else f"{100 * v:.1f} %"
    rows = [
        ("documents compared", f"{report.documents:,}"),
        ("LLM rows without counts (skipped)", f"{report.skipped_unlabelled:,}"),
        ("labelled ids not found in the input", f"{missing:,}"),
        ("recall, any behavior", pct(report.any_recall)),
        *[(f"  recall, {b}", f"{pct(r)}  (of {report.llm_positive[b]:,})") for b, r in report.recall.items()],
        ("LLM requests saved", pct(report.requests_saved)),
    ]
    summary(f"Gate {job.gate} vs {job.labels}", rows)


@app.command("distill")
@job_command(DistillJob)
def distill(job: DistillJob) -> None:
    """Distil a classifier's labels into heads on sentence embeddings (`distilled_v1`), for tagging at corpus scale on CPU.

    Examples:

        curate tag --input corpus/ --classifier cues --output tags

        curate distill --labels tags/cues_ngram_v1 --texts corpus/ --output models/distilled-cues

        curate tag --input big_corpus/ --classifier distilled:models/distilled-cues --output tags

        curate tag-llm --gate distilled:models/distilled-cues ...   (the heads as the cascade's gate)

        curate tag --input corpus/ --classifier spans_v1 --output tags

        curate distill --level sentence --labels tags/spans_v1 --texts corpus/ --output models/distilled-spans

        (sentence level: one score per sentence or line, trained on spans_v1's evidence units, tagged with evidence)
    """
    from curate.pipelines.distill import distill as run_distill_job

    report = run_distill_job(job)
    scope = "unit labels (per unit)" if report.level == "sentence" else "labels"
    table = Table(title=f"distilled_v1 ← {report.label_classifier} {scope} → {report.model_dir}", title_justify="left")
    for column in ("behavior", "train +/-", "test +/-", "threshold", "precision", "recall", "F1", "AUC", "acc (majority)"):
        table.add_column(column, justify="left" if column == "behavior" else "right")
    fmt = lambda v: "-" if v is None else f"{v:.3f}"
    for r in report.behaviors:
        c = r.label_counts
        table.add_row(
            r.behavior, f"{c['train']['positive']}/{c['train']['negative']}", f"{c['test']['positive']}/{c['test']['negative']}",
            fmt(r.threshold), fmt(r.precision), fmt(r.recall), fmt(r.f1), fmt(r.auc),
            "-" if r.accuracy is None else f"{r.accuracy:.3f} ({r.majority_accuracy:.3f})",
        )
    console.print(table)
    summary("Run", [
        ("documents used", f"{report.documents:,}"),
        *([("units (sentences or lines)", f"{report.units:,}")] if report.level == "sentence" else []),
        ("labelled ids without a text", f"{report.unmatched_ids:,}"),
        ("rejected records skipped", f"{report.skipped_rejects:,}"),
        ("embedding model", report.embedding_model),
        ("seconds", f"{report.seconds:.1f}"),
    ])
    for warning in report.warnings:
        console.print(f"[yellow]warning:[/] {warning}")


@app.command("classifiers")
def list_classifiers() -> None:
    """List the registered classifiers: name, what it is, and the bare names (cues) that point at it.

    The first column is the name to pass to --classifier; a family's bare name takes the version in brackets, or
    its newest. Example:

        curate classifiers | grep spans
    """
    from curate.classifiers.base import describe, registered_names, version_order

    names = sorted(registered_names(), key=version_order)
    width = max(map(len, names))
    for name in names:
        # stdout, so that the list pipes: the console is stderr
        typer.echo(f"{name:<{width}}  {describe(name)}".rstrip())


def per_behavior_table(title: str, first: str, short: dict[str, str], rows: dict[str, dict[str, int]]) -> Table:
    """One row per key of `rows`, one narrow column per behavior (abbreviated headers, so 80 columns suffice)."""
    table = Table(title=title)
    table.add_column(first)
    for b in BEHAVIOR_NAMES:
        table.add_column(short[b], justify="right")
    for key, counts in rows.items():
        table.add_row(key, *[f"{counts[b]:,}" for b in BEHAVIOR_NAMES])
    return table

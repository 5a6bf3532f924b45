"""The `curate` command line: thin; parses options, calls pipelines, shows progress and a summary."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.table import Table

from curate.behaviors import BEHAVIOR_NAMES, UnknownBehaviorError, parse_behavior_list

app = typer.Typer(
    help="Find cognitive behaviors (verification, backtracking, subgoal setting, backward chaining) in text "
    "and build the datasets that teach them.",
    no_args_is_help=True,
    rich_markup_mode="markdown",
)
console = Console(stderr=True)


@app.callback()
def main(
    ctx: typer.Context,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Also print datatrove's INFO log (each task's "
                                          "pipeline, files and stats); it is always kept under the run's _logs/.")] = False,
) -> None:
    """Find cognitive behaviors in text and build the datasets that teach them."""
    if not verbose:
        from curate.console import quiet_routine_logs

        ctx.call_on_close(quiet_routine_logs())

SAMPLE_CORPUS = Path(__file__).parent / "sample_data" / "corpus"

InputOption = Annotated[
    Optional[str],
    typer.Option("--input", "-i", help="File, directory, glob ('corpus/*.jsonl') or Hugging Face dataset 'hf:ORG/NAME'."),
]
TextKey = Annotated[str, typer.Option(help="Field holding the text.")]
IdKey = Annotated[str, typer.Option(help="Field holding the document id; missing ids become 'source path/position'.")]
Split = Annotated[str, typer.Option(help="Split of a Hugging Face dataset.")]
Streaming = Annotated[bool, typer.Option(help="Stream a Hugging Face dataset instead of downloading it.")]
ClassifierOption = Annotated[
    str, typer.Option("--classifier", "-c", help="Registered classifier ('cues' = newest cues_vN, or a versioned name).")
]
Tasks = Annotated[int, typer.Option(help="datatrove tasks (input files are split among them).", min=1)]
Workers = Annotated[int, typer.Option(help="Tasks run at the same time.", min=1)]
ExecutorKind = Annotated[str, typer.Option("--executor", help="Where tasks run: local, ray (a Ray cluster) or slurm (a job array).")]
RayAddress = Annotated[Optional[str], typer.Option(help="Ray cluster address (default: RAY_ADDRESS, else a local Ray).")]
SlurmPartition = Annotated[Optional[str], typer.Option(help="Slurm partition (--executor slurm).")]
SlurmTime = Annotated[str, typer.Option(help="Slurm time limit per task.")]
SlurmQos = Annotated[Optional[str], typer.Option(help="Slurm QOS.")]
SlurmDryRun = Annotated[bool, typer.Option("--slurm-dry-run", help="Write the sbatch script and pickled job; submit nothing.")]
CpusPerTask = Annotated[int, typer.Option(help="CPUs reserved per task (ray, slurm).", min=1)]
MemPerCpu = Annotated[float, typer.Option("--mem-per-cpu-gb", help="Memory per CPU in GB (ray, slurm).")]
DeviceOption = Annotated[str, typer.Option(help="--backend transformers: device for `transformers serve`.")]
GpusPerTask = Annotated[int, typer.Option(
    help="GPUs per task: ray and slurm reserve them; local gives each running task its own slice of the visible GPUs.", min=0)]


def _executor_options(kind, ray_address, partition, time_limit, qos, dry_run, cpus, mem, gpus):
    from curate.pipelines.executors import ExecutorConfigError, ExecutorOptions

    options = ExecutorOptions(kind=kind, ray_address=ray_address, partition=partition, time=time_limit, qos=qos,
                              dry_run=dry_run, cpus_per_task=cpus, mem_per_cpu_gb=mem, gpus_per_task=gpus)
    try:
        options.validate()
    except ExecutorConfigError as error:
        _fail(str(error))
    return options


def _submitted(error) -> None:
    console.print(f"[yellow]{error}[/]")
    raise typer.Exit(0)


def _fail(message: str) -> None:
    console.print(f"[bold red]error:[/] {message}")
    raise typer.Exit(2)


def _spec(input: str | None, text_key: str, id_key: str, split: str, streaming: bool):
    from curate.pipelines.readers import InputSpec

    if input is None:
        console.print(f"[yellow]No --input given: using the bundled sample corpus ({SAMPLE_CORPUS}).[/]")
        input = str(SAMPLE_CORPUS / "*.jsonl")
    spec = InputSpec(path=input, text_key=text_key, id_key=id_key, split=split, streaming=streaming)
    if not spec.is_hub:
        try:
            spec.folder_and_pattern()
        except FileNotFoundError as error:
            _fail(str(error))
    return spec


def _summary(title: str, rows: list[tuple[str, str]]) -> None:
    table = Table(title=title, show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column(justify="right")
    for key, value in rows:
        table.add_row(key, value)
    console.print(table)


def _tag_rows(tags_dir: Path, rejects_dir: Path, seconds: float) -> list[tuple[str, str]]:
    from curate.pipelines.query import behavior_stats, count_rejects, parquet_files

    stats = behavior_stats(tags_dir)[0] if parquet_files(tags_dir) else None
    rejects = count_rejects(rejects_dir)
    tagged = stats.documents - stats.errors if stats else 0
    read = (stats.documents if stats else 0) + sum(rejects.values())
    rows = [
        ("read", f"{read:,}"),
        ("tagged", f"{tagged:,}"),
        ("classifier errors (counts null)", f"{stats.errors if stats else 0:,}"),
        ("rejected", f"{sum(rejects.values()):,}" + (f"  ({', '.join(f'{k}: {v}' for k, v in rejects.items())})" if rejects else "")),
        ("characters", f"{stats.characters if stats else 0:,}"),
        ("documents/s", f"{read / seconds:,.1f}" if seconds > 0 else "-"),
    ]
    if stats:
        rows += [(f"  with {b}", f"{stats.present[b]:,} ({100 * stats.prevalence[b]:.1f} %)") for b in BEHAVIOR_NAMES]
    if rejects:
        rows.append(("rejects kept in", str(rejects_dir)))
    return rows


@app.command()
def tag(
    input: InputOption = None,
    output: Annotated[Path, typer.Option("--output", "-o", help="Tags root; shards go to OUTPUT/CLASSIFIER/.")] = Path("tags"),
    classifier: ClassifierOption = "cues",
    text_key: TextKey = "text",
    id_key: IdKey = "id",
    split: Split = "train",
    streaming: Streaming = False,
    tasks: Tasks = 1,
    workers: Workers = 1,
    batch_size: Annotated[int, typer.Option(help="Documents per classifier call.", min=1)] = 64,
    limit: Annotated[int, typer.Option(help="Read at most this many documents per task (-1: all).")] = -1,
    executor: ExecutorKind = "local",
    ray_address: RayAddress = None,
    slurm_partition: SlurmPartition = None,
    slurm_time: SlurmTime = "24:00:00",
    slurm_qos: SlurmQos = None,
    slurm_dry_run: SlurmDryRun = False,
    cpus_per_task: CpusPerTask = 1,
    mem_per_cpu_gb: MemPerCpu = 2.0,
    gpus_per_task: GpusPerTask = 0,
    model: Annotated[Optional[str], typer.Option(help="--classifier llm/cascade: the model (hub name or local dir).")] = None,
    backend: Annotated[str, typer.Option(help="--classifier llm/cascade: vllm, endpoint or transformers (as `curate tag-llm`).")] = "transformers",
    endpoint_url: Annotated[Optional[str], typer.Option(help="--backend endpoint: base URL; key from CURATE_API_KEY or OPENAI_API_KEY.")] = None,
    mode: Annotated[str, typer.Option(help="--classifier llm: per-behavior or joint.")] = "per-behavior",
    structured: Annotated[bool, typer.Option(help="--classifier llm: ask the server for JSON by schema.")] = False,
    gate: Annotated[Optional[str], typer.Option(help="--classifier llm: cheap gate classifier (cascade); cascade defaults to 'cues'.")] = None,
    device: DeviceOption = "auto",
    max_doc_tokens: Annotated[int, typer.Option(help="--classifier llm: truncate documents to this many model tokens.", min=16)] = 3072,
    concurrency: Annotated[Optional[int], typer.Option(help="--classifier llm: requests in flight.", min=1)] = None,
    server_arg: Annotated[Optional[list[str]], typer.Option(help="--classifier llm: extra server flag KEY=VALUE, repeatable.")] = None,
) -> None:
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
    from curate.classifiers import UnknownClassifierError, resolve_name
    from curate.pipelines.executors import JobSubmitted
    from curate.pipelines.tag import TagsMismatchError, run_tagging

    try:
        resolved, _ = resolve_name(classifier)
    except UnknownClassifierError as error:
        _fail(str(error))
    if resolved.startswith(("llm_", "cascade_")):
        if not model:
            _fail(f"--classifier {classifier} needs --model M (and --backend vllm|endpoint|transformers)")
        tag_llm(model=model, input=input, output=output, backend=backend, endpoint_url=endpoint_url, mode=mode,
                structured=structured, max_doc_tokens=max_doc_tokens, gate=gate or ("cues" if resolved.startswith("cascade_") else None),
                device=device, concurrency=concurrency, server_arg=server_arg, text_key=text_key, id_key=id_key, split=split,
                streaming=streaming, tasks=tasks, workers=workers, limit=limit, executor=executor, ray_address=ray_address,
                slurm_partition=slurm_partition, slurm_time=slurm_time, slurm_qos=slurm_qos, slurm_dry_run=slurm_dry_run,
                cpus_per_task=cpus_per_task, mem_per_cpu_gb=mem_per_cpu_gb, gpus_per_task=gpus_per_task)
        return
    if model:
        _fail("--model applies to --classifier llm or cascade only")

    spec = _spec(input, text_key, id_key, split, streaming)
    runs_on = _executor_options(executor, ray_address, slurm_partition, slurm_time, slurm_qos, slurm_dry_run,
                                cpus_per_task, mem_per_cpu_gb, gpus_per_task)
    started = time.perf_counter()
    try:
        result = run_tagging(spec, output, classifier, tasks=tasks, workers=workers, batch_size=batch_size, limit=limit,
                             executor=runs_on)
    except JobSubmitted as submitted:
        _submitted(submitted)
    except (UnknownClassifierError, TagsMismatchError, FileNotFoundError, RuntimeError, ValueError) as error:
        _fail(str(error))
    _summary(f"Tagged → {result.tags_dir}", _tag_rows(result.tags_dir, result.rejects_dir, time.perf_counter() - started))


@app.command()
def build(
    behaviors: Annotated[
        str,
        typer.Option(help="Comma-separated behaviors every document must show, or 'none' for documents with none. "
                     f"Names: {', '.join(BEHAVIOR_NAMES)} (aliases: subgoal, backchaining)."),
    ],
    input: InputOption = None,
    output: Annotated[Optional[Path], typer.Option("--output", "-o", help="Dataset directory (default: datasets/BEHAVIORS).")] = None,
    tags: Annotated[Optional[Path], typer.Option(help="Tags root to reuse across builds (default: OUTPUT/tags).")] = None,
    classifier: ClassifierOption = "cues",
    min_count: Annotated[int, typer.Option(help="Each chosen behavior must occur at least this often.", min=1)] = 1,
    exclude_behaviors: Annotated[Optional[str], typer.Option(help="Behaviors that must be absent.")] = None,
    limit: Annotated[Optional[int], typer.Option(help="Keep at most this many documents (seeded random sample).", min=1)] = None,
    seed: Annotated[int, typer.Option(help="Seed of the random sample.")] = 0,
    text_key: TextKey = "text",
    id_key: IdKey = "id",
    split: Split = "train",
    streaming: Streaming = False,
    tasks: Tasks = 1,
    workers: Workers = 1,
    license: Annotated[str, typer.Option(help="License of the source text, for the dataset card.")] = "other",
    dedup: Annotated[bool, typer.Option("--dedup", help="Remove exact and MinHash near duplicates from the built dataset.")] = False,
    decontam: Annotated[Optional[str], typer.Option(help="Remove rows overlapping these benchmarks (as `curate decontam --against`).")] = None,
    benchmarks_dir: Annotated[Optional[Path], typer.Option(help="Local copies of built-in benchmarks for --decontam.")] = None,
    executor: ExecutorKind = "local",
    ray_address: RayAddress = None,
    slurm_partition: SlurmPartition = None,
    slurm_time: SlurmTime = "24:00:00",
    slurm_qos: SlurmQos = None,
    slurm_dry_run: SlurmDryRun = False,
    cpus_per_task: CpusPerTask = 1,
    mem_per_cpu_gb: MemPerCpu = 2.0,
    gpus_per_task: GpusPerTask = 0,
) -> None:
    """Tag (reusing finished shards), select with DuckDB and write a parquet dataset with a card.

    With --executor slurm each stage is submitted as a job array; rerun the command when it has finished.

    Examples:

        curate build --behaviors backtracking                      # bundled sample corpus

        curate build --behaviors backtracking,verification --input 'corpus/*.jsonl' --output out/

        curate build --behaviors none --input corpus.parquet --output minimized/
    """
    from curate.classifiers import UnknownClassifierError
    from curate.pipelines.build import run_build
    from curate.pipelines.executors import JobSubmitted
    from curate.pipelines.query import Selection
    from curate.pipelines.tag import TagsMismatchError

    try:
        wanted = parse_behavior_list(behaviors, allow_none=True)
        excluded = parse_behavior_list(exclude_behaviors) or []
        if wanted == []:
            raise UnknownBehaviorError("--behaviors is empty; name at least one behavior, or 'none'")
        selection = Selection(behaviors=wanted, min_count=min_count, exclude=excluded, limit=limit, seed=seed)
    except (UnknownBehaviorError, ValueError) as error:
        _fail(str(error))
    sample = input is None
    spec = _spec(input, text_key, id_key, split, streaming)
    if output is None:
        output = Path("datasets") / (behaviors.replace(",", "+").replace(" ", "") or "none")
    started = time.perf_counter()
    try:
        result = run_build(
            spec, output, selection, tags_root=tags, classifier=classifier, tasks=tasks, workers=workers,
            license="apache-2.0" if sample else license, dedup=dedup, decontam=decontam, benchmarks_dir=benchmarks_dir,
            executor=_executor_options(executor, ray_address, slurm_partition, slurm_time, slurm_qos, slurm_dry_run,
                                       cpus_per_task, mem_per_cpu_gb, gpus_per_task),
        )
    except JobSubmitted as submitted:
        _submitted(submitted)
    except (UnknownClassifierError, TagsMismatchError, FileNotFoundError, RuntimeError, ValueError) as error:
        _fail(str(error))
    seconds = time.perf_counter() - started
    rows = _tag_rows(result.tags_dir, result.tags_dir / "rejects", seconds)
    rows.insert(4, ("selected", f"{result.selected:,}"))
    rows.insert(5, ("duplicate ids dropped across files", f"{result.cross_file_duplicates:,}"))
    rows += [("dataset", str(output / "data")), ("card", str(output / "README.md"))]
    _summary(f"Built {output}", rows)


@app.command()
def stats(
    directory: Annotated[Path, typer.Argument(help="Tags root, one classifier's shards, or a built dataset.")],
    plot: Annotated[Optional[Path], typer.Option(help="Also draw prevalence and co-occurrence to this PNG.")] = None,
) -> None:
    """Prevalence, co-occurrence, count histogram and null rate per behavior (DuckDB over the shards).

    Example:

        curate stats tags/ --plot prevalence.png
    """
    from curate.data_cards.plots import plot_prevalence
    from curate.pipelines.query import HISTOGRAM_BUCKETS, behavior_stats, parquet_files

    if not directory.exists():
        _fail(f"{directory} does not exist")
    if not parquet_files(directory):
        _fail(f"no parquet shards under {directory}; run `curate tag` first")
    all_stats = behavior_stats(directory)
    for s in all_stats:
        table = Table(title=f"{s.classifier}: {s.documents:,} documents, {s.characters:,} characters, {s.errors:,} errors")
        for column in ["behavior", "documents", "prevalence", "mean count", "null rate", *HISTOGRAM_BUCKETS]:
            table.add_column(column, justify="left" if column == "behavior" else "right")
        for b in BEHAVIOR_NAMES:
            table.add_row(
                b, f"{s.present[b]:,}", f"{100 * s.prevalence[b]:.1f} %", f"{s.mean_count_when_present[b]:.2f}",
                f"{100 * s.null_rate[b]:.1f} %", *[f"{s.histogram[b][k]:,}" for k in HISTOGRAM_BUCKETS],
            )
        console.print(table)
        co = Table(title="co-occurrence (documents with both)")
        co.add_column("")
        for b in BEHAVIOR_NAMES:
            co.add_column(b, justify="right")
        for a in BEHAVIOR_NAMES:
            co.add_row(a, *[f"{s.cooccurrence[a][b]:,}" for b in BEHAVIOR_NAMES])
        console.print(co)
        console.print(f"any behavior: {s.any_behavior:,}   none: {s.no_behavior:,}")
    if plot:
        console.print(f"plot → {plot_prevalence(all_stats, plot)}")


@app.command()
def multihop(
    input: Annotated[str, typer.Option("--input", "-i", help="GSM8K-style problems: jsonl/parquet file, glob, or 'hf:ORG/NAME'.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="Dataset directory.")],
    hops: Annotated[str, typer.Option(help="Hops per chain: a number or a range such as 2-4 (drawn uniformly).")] = "2-4",
    n: Annotated[int, typer.Option("--n", help="Chains to build.", min=1)] = 5000,
    seed: Annotated[int, typer.Option(help="Seed of the chain sampler.")] = 0,
    max_ratio: Annotated[float, typer.Option(help="Every intermediate value must stay within this factor of its original.", min=1.01)] = 10.0,
    tries_per_link: Annotated[int, typer.Option(help="Candidate links tried before a chain is abandoned.", min=1)] = 64,
    question_key: Annotated[str, typer.Option(help="Field holding the problem text.")] = "question",
    answer_key: Annotated[str, typer.Option(help="Field holding the worked solution with <<a=b>> annotations and '#### N'.")] = "answer",
    id_key: Annotated[str, typer.Option(help="Field holding the problem id (becomes each hop's source_id); else file/line.")] = "id",
    split: Split = "train",
    license: Annotated[str, typer.Option(help="License of the source problems, for the dataset card.")] = "mit",
    dedup: Annotated[bool, typer.Option("--dedup", help="Remove exact and MinHash near duplicates from the source problems before chaining.")] = False,
    decontam: Annotated[Optional[str], typer.Option(help="Remove source problems overlapping these benchmarks (as `curate decontam --against`).")] = None,
    benchmarks_dir: Annotated[Optional[Path], typer.Option(help="Local copies of built-in benchmarks for --decontam.")] = None,
) -> None:
    """Chain verifiable problems so that each answer feeds the next: `full`, `half` and `single` ablation splits.

    Solutions are re-executed from their calculator annotations (no eval); every link and every problem that
    could not be used is kept under OUTPUT/rejects/ with its reason. Examples:

        curate multihop --input gsm8k/train.jsonl --hops 2-4 --n 5000 --seed 0 --output datasets/multihop

        curate multihop --input gsm8k/test.jsonl --hops 3 --n 500 --output datasets/multihop-test

        curate multihop --input gsm8k/train.jsonl --dedup --decontam gsm8k,math500 --benchmarks-dir ../shared/data -o out/

    --dedup/--decontam clean the source problems before chaining, so the three splits stay matched.
    """
    from curate.pipelines.multihop import parse_hop_range, run_multihop

    try:
        hop_range = parse_hop_range(hops)
    except ValueError as error:
        _fail(str(error))
    spec = _spec(input, question_key, id_key, split, False)
    started = time.perf_counter()
    try:
        result = run_multihop(spec, output, n=n, hops=hop_range, seed=seed, max_ratio=max_ratio,
                              tries_per_link=tries_per_link, answer_key=answer_key, license=license, dedup=dedup,
                              decontam=decontam, benchmarks_dir=benchmarks_dir)
    except (FileNotFoundError, ValueError) as error:
        _fail(str(error))
    seconds = time.perf_counter() - started
    s = result.stats
    rows = [
        ("sources read / executable", f"{s.sources_read:,} / {s.sources_executable:,}"),
        ("sources set aside", ", ".join(f"{k}: {v:,}" for k, v in s.source_rejects.most_common()) or "0"),
        ("chains built", f"{s.rows.get('full', 0):,} of {n:,} asked ({s.chain_attempts:,} attempts)"),
        ("hop counts", ", ".join(f"{k}: {v:,}" for k, v in sorted(s.hop_counts.items()))),
        ("links accepted", f"{s.links_accepted:,} / {s.link_proposals:,} ({100 * s.acceptance_rate:.1f} %)"),
        ("links rejected", ", ".join(f"{k}: {v:,}" for k, v in s.link_rejects.most_common()) or "0"),
        ("rows full / half / single", " / ".join(f"{s.rows.get(k, 0):,}" for k in ("full", "half", "single"))),
        *_cleaning_rows(output, dedup, decontam),
        ("seconds", f"{seconds:,.1f}"),
        ("dataset", str(output / "data")),
        ("card", str(output / "README.md")),
        ("rejects", str(output / "rejects")),
    ]
    _summary(f"Built {output}", rows)


@app.command()
def publish(
    directory: Annotated[Path, typer.Argument(help="A built dataset: data files + README.md card.")],
    repo_id: Annotated[str, typer.Option("--repo-id", help="Dataset repo on the Hub, ORG/NAME.")],
    private: Annotated[bool, typer.Option(help="Create the repo private (an existing repo keeps its visibility).")] = False,
    dry_run: Annotated[bool, typer.Option(help="Validate and list what would be uploaded; upload nothing.")] = False,
    include_rejects: Annotated[bool, typer.Option(help="Upload rejects/ (records dropped, with reasons) too.")] = True,
    endpoint: Annotated[Optional[str], typer.Option(help="Hub endpoint (default: HF_ENDPOINT or huggingface.co).")] = None,
    message: Annotated[Optional[str], typer.Option(help="Commit message.")] = None,
) -> None:
    """Check a dataset (loads with `datasets`; card metadata license, task_categories, size_categories,
    configs) and push it to the Hugging Face Hub as one commit. The token comes from HF_TOKEN and is never printed.

    Examples:

        curate publish datasets/backtracking --repo-id my-org/backtracking --dry-run

        HF_TOKEN=hf_... curate publish datasets/backtracking --repo-id my-org/backtracking --private
    """
    from curate.pipelines.publish import InvalidDatasetError, UploadError
    from curate.pipelines.publish import publish as run_publish

    try:
        result = run_publish(directory, repo_id, private=private, dry_run=dry_run, include_rejects=include_rejects,
                             endpoint=endpoint, commit_message=message)
    except (InvalidDatasetError, ValueError) as error:
        _fail(str(error))
    except UploadError as error:
        console.print(f"[bold red]upload failed:[/] {error}")
        raise typer.Exit(1)
    plan = result.plan
    if dry_run:
        table = Table(title=f"Would upload to {repo_id} ({'private' if private else 'public'})", title_justify="left")
        table.add_column("path in repo")
        table.add_column("bytes", justify="right")
        for f in plan.files:
            table.add_row(f.path_in_repo, f"{f.size:,}")
        console.print(table)
    rows = [("repo", repo_id), ("files", f"{len(plan.files):,}"), ("bytes", f"{plan.total_bytes:,}")]
    rows += [(f"rows {config}/{split}", f"{n:,}") for config, splits in plan.rows.items() for split, n in splits.items()]
    if result.commit_url:
        rows += [("commit", result.commit_url)] + [("deleted stale", p) for p in result.deleted]
    _summary("Dry run: nothing uploaded" if dry_run else f"Published {directory}", rows)


@app.command()
def deploy(
    name: Annotated[Optional[list[str]], typer.Option("--name", "-n", help="Deployment to register (repeatable; default: all).")] = None,
    prefect_file: Annotated[Optional[Path], typer.Option(help="prefect.yaml (default: found in this folder or above).")] = None,
) -> None:
    """Register the deployments of prefect.yaml with the Prefect server (wraps `prefect deploy`).

    Start a server and a worker first (see prefect.yaml's header). Examples:

        curate deploy

        curate deploy --name nightly-tag
    """
    from curate.flows.deployments import ServerNotReady, find_project_file
    from curate.flows.deployments import deploy as run_deploy

    try:
        code = run_deploy(prefect_file or find_project_file(), name or None)
    except (FileNotFoundError, ValueError, ServerNotReady) as error:
        _fail(str(error))
    raise typer.Exit(code)


@app.command()
def serve(
    name: Annotated[Optional[list[str]], typer.Option("--name", "-n", help="Deployment to serve (repeatable; default: all).")] = None,
    prefect_file: Annotated[Optional[Path], typer.Option(help="prefect.yaml (default: found in this folder or above).")] = None,
) -> None:
    """Run the deployments of prefect.yaml in this process with Prefect's `serve`; their schedules fire until Ctrl-C.

    Examples:

        curate serve

        curate serve --name nightly-tag    # then: prefect deployment run tag/nightly-tag
    """
    from curate.flows.deployments import find_project_file
    from curate.flows.deployments import serve as run_serve

    try:
        run_serve(prefect_file or find_project_file(), name or None)
    except (FileNotFoundError, ValueError) as error:
        _fail(str(error))


@app.command("export")
def export_dataset(
    dataset: Annotated[Path, typer.Argument(help="Built dataset (DATASET/data/SPLIT-*.parquet) or parquet file/folder.")],
    to: Annotated[str, typer.Option("--to", help="verl | trl | openrlhf | sft | cpt")],
    output: Annotated[Path, typer.Option("--output", "-o", help="Export directory (OUTPUT/data/SPLIT-*.parquet).")],
    instruction: Annotated[Optional[str], typer.Option(help="Appended to every prompt; default: the reward's own "
                                                      "answer-format instruction; '' for none.")] = None,
    system: Annotated[Optional[str], typer.Option(help="System message put before every prompt.")] = None,
) -> None:
    """Export a built dataset for a trainer: verl, TRL (GRPO), OpenRLHF, SFT {query, completion} or CPT text.

    Examples:

        curate export datasets/countdown --to verl --output exports/countdown-verl

        curate export datasets/priming --to sft --output exports/priming-sft
    """
    from curate.pipelines.export import ExportError, run_export

    try:
        result = run_export(dataset, to, output, instruction=instruction, system=system)
    except ExportError as error:
        _fail(str(error))
    rows = [(f"rows ({split})", f"{n:,}") for split, n in sorted(result.rows.items())]
    rows += [(f"rejected: {reason}", f"{n:,}") for reason, n in result.rejected.items()]
    rows += [("data", str(output / "data")), ("rejects", str(output / "rejects" / "export.jsonl"))]
    _summary(f"Exported {dataset} → {to}", rows)


@app.command("reward-path")
def reward_path() -> None:
    """Print the reward module verl loads (`custom_reward_function.path`; name: `compute_score`) and the rewards.

    Example:

        python -m verl.trainer.main_ppo custom_reward_function.path=$(curate reward-path) ...
    """
    from curate.rewards import REWARD_PATH, REWARDS

    for name, reward in sorted(REWARDS.items()):
        console.print(f"[bold]{name}[/]: {reward.description}")
    print(REWARD_PATH)


@app.command("audit-verifier")
def audit_verifier(
    pairs: Annotated[Path, typer.Option(help="JSON lines {id, gold, candidate, equivalent[, type]}.")],
    reward: Annotated[str, typer.Option(help="Registered reward (data_source or short name).")] = "math",
    verdicts: Annotated[Optional[Path], typer.Option(help="Write each pair's verdict (id, verdict true/false/null).")] = None,
    threads: Annotated[int, typer.Option(help="Pairs scored at the same time.", min=1)] = 4,
    show: Annotated[int, typer.Option(help="Slowest cases and wrong verdicts to list.", min=0)] = 10,
) -> None:
    """Measure a reward's precision and recall on labeled answer pairs; warn when recall < 0.95.

    Examples:

        curate audit-verifier --pairs tests/verifier_pairs/pairs.jsonl

        curate audit-verifier --pairs my_pairs.jsonl --reward curate/multihop --verdicts verdicts.jsonl
    """
    from curate.pipelines.audit import RECALL_FLOOR, read_pairs, run_audit, write_verdicts
    from curate.rewards import UnknownRewardError, get_reward

    if not pairs.is_file():
        _fail(f"{pairs} does not exist")
    try:
        get_reward(reward)
    except UnknownRewardError as error:
        _fail(str(error))
    labeled, rejects = read_pairs(pairs)
    for reject in rejects:
        console.print(f"[yellow]skipped line {reject['line']}: {reject['reason']}[/]")
    if not labeled:
        _fail(f"no valid pairs in {pairs}")
    result = run_audit(labeled, reward=reward, threads=threads)

    def pct(value):
        return "-" if value is None else f"{100 * value:.1f} %"

    table = Table(title=f"{result.reward} on {len(labeled):,} pairs ({result.seconds:.1f} s)")
    for column in ["answer type", "pairs", "precision", "recall", "accuracy", "undecided"]:
        table.add_column(column, justify="left" if column == "answer type" else "right")
    for kind, m in [*result.by_type.items(), ("ALL", result.overall)]:
        table.add_row(kind, f"{m.pairs:,}", pct(m.precision), pct(m.recall), pct(m.accuracy), f"{m.undecided:,}")
    console.print(table)
    if show:
        slow = Table(title="slowest cases")
        for column in ["id", "seconds", "verdict", "gold", "candidate"]:
            slow.add_column(column)
        for v in result.slowest(show):
            slow.add_row(v.id, f"{v.seconds:.2f}", str(v.verdict), str(v.gold)[:40], v.candidate[:60])
        console.print(slow)
        wrong = Table(title="wrong verdicts (label → verdict)")
        for column in ["id", "label", "verdict", "gold", "candidate"]:
            wrong.add_column(column)
        for v in result.errors()[:show]:
            wrong.add_row(v.id, str(v.equivalent), str(v.verdict), str(v.gold)[:40], v.candidate[:60])
        console.print(wrong)
    if verdicts:
        console.print(f"verdicts → {write_verdicts(result, verdicts)}")
    if result.recall_warning:
        console.print(f"[bold white on red] WARNING: recall {pct(result.overall.recall)} is below "
                      f"{pct(RECALL_FLOOR)}: this verifier rejects correct answers, and RL with it can end worse "
                      "than no RL at all. [/]")


@app.command()
def priming(
    variant: Annotated[str, typer.Option(help="all_strategies, only_backtracking, backtracking_verification, "
                                         "backtracking_subgoal, backtracking_backward, negative_control, empty_cot, "
                                         "placeholder_cot; a comma list or 'all' builds each into OUTPUT/VARIANT.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="Dataset directory.")],
    answers: Annotated[str, typer.Option(help="correct, or incorrect (well-formed expressions with a wrong value).")] = "correct",
    n: Annotated[int, typer.Option("--n", help="Training rows.", min=0)] = 1000,
    test_n: Annotated[int, typer.Option(help="Test rows (no problem is in both splits).", min=0)] = 100,
    writer: Annotated[str, typer.Option(help="symbolic (the solver's search narrated) or llm (a teacher model).")] = "symbolic",
    classifier: ClassifierOption = "cues",
    numbers: Annotated[int, typer.Option(help="Numbers per problem.", min=2, max=6)] = 4,
    number_range: Annotated[str, typer.Option(help="LOW,HIGH of the numbers.")] = "1,99",
    target_range: Annotated[str, typer.Option(help="LOW,HIGH of the target.")] = "10,100",
    fractional_division: Annotated[bool, typer.Option(help="Allow divisions with a fractional result.")] = False,
    max_dead_ends: Annotated[int, typer.Option(help="Most dead ends a backtracking trace narrates.", min=1)] = 3,
    tokenizer: Annotated[Optional[str], typer.Option(help="Tokenizer (hub name or local dir) for placeholder_cot "
                                                     "lengths and token statistics.")] = None,
    placeholder_for: Annotated[str, typer.Option(help="Variant whose trace length placeholder_cot matches.")] = "all_strategies",
    seed: Annotated[int, typer.Option(help="Seed of problems and phrasing.")] = 0,
    model: Annotated[Optional[str], typer.Option(help="--writer llm: the teacher model (hub name or local dir).")] = None,
    backend: Annotated[str, typer.Option(help="--writer llm: vllm, endpoint or transformers.")] = "transformers",
    endpoint_url: Annotated[Optional[str], typer.Option(help="--backend endpoint: base URL; key from CURATE_API_KEY or OPENAI_API_KEY.")] = None,
    device: DeviceOption = "auto",
    temperature: Annotated[float, typer.Option(help="--writer llm: sampling temperature of the teacher.", min=0)] = 0.7,
    max_trace_tokens: Annotated[int, typer.Option(help="--writer llm: generation budget per trace.", min=16)] = 2048,
    concurrency: Annotated[Optional[int], typer.Option(help="--writer llm: requests in flight.", min=1)] = None,
    dedup: Annotated[bool, typer.Option("--dedup", help="Remove exact and MinHash near duplicates (judged on the completion).")] = False,
    decontam: Annotated[Optional[str], typer.Option(help="Remove rows whose question or completion overlaps these benchmarks (as `curate decontam --against`).")] = None,
    benchmarks_dir: Annotated[Optional[Path], typer.Option(help="Local copies of built-in benchmarks for --decontam.")] = None,
) -> None:
    """Countdown priming datasets: behavior-controlled traces, checked by a classifier, with SFT and verl columns.

    Examples:

        curate priming --variant only_backtracking --answers incorrect --n 1000 --output priming/bt_wrong

        curate priming --variant all --n 1000 --tokenizer Qwen/Qwen2.5-3B --output priming/

        curate priming --variant placeholder_cot --tokenizer meta-llama/Llama-3.2-3B --output priming/placeholder

        curate priming --variant backtracking_verification --writer llm --model Qwen/Qwen2.5-72B-Instruct --backend vllm --n 1000 -o priming/bv_llm

        curate priming --variant all_strategies --dedup --decontam gsm8k --benchmarks-dir ../shared/data -o priming/bt
    """
    from curate.pipelines.priming import ALL_VARIANTS, PrimingConfig, PrimingError, run_priming

    def pair(text: str, name: str) -> tuple[int, int]:
        try:
            low, high = (int(part) for part in text.split(","))
        except ValueError:
            _fail(f"--{name} takes LOW,HIGH, got {text!r}")
        return low, high

    variants = list(ALL_VARIANTS) if variant.strip() == "all" else [v.strip() for v in variant.split(",") if v.strip()]
    if variant.strip() == "all" and not tokenizer:
        variants.remove("placeholder_cot")
        console.print("[yellow]placeholder_cot skipped: it needs --tokenizer.[/]")
    rows = []
    for name in variants:
        config = PrimingConfig(
            variant=name, answers=answers, n=n, test_n=test_n, seed=seed, writer=writer, classifier=classifier,
            n_numbers=numbers, number_range=pair(number_range, "number-range"),
            target_range=pair(target_range, "target-range"), integer_division=not fractional_division,
            max_dead_ends=max_dead_ends, tokenizer=tokenizer, placeholder_for=placeholder_for,
            llm={"model": model, "backend": backend, "endpoint_url": endpoint_url, "device": device, "temperature": temperature,
                 "max_tokens": max_trace_tokens, "concurrency": concurrency} if writer == "llm" else None,
        )
        target = output / name if len(variants) > 1 else output
        try:
            result = run_priming(config, target, dedup=dedup, decontam=decontam, benchmarks_dir=benchmarks_dir)
        except (PrimingError, ValueError, OSError) as error:
            _fail(str(error))
        splits = result.stats["splits"]
        accuracy = {s: f"{100 * v['answer_accuracy']:.0f} %" for s, v in splits.items()}
        rows.append((f"{name} ({answers})", f"{result.rows['train']:,} train / {result.rows['test']:,} test, "
                     f"accepted {100 * result.acceptance_rate:.1f} % of {result.attempted:,}, accuracy {accuracy} → {target}"))
        rows += [(f"  rejected: {reason}", f"{count:,}") for reason, count in result.rejected.items()]
        rows += [(f"  {label}", value) for label, value in _cleaning_rows(target, dedup, decontam)]
    _summary("Priming datasets", rows)


@app.command("dedup")
def dedup_command(
    input: Annotated[str, typer.Argument(help="Corpus (file, directory, glob) or a built dataset directory (DIR/data).")],
    output: Annotated[Path, typer.Option("--output", "-o", help="Output directory (may be the input dataset: replaced in place).")],
    threshold: Annotated[float, typer.Option(help="Jaccard similarity above which two texts are near duplicates.", min=0.05, max=0.99)] = 0.75,
    ngrams: Annotated[int, typer.Option(help="Word shingle size of MinHash.", min=1)] = 5,
    text_key: Annotated[Optional[str], typer.Option(help="Field compared (default: question if present, else text).")] = None,
    id_key: IdKey = "id",
    tasks: Tasks = 1,
    workers: Workers = 1,
    executor: ExecutorKind = "local",
    ray_address: RayAddress = None,
    slurm_partition: SlurmPartition = None,
    slurm_time: SlurmTime = "24:00:00",
    slurm_qos: SlurmQos = None,
    slurm_dry_run: SlurmDryRun = False,
    cpus_per_task: CpusPerTask = 1,
    mem_per_cpu_gb: MemPerCpu = 2.0,
) -> None:
    """Remove exact duplicates (normalized-text hash) and near duplicates (datatrove MinHash).

    Removed rows go to OUTPUT/rejects/duplicates.jsonl with the id of the row kept in their place.
    The four MinHash stages run in order; with --executor slurm they are submitted as one chain of job
    arrays: rerun the command when the last has finished. A rerun resumes unless the input or options changed.

    Examples:

        curate dedup 'corpus/*.jsonl' --output deduped/ --threshold 0.8

        curate dedup datasets/math_rl --output datasets/math_rl      # in place, card section updated

        curate dedup /shared/corpus --output /shared/deduped --tasks 256 --executor slurm --slurm-partition cpu
    """
    from curate.pipelines.dedup import dedup
    from curate.pipelines.executors import JobSubmitted

    runs_on = _executor_options(executor, ray_address, slurm_partition, slurm_time, slurm_qos, slurm_dry_run,
                                cpus_per_task, mem_per_cpu_gb, 0)
    started = time.perf_counter()
    try:
        result = dedup(input, output, text_key=text_key, id_key=id_key, threshold=threshold, n_grams=ngrams,
                       tasks=tasks, workers=workers, executor=runs_on)
    except JobSubmitted as submitted:
        _submitted(submitted)
    except (FileNotFoundError, RuntimeError, ValueError) as error:
        _fail(str(error))
    seconds = time.perf_counter() - started
    _summary(f"Deduplicated → {output}", [
        ("read", f"{result.read:,}"), ("exact duplicates", f"{result.exact_removed:,}"),
        ("near duplicates", f"{result.near_removed:,}"), ("kept", f"{result.kept:,}"),
        ("unreadable (in rejects/)", f"{result.unreadable:,}"),
        ("documents/s", f"{result.read / seconds:,.0f}" if seconds > 0 else "-"),
        ("removed rows", str(output / "rejects" / "duplicates.jsonl")),
    ])


@app.command("decontam")
def decontam_command(
    input: Annotated[str, typer.Argument(help="Corpus (file, directory, glob) or a built dataset directory (DIR/data).")],
    against: Annotated[str, typer.Option(help="Comma-separated benchmarks: built-in names (gsm8k, math500, aqua, mathqa, "
                                         "mmlu_stem, arc_challenge, aime24, amc23), files or hf:ORG/NAME@split; "
                                         "'=FIELD+FIELD' picks a source's text fields.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="Output directory (may be the input dataset: replaced in place).")],
    fields: Annotated[Optional[str], typer.Option(help="Comma-separated row fields to check (default: question,answer if present, else text).")] = None,
    ngrams: Annotated[int, typer.Option(help="Word n-gram size.", min=2)] = 13,
    short_min_words: Annotated[int, typer.Option(help="A field shorter than --ngrams is matched whole if it has at least this many words (0: never).", min=0)] = 4,
    benchmarks_dir: Annotated[Optional[Path], typer.Option(help="Local copies of the built-in benchmarks (or $CURATE_BENCHMARKS_DIR).")] = None,
    id_key: IdKey = "id",
    tasks: Tasks = 1,
    workers: Workers = 1,
    executor: ExecutorKind = "local",
    ray_address: RayAddress = None,
    slurm_partition: SlurmPartition = None,
    slurm_time: SlurmTime = "24:00:00",
    slurm_qos: SlurmQos = None,
    slurm_dry_run: SlurmDryRun = False,
    cpus_per_task: CpusPerTask = 1,
    mem_per_cpu_gb: MemPerCpu = 2.0,
) -> None:
    """Remove rows that share an n-gram with benchmark items; every removal names the item and the n-gram.

    The benchmark index is built here; the filter runs on the executor. With --executor slurm, rerun the
    command when the job array has finished.

    Examples:

        curate decontam datasets/math_rl --against gsm8k,math500 --benchmarks-dir ../shared/data --output datasets/math_rl

        curate decontam corpus.jsonl --against 'eval/aime.jsonl=problem+solution,hf:openai/gsm8k@test=question' -o clean/

        curate decontam /shared/corpus --against /shared/eval/aime.jsonl=problem -o /shared/clean --tasks 256 --executor slurm --slurm-partition cpu
    """
    from curate.pipelines.decontam import BenchmarkError, decontaminate
    from curate.pipelines.executors import JobSubmitted

    runs_on = _executor_options(executor, ray_address, slurm_partition, slurm_time, slurm_qos, slurm_dry_run,
                                cpus_per_task, mem_per_cpu_gb, 0)
    started = time.perf_counter()
    try:
        result = decontaminate(
            input, output, against, fields=[f.strip() for f in fields.split(",") if f.strip()] if fields else None,
            id_key=id_key, n_grams=ngrams, short_min_tokens=short_min_words, benchmarks_dir=benchmarks_dir,
            tasks=tasks, workers=workers, executor=runs_on,
        )
    except JobSubmitted as submitted:
        _submitted(submitted)
    except (BenchmarkError, FileNotFoundError, RuntimeError, ValueError) as error:
        _fail(str(error))
    seconds = time.perf_counter() - started
    rows = [("read", f"{result.read:,}"), ("removed", f"{result.removed:,}"), ("kept", f"{result.kept:,}")]
    rows += [(f"  {name} ({info['items']:,} items)", f"{result.hits.get(name, 0):,}") for name, info in result.index.benchmarks.items()]
    rows += [("documents/s", f"{result.read / seconds:,.0f}" if seconds > 0 else "-"),
             ("removed rows", str(output / "rejects" / "contaminated.jsonl"))]
    _summary(f"Decontaminated → {output}", rows)


@app.command("mcqa")
def mcqa(
    input: Annotated[list[str], typer.Option("--input", "-i", help="File, directory, glob or hf:NAME[:SPLIT]; repeatable.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="Dataset directory (data/, rejects/, README.md).")],
    format: Annotated[str, typer.Option("--format", help="auto | aqua | mmlu_csv | jsonl | arc | alpaca")] = "auto",
    workers: Annotated[int, typer.Option(help="Processes checking answers with math-verify.")] = 1,
    limit: Annotated[int, typer.Option(help="Read at most this many records per input (-1: all).")] = -1,
    reformulate: Annotated[bool, typer.Option("--reformulate", help="LLM rewrite of each kept stem plus an LLM judge (Big-Math); needs --model.")] = False,
    model: Annotated[Optional[str], typer.Option(help="--reformulate: the model (hub name or local dir).")] = None,
    backend: Annotated[str, typer.Option(help="--reformulate: vllm, endpoint or transformers.")] = "transformers",
    endpoint_url: Annotated[Optional[str], typer.Option(help="--backend endpoint: base URL; key from CURATE_API_KEY or OPENAI_API_KEY.")] = None,
    device: DeviceOption = "auto",
    max_tokens: Annotated[int, typer.Option(help="--reformulate: generation budget per rewrite.", min=16)] = 1024,
    concurrency: Annotated[Optional[int], typer.Option(help="--reformulate: requests in flight.", min=1)] = None,
    dedup: Annotated[bool, typer.Option("--dedup", help="Remove exact and MinHash near duplicates (judged on the question).")] = False,
    decontam: Annotated[Optional[str], typer.Option(help="Remove rows whose question overlaps these benchmarks (as `curate decontam --against`).")] = None,
    benchmarks_dir: Annotated[Optional[Path], typer.Option(help="Local copies of built-in benchmarks for --decontam.")] = None,
) -> None:
    """Convert multiple choice to open-answer questions: keep items whose stem stands without its options and
    whose gold option math-verify grades uniquely; every other item goes to rejects/ with its reason.

    Examples:

        curate mcqa --input ../shared/data/aqua/dev.json --output datasets/aqua-open

        curate mcqa -i "mmlu/*_test.csv" -i mathqa/test.json --format auto --output datasets/mcqa-open --workers 4

        curate mcqa -i mathqa/test.json --dedup --decontam aqua,mmlu_stem --benchmarks-dir ../shared/data -o out/

        curate mcqa -i aqua/dev.json --reformulate --model Qwen/Qwen2.5-72B-Instruct --backend vllm -o datasets/aqua-open
    """
    from curate.pipelines.mcqa import FormatError, run_mcqa

    if model and not reformulate:
        _fail("--model applies to --reformulate only")
    if reformulate and not model:
        _fail("--reformulate needs --model M (and --backend vllm|endpoint|transformers)")
    llm = {"model": model, "backend": backend, "endpoint_url": endpoint_url, "device": device, "max_tokens": max_tokens,
           "temperature": 0.0, "concurrency": concurrency} if reformulate else None
    started = time.perf_counter()
    try:
        result = run_mcqa(list(input), output, fmt=format, workers=workers, limit=limit, dedup=dedup, decontam=decontam,
                          benchmarks_dir=benchmarks_dir, reformulate=llm)
    except (FormatError, FileNotFoundError, ValueError) as error:
        _fail(str(error))
    total = result.kept + result.rejected
    rows = [("items", f"{total:,}"), ("kept", f"{result.kept:,} ({100 * result.kept / max(total, 1):.1f} %)")]
    rows += [(f"rejected: {reason}", f"{n:,}") for reason, n in result.by_reason.items()]
    rows += [(f"type: {kind}", f"{n:,}") for kind, n in result.answer_types.items()]
    rows += _cleaning_rows(output, dedup, decontam)
    rows += [("seconds", f"{time.perf_counter() - started:.1f}"), ("dataset", str(output / "data")),
             ("rejects", str(output / "rejects" / "rejects.jsonl")), ("card", str(output / "README.md"))]
    _summary(f"MCQA → open answer: {output}", rows)


@app.command("tag-llm")
def tag_llm(
    model: Annotated[str, typer.Option(help="Model: hub name or local directory (also the tokenizer unless --tokenizer).")],
    input: InputOption = None,
    output: Annotated[Path, typer.Option("--output", "-o", help="Tags root; shards go to OUTPUT/llm_v1/ (or cascade_v1/).")] = Path("tags"),
    backend: Annotated[str, typer.Option(help="vllm (spawns `vllm serve`), endpoint (OpenAI-compatible URL), transformers (spawns `transformers serve`).")] = "transformers",
    endpoint_url: Annotated[Optional[str], typer.Option(help="Base URL for --backend endpoint; key from CURATE_API_KEY or OPENAI_API_KEY.")] = None,
    mode: Annotated[str, typer.Option(help="per-behavior (four requests sharing the document prefix) or joint (one JSON answer).")] = "per-behavior",
    structured: Annotated[bool, typer.Option(help="Ask the server for JSON by schema (response_format).")] = False,
    max_doc_tokens: Annotated[int, typer.Option(help="Truncate documents to this many model tokens, at the last newline.", min=16)] = 3072,
    max_answer_tokens: Annotated[Optional[int], typer.Option(help="Generation budget per answer (default 48 per-behavior, 96 joint).", min=1)] = None,
    tokenizer: Annotated[Optional[str], typer.Option(help="Tokenizer for truncation when the model name is not loadable here.")] = None,
    gate: Annotated[Optional[str], typer.Option(help="Cascade: only documents this cheap classifier flags reach the LLM (e.g. 'cues').")] = None,
    tp: Annotated[Optional[int], typer.Option(help="vLLM tensor parallelism (default: --gpus-per-task, else 1).", min=1)] = None,
    dp: DataParallelOption = 1,
    server_arg: Annotated[Optional[list[str]], typer.Option(help="Extra server flag KEY=VALUE (or KEY), repeatable: --server-arg gpu-memory-utilization=0.9")] = None,
    device: DeviceOption = "auto",
    concurrency: Annotated[Optional[int], typer.Option(help="Requests in flight (default: vllm 256, endpoint 32, transformers 4).", min=1)] = None,
    request_timeout: Annotated[float, typer.Option(help="Seconds per request before it is retried.", min=1)] = 300.0,
    records_per_chunk: Annotated[int, typer.Option(help="Documents per checkpoint chunk (a killed run resumes from the last one).", min=1)] = 500,
    text_key: TextKey = "text",
    id_key: IdKey = "id",
    split: Split = "train",
    streaming: Streaming = False,
    tasks: Tasks = 1,
    workers: Workers = 1,
    limit: Annotated[int, typer.Option(help="Read at most this many documents per task (-1: all).")] = -1,
    executor: ExecutorKind = "local",
    ray_address: RayAddress = None,
    slurm_partition: SlurmPartition = None,
    slurm_time: SlurmTime = "24:00:00",
    slurm_qos: SlurmQos = None,
    slurm_dry_run: SlurmDryRun = False,
    cpus_per_task: CpusPerTask = 1,
    mem_per_cpu_gb: MemPerCpu = 2.0,
    gpus_per_task: GpusPerTask = 0,
) -> None:
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
    from curate.pipelines.executors import JobSubmitted
    from curate.pipelines.llm_tag import LLMTagConfigError, LLMTagOptions, run_llm_tagging
    from curate.pipelines.tag import TagsMismatchError

    server_args = {}
    for item in server_arg or []:
        key, sep, value = item.partition("=")
        server_args[key.strip().lstrip("-")] = value if sep else True
    options = LLMTagOptions(
        model=model, backend=backend, mode=mode, structured=structured, max_doc_tokens=max_doc_tokens,
        max_answer_tokens=max_answer_tokens, tokenizer=tokenizer, endpoint_url=endpoint_url, tp=tp, dp=dp,
        server_args=server_args, concurrency=concurrency, request_timeout=request_timeout,
        records_per_chunk=records_per_chunk, gate=gate, device=device,
    )
    runs_on = _executor_options(executor, ray_address, slurm_partition, slurm_time, slurm_qos, slurm_dry_run,
                                cpus_per_task, mem_per_cpu_gb, gpus_per_task)
    spec = _spec(input, text_key, id_key, split, streaming)
    try:
        result = run_llm_tagging(spec, output, options, tasks=tasks, workers=workers, limit=limit, executor=runs_on)
    except JobSubmitted as submitted:
        _submitted(submitted)
    except (LLMTagConfigError, TagsMismatchError, FileNotFoundError, RuntimeError, ValueError) as error:
        _fail(str(error))
    rows = [r for r in _tag_rows(result.tags_dir, result.rejects_dir, result.seconds) if r[0] != "documents/s"]
    rows += [
        ("sent to the LLM", f"{result.llm_documents:,}"),
        ("requests", f"{result.requests:,}"),
        ("request failures (counts null)", f"{result.request_failures:,}"),
        *[(k, f"{100 * v:.1f} %" if k == "parse-failure rate" else f"{v:,.1f}") for k, v in result.rates().items()],
        ("prompt / generated tokens", f"{result.prompt_tokens:,} / {result.completion_tokens:,}"),
    ]
    _summary(f"LLM-tagged → {result.tags_dir}", rows)


@app.command("eval-gate")
def eval_gate(
    labels: Annotated[Path, typer.Option(help="LLM tags (e.g. tags/llm_v1) to measure the gate against.")],
    input: InputOption = None,
    gate: Annotated[str, typer.Option(help="The cheap classifier used as the gate.")] = "cues",
    sample: Annotated[int, typer.Option(help="LLM-labelled documents to sample.", min=1)] = 2000,
    seed: Annotated[int, typer.Option(help="Seed of the sample.")] = 0,
    text_key: TextKey = "text",
    id_key: IdKey = "id",
    split: Split = "train",
    streaming: Streaming = False,
) -> None:
    """Recall of a cascade gate against LLM labels on a sample, and the share of LLM requests it saves.

    Example:

        curate eval-gate --labels tags/llm_v1 --input 'owm/*.parquet' --gate cues --sample 5000
    """
    from curate.pipelines.llm_tag import evaluate_gate

    spec = _spec(input, text_key, id_key, split, streaming)
    try:
        report, missing = evaluate_gate(spec, labels, gate=gate, sample=sample, seed=seed)
    except (FileNotFoundError, ValueError) as error:
        _fail(str(error))
    pct = lambda v: "-" if v is None else f"{100 * v:.1f} %"  # noqa: E731
    rows = [
        ("documents compared", f"{report.documents:,}"),
        ("LLM rows without counts (skipped)", f"{report.skipped_unlabelled:,}"),
        ("labelled ids not found in the input", f"{missing:,}"),
        ("recall, any behavior", pct(report.any_recall)),
        *[(f"  recall, {b}", f"{pct(r)}  (of {report.llm_positive[b]:,})") for b, r in report.recall.items()],
        ("LLM requests saved", pct(report.requests_saved)),
    ]
    _summary(f"Gate {gate} vs {labels}", rows)


def _cleaning_rows(output: Path, dedup: bool, decontam: str | None) -> list[tuple[str, str]]:
    """Summary lines of a builder's --dedup / --decontam, from the reports they leave in OUTPUT/.curate/."""
    import json

    rows = []
    if dedup:
        report = json.loads((output / ".curate" / "dedup.json").read_text())
        rows.append(("duplicates removed", f"{report['exact_removed']:,} exact, {report['near_removed']:,} near "
                                           f"(of {report['read']:,})"))
    if decontam:
        report = json.loads((output / ".curate" / "decontam.json").read_text())
        hits = ", ".join(f"{name} {n:,}" for name, n in report["hits"].items()) or "none"
        rows.append(("contaminated removed", f"{report['removed']:,} of {report['read']:,} ({hits})"))
    return rows


@app.command("cpt")
def cpt(
    tags: Annotated[Path, typer.Option(help="One classifier's attribute shards (e.g. tags/cues_v2).")],
    texts: Annotated[str, typer.Option(help="The corpus the tags were made from (file, folder, glob or hf:NAME).")],
    tokens: Annotated[str, typer.Option(help="Token budget of each set, e.g. 8.3M.")],
    tokenizer: Annotated[str, typer.Option(help="Tokenizer (path or hub name) that counts and packs the tokens.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="Output folder: enriched/, minimized/, exports/.")],
    behaviors: Annotated[str, typer.Option(help="Chosen behaviors (comma-separated).")] = ",".join(BEHAVIOR_NAMES),
    min_behaviors: Annotated[int, typer.Option("--min-behaviors", "-k", help="Enriched: at least k chosen behaviors.", min=1)] = 1,
    min_count: Annotated[int, typer.Option(help="A behavior counts as shown from this many instances.", min=1)] = 1,
    seed: Annotated[int, typer.Option(help="Seed of the random sample.")] = 0,
    tolerance: Annotated[float, typer.Option(help="Allowed relative gap of each token total to the budget.")] = 0.01,
    length_bins: Annotated[int, typer.Option(help="Length strata for matching the two length distributions.", min=1)] = 10,
    length_match: Annotated[str, typer.Option(help="common: cut both pools to their common length range and fill both "
                                              "to the length profile both can supply; range: the cut only; none: "
                                              "stratified filling only.")] = "common",
    length_trim: Annotated[float, typer.Option(help="Quantile trimmed off each end of each pool before the common "
                                               "length range is taken.", min=0.0, max=0.49)] = 0.025,
    oversample: Annotated[float, typer.Option(help="Candidates read into each pool, as a multiple of the budget (at the "
                                              "most characters a token takes): more gives the matching more to "
                                              "choose from.", min=1.0)] = 2.0,
    domain_key: Annotated[Optional[str], typer.Option(help="Tag column or corpus field to match the domain mix on "
                                                      "(default: a `domain` tag column where there is one).")] = None,
    text_key: TextKey = "text",
    id_key: IdKey = "id",
    split: Split = "train",
    streaming: Streaming = False,
    dedup: Annotated[bool, typer.Option("--dedup", help="Remove exact and near duplicates from the candidates first.")] = False,
    decontam: Annotated[Optional[str], typer.Option(help="Remove candidates overlapping these benchmarks.")] = None,
    benchmarks_dir: Annotated[Optional[Path], typer.Option(help="Local copies of built-in benchmarks for --decontam.")] = None,
    rewrite: Annotated[bool, typer.Option("--rewrite", help="Rewrite both sets as question / thoughts / answer.")] = False,
    model: Annotated[Optional[str], typer.Option(help="--rewrite: the model (path or name).")] = None,
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
    executor: ExecutorKind = "local",
    ray_address: RayAddress = None,
    slurm_partition: SlurmPartition = None,
    slurm_time: SlurmTime = "24:00:00",
    slurm_qos: SlurmQos = None,
    slurm_dry_run: SlurmDryRun = False,
    cpus_per_task: CpusPerTask = 1,
    mem_per_cpu_gb: MemPerCpu = 2.0,
    gpus_per_task: Annotated[int, typer.Option(help="--rewrite: GPUs per model server (ray and slurm reserve them; "
                                               "local gives each task its own). The corpus pass uses none.", min=0)] = 0,
) -> None:
    """Build behavior-enriched and behavior-minimized CPT sets at one matched token budget, with cards and exports.

    The pass over the corpus (token counting) and the --rewrite job run on --executor; with slurm each is
    submitted in turn: rerun the command when the job has finished, and it continues from there.

    Examples:

        curate cpt --tags tags/cues_v2 --texts 'owm/*.parquet' --tokens 8.3M --tokenizer meta-llama/Llama-3.2-3B -o cpt/

        curate cpt --tags tags/llm_v1 --texts owm/ --tokens 8.3M --tokenizer Qwen/Qwen2.5-3B -k 2 --rewrite \\
            --model Qwen/Qwen2.5-32B-Instruct --backend vllm --tp 2 --pack-length 4096 -o cpt/

        curate cpt --tags /shared/tags/cues_v2 --texts /shared/owm --tokens 8.3M --tokenizer Qwen/Qwen2.5-3B --tasks 256 --executor slurm --slurm-partition cpu -o /shared/cpt
    """
    from curate.pipelines.cpt import CPTError, CPTSelection, RewriteOptions, run_cpt
    from curate.pipelines.executors import JobSubmitted

    try:
        chosen = parse_behavior_list(behaviors)
        if not chosen:
            raise UnknownBehaviorError("--behaviors is empty")
        selection = CPTSelection(behaviors=chosen, min_behaviors=min_behaviors, min_count=min_count, seed=seed)
        if rewrite and not model:
            raise CPTError("--rewrite needs --model")
    except (UnknownBehaviorError, CPTError) as error:
        _fail(str(error))
    spec = _spec(texts, text_key, id_key, split, streaming)
    options = RewriteOptions(model=model, backend=backend, endpoint_url=endpoint_url, max_doc_tokens=max_doc_tokens,
                             max_new_tokens=max_new_tokens, tp=tp, dp=dp, concurrency=concurrency) if rewrite else None
    if gpus_per_task and not rewrite:
        _fail("--gpus-per-task applies to --rewrite only")
    runs_on = _executor_options(executor, ray_address, slurm_partition, slurm_time, slurm_qos, slurm_dry_run,
                                cpus_per_task, mem_per_cpu_gb, gpus_per_task)
    try:
        result = run_cpt(tags, spec, tokens, tokenizer, output, selection, tolerance=tolerance, length_bins=length_bins,
                         length_match=length_match, length_trim=length_trim, domain_key=domain_key, dedup=dedup, decontam=decontam, benchmarks_dir=benchmarks_dir,
                         rewrite=options, pack_length=pack_length, pack_format=pack_format, tasks=tasks, workers=workers,
                         license=license, oversample=oversample, executor=runs_on)
    except JobSubmitted as submitted:
        _submitted(submitted)
    except (CPTError, FileNotFoundError, RuntimeError, ValueError) as error:
        _fail(str(error))
    report = result.report
    rows = [
        ("budget", f"{report.budget:,} tokens (± {100 * report.tolerance:g} %)"),
        ("enriched", f"{report.enriched_documents:,} documents, {report.enriched_tokens:,} tokens"),
        ("minimized", f"{report.minimized_documents:,} documents, {report.minimized_tokens:,} tokens"),
        ("length KS statistic", f"{report.ks_statistic:.4f}"),
        ("candidates", f"{result.pools.get('enriched', 0):,} enriched / {result.pools.get('minimized', 0):,} minimized"),
    ]
    if report.length_match != "none":
        from curate.pipelines.cpt import length_removed

        removed = length_removed(result.pools, report)
        span = f"{report.length_range[0]:,}-{report.length_range[1]:,} tokens" if report.length_range else "-"
        rows.append((f"length match ({report.length_match})", f"common range {span}; removed {removed['enriched']:,} "
                                                             f"enriched / {removed['minimized']:,} minimized candidates"))
    if result.rewrite:
        for variant in ("enriched", "minimized"):
            dropped = result.rewrite.dropped[variant]
            rows.append((f"{variant} rewritten", f"{result.rewrite.kept[variant]:,} kept, {sum(dropped.values()):,} dropped "
                                                 f"({', '.join(f'{k}: {v}' for k, v in dropped.items()) or 'none'})"))
    if result.rejects:
        rows.append(("rejected records", ", ".join(f"{k}: {v:,}" for k, v in result.rejects.items())))
    rows += [("cards", f"{output}/enriched/README.md, {output}/minimized/README.md"), ("exports", str(output / "exports"))]
    _summary(f"CPT corpora → {output}", rows)


def _sampling_options(model, k, backend, endpoint_url, temperature, top_p, max_tokens, instruction, system, device,
                      concurrency, tp, dp, server_arg):
    from curate.pipelines.passrate import SamplingOptions

    server_args = {}
    for item in server_arg or []:
        key, sep, value = item.partition("=")
        server_args[key.strip().lstrip("-")] = value if sep else True
    return SamplingOptions(model=model, k=k, backend=backend, endpoint_url=endpoint_url, temperature=temperature,
                           top_p=top_p, max_tokens=max_tokens, instruction=instruction, system=system, device=device,
                           concurrency=concurrency, tp=tp, dp=dp, server_args=server_args)


BackendOption = Annotated[str, typer.Option(help="vllm (spawns `vllm serve`), endpoint (OpenAI-compatible URL), transformers (spawns `transformers serve`).")]
EndpointOption = Annotated[Optional[str], typer.Option(help="Base URL for --backend endpoint; key from CURATE_API_KEY or OPENAI_API_KEY.")]
ServerArgOption = Annotated[Optional[list[str]], typer.Option(help="Extra server flag KEY=VALUE (or KEY), repeatable.")]
# Sampling options shared by the commands that sample a policy (filter-passrate, audit-policy).
TemperatureOption = Annotated[float, typer.Option(help="Sampling temperature.", min=0)]
TopPOption = Annotated[float, typer.Option(help="Nucleus sampling.")]
MaxTokensOption = Annotated[int, typer.Option(help="Generation budget per sample.", min=1)]
SystemOption = Annotated[Optional[str], typer.Option(help="System message before every prompt.")]
ConcurrencyOption = Annotated[Optional[int], typer.Option(help="Requests in flight.", min=1)]
TensorParallelOption = Annotated[int, typer.Option(help="vLLM tensor parallelism.", min=1)]
DataParallelOption = Annotated[int, typer.Option(help="vLLM data parallelism.", min=1)]


@app.command("filter-passrate")
def filter_passrate(
    dataset: Annotated[Path, typer.Option(help="Built dataset with RL columns (question, data_source, ground truth).")],
    model: Annotated[str, typer.Option(help="The policy: hub name or local directory.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="Filtered dataset (OUTPUT/data), samples (OUTPUT/rates).")],
    k: Annotated[int, typer.Option(help="Samples per prompt.", min=1)] = 8,
    band: Annotated[str, typer.Option(help="LOW,HIGH: keep prompts whose pass rate is strictly inside.")] = "0,1",
    backend: BackendOption = "transformers",
    endpoint_url: EndpointOption = None,
    temperature: TemperatureOption = 1.0,
    top_p: TopPOption = 1.0,
    max_tokens: MaxTokensOption = 1024,
    instruction: Annotated[Optional[str], typer.Option(help="Appended to every prompt; default: the reward's own instruction; '' for none.")] = None,
    system: SystemOption = None,
    device: DeviceOption = "auto",
    concurrency: ConcurrencyOption = None,
    tp: TensorParallelOption = 1,
    dp: DataParallelOption = 1,
    server_arg: ServerArgOption = None,
    limit: Annotated[int, typer.Option(help="Sample at most this many prompts (-1: all).")] = -1,
    tasks: Tasks = 1,
    workers: Workers = 1,
    executor: ExecutorKind = "local",
    ray_address: RayAddress = None,
    slurm_partition: SlurmPartition = None,
    slurm_time: SlurmTime = "24:00:00",
    slurm_qos: SlurmQos = None,
    slurm_dry_run: SlurmDryRun = False,
    cpus_per_task: CpusPerTask = 1,
    mem_per_cpu_gb: MemPerCpu = 2.0,
    gpus_per_task: GpusPerTask = 0,
) -> None:
    """Keep the prompts a policy solves sometimes but not always: k samples per prompt, scored by the row's reward.

    Rerunning with another --band reuses the samples. Each task starts its own model server; with --executor
    slurm, rerun the command when the job has finished. Examples:

        curate filter-passrate --dataset datasets/math --model Qwen/Qwen2.5-1.5B-Instruct --backend vllm --k 8 --band 0,1 -o datasets/math-pr

        curate filter-passrate --dataset datasets/math --model Qwen/Qwen2.5-1.5B-Instruct --k 8 --band 0.1,0.9 -o datasets/math-pr

        curate filter-passrate --dataset /shared/math --model Qwen/Qwen2.5-7B-Instruct --backend vllm --tasks 16 --gpus-per-task 1 --executor slurm --slurm-partition gpu -o /shared/math-pr
    """
    from curate.pipelines.executors import JobSubmitted
    from curate.pipelines.passrate import PassRateError, parse_band, run_passrate_filter

    runs_on = _executor_options(executor, ray_address, slurm_partition, slurm_time, slurm_qos, slurm_dry_run,
                                cpus_per_task, mem_per_cpu_gb, gpus_per_task)
    try:
        options = _sampling_options(model, k, backend, endpoint_url, temperature, top_p, max_tokens, instruction, system,
                                    device, concurrency, tp, dp, server_arg)
        result = run_passrate_filter(dataset, output, options, band=parse_band(band), limit=limit, tasks=tasks, workers=workers,
                                     executor=runs_on)
    except JobSubmitted as submitted:
        _submitted(submitted)
    except (PassRateError, RuntimeError) as error:
        _fail(str(error))
    sampling = result.sampling
    rows = [(f"kept ({split})", f"{n:,}") for split, n in sorted(result.kept.items())]
    rows += [(f"dropped: {reason}", f"{n:,}") for reason, n in result.rejected.most_common()]
    rows += [(f"prompts with {c}/{result.k} correct", f"{n:,}") for c, n in sorted(result.histogram.items())]
    rows += [("samples", f"{sampling.samples:,} ({sampling.completion_tokens:,} tokens, {sampling.seconds:.0f} s)"),
             ("data", str(output / "data")), ("rejects", str(output / "rejects"))]
    _summary(f"Pass rate of {model} in ({band}) → {output}", rows)


@app.command("audit-policy")
def audit_policy(
    model: Annotated[str, typer.Option(help="The policy: hub name or local directory.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="Report, samples and prompts.")] = Path("policy-audit"),
    task: Annotated[Optional[str], typer.Option(help="Generated task: countdown (default unless --dataset).")] = None,
    dataset: Annotated[Optional[Path], typer.Option(help="Prompts from a built dataset with RL columns instead of a task.")] = None,
    n: Annotated[int, typer.Option(help="Prompts.", min=1)] = 200,
    k: Annotated[int, typer.Option(help="Samples per prompt.", min=1)] = 1,
    seed: Annotated[int, typer.Option(help="Seed of the generated task prompts.")] = 0,
    classifier: ClassifierOption = "cues",
    backend: BackendOption = "transformers",
    endpoint_url: EndpointOption = None,
    temperature: TemperatureOption = 1.0,
    top_p: TopPOption = 1.0,
    max_tokens: MaxTokensOption = 1024,
    system: SystemOption = None,
    device: DeviceOption = "auto",
    concurrency: ConcurrencyOption = None,
    tp: TensorParallelOption = 1,
    dp: DataParallelOption = 1,
    server_arg: ServerArgOption = None,
) -> None:
    """Sample a policy on a task, label the behaviors in its outputs, report each behavior's rate and the accuracy.

    Run it before RL: a model whose outputs never verify or backtrack needs priming first. Examples:

        curate audit-policy --model Qwen/Qwen2.5-3B --task countdown --n 200 --backend vllm

        curate audit-policy --model Qwen/Qwen2.5-1.5B-Instruct --dataset datasets/math --n 100 --k 4 --device cpu
    """
    from curate.pipelines.passrate import PassRateError
    from curate.pipelines.policy_audit import PolicyAuditError, run_policy_audit

    try:
        options = _sampling_options(model, k, backend, endpoint_url, temperature, top_p, max_tokens, None, system, device,
                                    concurrency, tp, dp, server_arg)
        result = run_policy_audit(output, options, task=task or (None if dataset else "countdown"), dataset=dataset, n=n,
                                  seed=seed, classifier=classifier)
    except (PolicyAuditError, PassRateError, RuntimeError) as error:
        _fail(str(error))
    pct = lambda v: "-" if v is None else f"{100 * v:.1f} %"  # noqa: E731
    rows = [("samples / prompts", f"{result.samples:,} / {result.prompts:,}"),
            ("accuracy", f"{pct(result.accuracy)} ({result.correct:,} / {result.scored:,} scored)"),
            ("cut at the token limit / empty / request errors", f"{result.truncated:,} / {result.empty:,} / {result.request_errors:,}"),
            ("samples without behavior labels", f"{result.unlabelled:,}")]
    rows += [(f"{b}", f"{pct(r.rate)} of outputs; accuracy {pct(r.accuracy_with)} with, {pct(r.accuracy_without)} without")
             for b, r in result.behaviors.items()]
    rows.append(("report", str(output / "README.md")))
    _summary(f"Behavior audit of {model} on {result.task} ({result.classifier})", rows)


@app.command("handoff")
def handoff(
    dataset: Annotated[Path, typer.Argument(help="Built dataset (DATASET/data/SPLIT-*.parquet).")],
    trainer: Annotated[str, typer.Option(help="verl | trl")],
    output: Annotated[Path, typer.Option("--output", "-o", help="Kit directory: exports, config/scripts, README.md.")],
    instruction: Annotated[Optional[str], typer.Option(help="Appended to every prompt; default: the reward's own instruction; '' for none.")] = None,
    system: SystemOption = None,
) -> None:
    """Write what to run next: verl (config fragment + run_verl.sh) or TRL (train_sft.py / train_grpo.py), with the export.

    Examples:

        curate handoff datasets/math-pr --trainer verl --output kits/math-verl && MODEL=Qwen/Qwen2.5-3B kits/math-verl/run_verl.sh

        curate handoff datasets/priming --trainer trl --output kits/priming && python kits/priming/train_sft.py --model Qwen/Qwen2.5-0.5B
    """
    from curate.pipelines.handoff import HandoffError, run_handoff

    try:
        result = run_handoff(dataset, trainer, output, instruction=instruction, system=system)
    except HandoffError as error:
        _fail(str(error))
    rows = [(f"{part} rows ({split})", f"{n:,}") for part, export in result.exports.items() for split, n in sorted(export.rows.items())]
    rows += [(f"reward {name}", f"{n:,} rows") for name, n in sorted(result.data_sources.items())]
    rows += [(f"skipped {part}", why) for part, why in result.skipped.items()]
    rows += [("wrote", ", ".join(p.name for p in result.files))]
    _summary(f"{trainer} launch kit → {output}", rows)


@app.command("distill")
def distill(
    labels: Annotated[Path, typer.Option(help="Attribute shards to learn from (e.g. tags/cues_v2 or tags/llm_v1).")],
    texts: Annotated[str, typer.Option(help="The corpus those tags were made from (file, directory, glob or hf:NAME).")],
    output: Annotated[Path, typer.Option("--output", "-o", help="New model directory (heads, thresholds, metrics, PR plot).")],
    embedding_model: Annotated[str, typer.Option(help="SentenceTransformer path or name; the default is bundled (offline).")] = "all-MiniLM-L6-v2",
    max_chunks: Annotated[int, typer.Option(help="Token windows embedded per long document, spread over it.", min=1)] = 8,
    validation: Annotated[float, typer.Option(help="Share of documents for choosing thresholds.", min=0.05, max=0.45)] = 0.15,
    test: Annotated[float, typer.Option(help="Share of documents held out for the report.", min=0.05, max=0.45)] = 0.15,
    min_positives: Annotated[int, typer.Option(help="Fewer positive (or negative) training labels: no head, and a warning.", min=1)] = 5,
    regularization: Annotated[float, typer.Option(help="Inverse L2 strength C of the logistic-regression heads.", min=1e-6)] = 1.0,
    seed: Annotated[int, typer.Option(help="Seed of the train/validation/test split.")] = 0,
    limit: Annotated[int, typer.Option(help="Use at most this many labelled documents (-1: all).")] = -1,
    batch_size: Annotated[int, typer.Option(help="Text windows per embedding batch.", min=1)] = 64,
    text_key: TextKey = "text",
    id_key: IdKey = "id",
    split: Split = "train",
    streaming: Streaming = False,
) -> None:
    """Distil a classifier's labels into heads on sentence embeddings (`distilled_v1`), for tagging at corpus scale on CPU.

    Examples:

        curate tag --input corpus/ --classifier cues --output tags

        curate distill --labels tags/cues_v2 --texts corpus/ --output models/distilled-cues

        curate tag --input big_corpus/ --classifier distilled:models/distilled-cues --output tags

        curate tag-llm --gate distilled:models/distilled-cues ...   (the heads as the cascade's gate)
    """
    from curate.pipelines.distill import DistillError, train_distilled

    spec = _spec(texts, text_key, id_key, split, streaming)
    try:
        report = train_distilled(
            labels, spec, output, embedding_model=embedding_model, max_chunks=max_chunks, validation=validation, test=test,
            min_positives=min_positives, regularization=regularization, seed=seed, limit=limit, batch_size=batch_size,
        )
    except (DistillError, FileNotFoundError) as error:
        _fail(str(error))
    table = Table(title=f"distilled_v1 ← {report.label_classifier} labels → {report.model_dir}", title_justify="left")
    for column in ("behavior", "train +/-", "test +/-", "threshold", "precision", "recall", "F1", "AUC", "acc (majority)"):
        table.add_column(column, justify="left" if column == "behavior" else "right")
    fmt = lambda v: "-" if v is None else f"{v:.3f}"  # noqa: E731
    for r in report.behaviors:
        c = r.label_counts
        table.add_row(
            r.behavior, f"{c['train']['positive']}/{c['train']['negative']}", f"{c['test']['positive']}/{c['test']['negative']}",
            fmt(r.threshold), fmt(r.precision), fmt(r.recall), fmt(r.f1), fmt(r.auc),
            "-" if r.accuracy is None else f"{r.accuracy:.3f} ({r.majority_accuracy:.3f})",
        )
    console.print(table)
    _summary("Run", [
        ("documents used", f"{report.documents:,}"),
        ("labelled ids without a text", f"{report.unmatched_ids:,}"),
        ("rejected records skipped", f"{report.skipped_rejects:,}"),
        ("embedding model", report.embedding_model),
        ("seconds", f"{report.seconds:.1f}"),
    ])
    for warning in report.warnings:
        console.print(f"[yellow]warning:[/] {warning}")


@app.command("classifiers")
def list_classifiers() -> None:
    """List the registered classifiers."""
    from curate.classifiers import registered_names

    for name in registered_names():
        console.print(name)


if __name__ == "__main__":
    app()

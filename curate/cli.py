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
        ("documents/s", f"{read / seconds:,.0f}" if seconds > 0 else "-"),
    ]
    if stats:
        rows += [(f"  with {b}", f"{stats.present[b]:,} ({100 * stats.prevalence[b]:.1f} %)") for b in BEHAVIOR_NAMES]
    if rejects:
        rows.append(("rejects kept in", str(rejects_dir)))
    return rows


@app.command()
def tag(
    input: InputOption = None,
    output: Annotated[Path, typer.Option("--output", "-o", help="Tags root; shards go to OUTPUT/<classifier>/.")] = Path("tags"),
    classifier: ClassifierOption = "cues",
    text_key: TextKey = "text",
    id_key: IdKey = "id",
    split: Split = "train",
    streaming: Streaming = False,
    tasks: Tasks = 1,
    workers: Workers = 1,
    batch_size: Annotated[int, typer.Option(help="Documents per classifier call.", min=1)] = 64,
    limit: Annotated[int, typer.Option(help="Read at most this many documents per task (-1: all).")] = -1,
) -> None:
    """Tag a corpus: write one attribute row per document to OUTPUT/<classifier>/ (parquet).

    A rerun skips finished tasks. Examples:

        curate tag --input 'corpus/*.parquet' --text-key text --output tags/ --classifier cues

        curate tag --input hf:open-web-math/open-web-math --streaming --limit 100000 --output tags/
    """
    from curate.classifiers import UnknownClassifierError
    from curate.pipelines.tag import TagsMismatchError, run_tagging

    spec = _spec(input, text_key, id_key, split, streaming)
    started = time.perf_counter()
    try:
        result = run_tagging(spec, output, classifier, tasks=tasks, workers=workers, batch_size=batch_size, limit=limit)
    except (UnknownClassifierError, TagsMismatchError, FileNotFoundError, RuntimeError) as error:
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
    output: Annotated[Optional[Path], typer.Option("--output", "-o", help="Dataset directory (default: datasets/<behaviors>).")] = None,
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
) -> None:
    """Tag (reusing finished shards), select with DuckDB and write a parquet dataset with a card.

    Examples:

        curate build --behaviors backtracking                      # bundled sample corpus

        curate build --behaviors backtracking,verification --input 'corpus/*.jsonl' --output out/

        curate build --behaviors none --input corpus.parquet --output minimized/
    """
    from curate.classifiers import UnknownClassifierError
    from curate.pipelines.build import run_build
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
            license="apache-2.0" if sample else license,
        )
    except (UnknownClassifierError, TagsMismatchError, FileNotFoundError, RuntimeError) as error:
        _fail(str(error))
    seconds = time.perf_counter() - started
    rows = _tag_rows(result.tags_dir, result.tags_dir / "rejects", seconds)
    rows.insert(4, ("selected", f"{result.selected:,}"))
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


@app.command("classifiers")
def list_classifiers() -> None:
    """List the registered classifiers."""
    from curate.classifiers import registered_names

    for name in registered_names():
        console.print(name)


if __name__ == "__main__":
    app()

"""Dataset cards generated from measured statistics with huggingface_hub's card machinery.

One template family for every builder: templates/dataset.md lays out the header, parameters and the
command that reproduces the set, the builder's own measured sections, plots, the marked reports of
cleaning steps (dedup, decontam), fields, loading and limitations. `render_card` fills it; `save_card`
checks the result the way the Hub will read it (DatasetCard.load and the required metadata) before it
replaces README.md.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path

import pyarrow.parquet as pq
from huggingface_hub import DatasetCard, DatasetCardData

import curate
from curate.behaviors import BEHAVIOR_NAMES
from curate.data_cards.plots import plot_prevalence
from curate.dataset_files import DATA, files_under, split_of
from curate.errors import CurateError
from curate.files import atomic_path, write_text_atomic

TEMPLATES = Path(__file__).parent / "templates"

LIMITATIONS = (
    "Counts come from an automatic classifier and carry its errors; see the project's bench figures for its "
    "precision and recall per behavior on a hand-labeled set. A behavior absent from the counts may still be "
    "present in words the classifier does not know."
)


def size_category(n: int) -> str:
    for limit, name in [(1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M"),
                        (10_000_000, "1M<n<10M"), (100_000_000, "10M<n<100M"), (1_000_000_000, "100M<n<1B"),
                        (10**10, "1B<n<10B"), (10**11, "10B<n<100B"), (10**12, "100B<n<1T")]:
        if n < limit:
            return name
    return "n>1T"


def stats_table(stats: list) -> str:
    if not stats:
        return "_No documents._"
    lines = ["| classifier | behavior | documents with it | prevalence | mean count when present | null rate |",
             "|---|---|---|---|---|---|"]
    for s in stats:
        for b in BEHAVIOR_NAMES:
            lines.append(
                f"| {s.classifier} | {b} | {s.present[b]:,} | {100 * s.prevalence[b]:.1f} % | "
                f"{s.mean_count_when_present[b]:.2f} | {100 * s.null_rate[b]:.1f} % |"
            )
        lines.append(
            f"| {s.classifier} | _any / none_ | {s.any_behavior:,} / {s.no_behavior:,} | of {s.documents:,} documents, "
            f"{s.characters:,} characters | | {s.errors:,} errors |"
        )
    return "\n".join(lines)


def rejects_table(rejects: dict[str, int]) -> str:
    if not rejects:
        return "None: every record in the input was read."
    lines = ["| reason | records |", "|---|---|"] + [f"| {k} | {v:,} |" for k, v in rejects.items()]
    return "\n".join(lines) + "\n\nThe records themselves are kept in `rejects/` beside the data."


def reproduce_command(command: str, *arguments: str | Path, options: Iterable[tuple[str, object]] = (),
                      dedup: bool = False, decontam: str | None = None, benchmarks_dir: str | Path | None = None) -> str:
    """A card's "Reproduce with" line: `curate COMMAND ARGUMENTS...`, then OPTIONS, (flag, value) pairs in order,
    then the --dedup / --decontam options every builder shares. A value None or False leaves its flag out, True
    writes the flag alone, any other value is written as str(value) (the caller formats what str would not)."""
    words = ["curate", command, *map(str, arguments)]
    cleaning = [("--dedup", bool(dedup)), ("--decontam", decontam or None),
                ("--benchmarks-dir", (benchmarks_dir or None) if decontam else None)]
    for flag, value in [*options, *cleaning]:
        if value is None or value is False:
            continue
        words += [flag] if value is True else [flag, str(value)]
    return shlex.join(words)


def build_command(parameters: dict, output: str | Path, dedup: bool = False, decontam: str | None = None,
                  benchmarks_dir: str | Path | None = None, license: str | None = None,
                  tags_root: str | Path | None = None, keep_columns: list[str] | None = None) -> str:
    """`curate build` with the parameters of this build: `--tags` where the build used a tags root of its own
    (without it the command would tag the corpus again into OUTPUT/tags), else tags reused from OUTPUT/tags."""
    selection = parameters["selection"]
    behaviors = selection["behaviors"]
    return reproduce_command("build", options=[
        ("--input", parameters["input"]), ("--output", output), ("--text-key", parameters["text_key"]),
        ("--id-key", parameters["id_key"]), ("--classifier", parameters["classifier"]),
        ("--behaviors", behaviors if isinstance(behaviors, str) else ",".join(behaviors)),
        ("--min-count", selection["min_count"]), ("--seed", selection["seed"]),
        ("--split", parameters["split"] if parameters["input"].startswith("hf:") else None),
        ("--exclude-behaviors", ",".join(selection["exclude"]) if selection["exclude"] else None),
        ("--limit", selection["limit"] or None), ("--license", license or None), ("--tags", tags_root),
        ("--keep-columns", ",".join(keep_columns) if keep_columns else None),
    ], dedup=dedup, decontam=decontam, benchmarks_dir=benchmarks_dir)


# The Hub's size_categories values.
SIZE_CATEGORIES = ("n<1K", "1K<n<10K", "10K<n<100K", "100K<n<1M", "1M<n<10M", "10M<n<100M", "100M<n<1B", "1B<n<10B",
                   "10B<n<100B", "100B<n<1T", "n>1T")
REQUIRED_METADATA = ("license", "task_categories", "size_categories", "configs")

BEHAVIOR_FIELDS = [
    ("`id`", "string", "document id from the source (or source path + position when it had none)"),
    ("`text`", "string", "the document, unchanged"),
    ("`verification`, `backtracking`, `subgoal_setting`, `backward_chaining`", "int32, nullable",
     "how many sentences show the behavior; null = could not be determined"),
    ("`evidence`", "list of {behavior, start, end}", "character spans of the cues found"),
    ("`scores`", "struct of float32 per behavior, nullable",
     "probability of each behavior (distilled classifiers); null for classifiers that only count"),
    ("`classifier`", "string", "versioned classifier that produced the counts"),
    ("`n_chars`", "int64", "length of `text` in characters"),
    ("`source`", "string", "file or dataset the document came from"),
]


class InvalidCardError(CurateError, ValueError):
    pass


# Where report sections added after the build (dedup, decontam) go: after the builder's own, before Fields.
REPORTS_ANCHOR = "<!-- curate:reports -->"


def _cell(value: object) -> str:
    """A value as it can sit in a markdown table cell, inside a code span."""
    return str(value).replace("\n", " ").replace("|", "\\|")


def data_files(output: str | Path) -> list[Path]:
    """The finished parquet files of a dataset in curate's layout (OUTPUT/data/SPLIT-NNNNN.parquet); [] without
    OUTPUT/data, whatever else OUTPUT holds (a card describes the data folder only)."""
    return files_under(Path(output, DATA))


def data_rows(output: str | Path) -> int:
    """Rows in OUTPUT/data, every split: what size_categories counts."""
    return sum(pq.ParquetFile(f).metadata.num_rows for f in data_files(output))


def data_splits(output: str | Path) -> list[str]:
    return sorted({split_of(f) for f in data_files(output)})


def split_configs(splits: list[str]) -> list[dict]:
    return [{"config_name": "default", "data_files": [{"split": s, "path": f"data/{s}-*.parquet"} for s in splits]}]


def load_snippet(splits: list[str]) -> str:
    files = ", ".join(f'"{s}": "data/{s}-*.parquet"' for s in splits)
    return f'from datasets import load_dataset\nds = load_dataset("parquet", data_files={{{files}}})'


def schema_fields(schema, meanings: dict[str, str], default: str) -> list[tuple[str, str, str]]:
    """Field rows of a parquet schema: its own names and types, with what each means where it is known."""
    return [(f"`{f.name}`", f"`{f.type}`", meanings.get(f.name, default)) for f in schema]


def render_card(
    card_data: DatasetCardData, *, summary: str, method: str, parameters: list[tuple[str, object]], command: str,
    sections: list[tuple[str, str]], fields: list[tuple[str, str, str]], load: str, limitations: str,
    plots: list[tuple[str, str]] = (), reports: dict[str, str] | None = None,
) -> DatasetCard:
    """The family template filled in; `sections` are (title, markdown) measured by the builder, `reports` the
    marked sections of cleaning steps (markdown with their own heading) that `update_card_section` can replace."""
    return DatasetCard.from_template(
        card_data,
        template_path=str(TEMPLATES / "dataset.md"),
        pretty_name=card_data.pretty_name,
        summary=summary,
        curate_version=curate.__version__,
        built_at=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        method=method,
        parameters=[(key, _cell(value)) for key, value in parameters],
        command=command,
        sections=sections,
        plots=list(plots),
        reports=[(key, markdown.strip()) for key, markdown in (reports or {}).items()],
        fields=fields,
        load=load,
        limitations=limitations,
    )


def _check_metadata(card: DatasetCard, where: object) -> None:
    metadata = card.data.to_dict()
    missing = [key for key in REQUIRED_METADATA if not metadata.get(key)]
    if missing:
        raise InvalidCardError(f"{where}: card metadata lacks {', '.join(missing)}")
    unknown = [c for c in metadata["size_categories"] if c not in SIZE_CATEGORIES]
    if unknown:
        raise InvalidCardError(f"{where}: unknown size_categories {unknown}")


def check_card(path: str | Path) -> DatasetCard:
    """Loads a card as the Hub does and checks the metadata every curate dataset must carry."""
    try:
        card = DatasetCard.load(Path(path))
    except Exception as error:  # a malformed header raises ValueError or a yaml error
        raise InvalidCardError(f"{path}: invalid card metadata: {error}") from error
    _check_metadata(card, path)
    return card


def save_card(card: DatasetCard, output: str | Path) -> Path:
    """Writes OUTPUT/README.md whole, and only once the card checks out."""
    path = Path(output) / "README.md"
    with atomic_path(path) as partial:  # a card that fails its check is removed, never renamed
        card.save(partial)
        check_card(partial)
    return path


def update_card_section(output: str | Path, key: str, markdown: str) -> Path:
    """Puts (or replaces) a marked report section in the card at OUTPUT/README.md.

    The step that adds it removed rows, so a card with curate's metadata gets its size category recounted and is
    checked again; a card without it (written by hand) only gets the section."""
    path = Path(output) / "README.md"
    text = path.read_text(encoding="utf-8")
    block = f"<!-- curate:{key} -->\n{markdown.strip()}\n<!-- /curate:{key} -->\n"
    text, replaced = re.subn(rf"<!-- curate:{key} -->.*?<!-- /curate:{key} -->\n?", lambda _m: block, text, flags=re.DOTALL)
    if not replaced:
        if REPORTS_ANCHOR in text:
            text = text.replace(REPORTS_ANCHOR, f"{block}\n{REPORTS_ANCHOR}", 1)
        else:
            text = text.rstrip("\n") + "\n\n" + block
    card = DatasetCard(text)
    try:
        _check_metadata(card, path)
    except InvalidCardError:
        return write_text_atomic(path, text)
    card.data.size_categories = [size_category(data_rows(output))]
    return save_card(card, output)


def write_step_card(
    input: str | Path, output: str | Path, *, step: str, key: str, report: str, parameters: list[tuple[str, object]],
    command: str, method: str, limitations: str,
) -> Path:
    """The card of a cleaning step's output written apart from its input (`curate dedup` / `curate decontam`).

    License, language, task and tags are the input dataset's where it has a card: the rows are its rows."""
    source_card = Path(str(input)).expanduser() / "README.md"
    source = DatasetCard.load(source_card).data if source_card.is_file() else None
    splits = data_splits(output)
    rows = data_rows(output)
    files = data_files(output)
    name = Path(str(input).rstrip("/")).name or str(input)
    card_data = DatasetCardData(
        license=(source.license if source else None) or "other",
        language=(source.language if source else None) or ["en"],
        task_categories=(source.task_categories if source else None) or ["text-generation"],
        size_categories=[size_category(rows)],
        pretty_name=f"{(source.pretty_name if source else None) or name}: {step}",
        tags=list(dict.fromkeys(["curate", step, *((source.tags or []) if source else [])])),
        configs=split_configs(splits),
    )
    card = render_card(
        card_data,
        summary=f"{rows:,} rows of `{input}` after {step}.",
        method=method,
        parameters=parameters,
        command=command,
        sections=[("Rows per split", "| split | rows |\n|---|---|\n" + "\n".join(
            f"| {s} | {sum(pq.ParquetFile(f).metadata.num_rows for f in files if split_of(f) == s):,} |"
            for s in splits))],
        reports={key: report},
        fields=schema_fields(pq.read_schema(files[0]), {}, "as in the input") if files else [],
        load=load_snippet(splits),
        limitations=limitations + (" The rows are those of the input, with its card's limitations; see its README.md."
                                   if source else ""),
    )
    return save_card(card, output)


def write_behavior_card(
    output: Path, parameters: dict, corpus_stats: list, dataset_stats: list, rejects: dict[str, int],
    license: str = "other", extra: dict | None = None, dedup: bool = False, decontam: str | None = None,
    benchmarks_dir: str | Path | None = None, tags_root: str | Path | None = None, keep_columns: list[str] | None = None,
) -> DatasetCard:
    selected = dataset_stats[0].documents if dataset_stats else 0
    behaviors = parameters["selection"]["behaviors"]
    wanted = "none of the four behaviors" if behaviors == "none" else ", ".join(behaviors)
    card_data = DatasetCardData(
        license=license,
        language=["en"],
        task_categories=["text-generation"],
        size_categories=[size_category(selected)],
        pretty_name=f"curate: {wanted}",
        tags=["reasoning", "cognitive-behaviors", "curate", *([b for b in behaviors] if isinstance(behaviors, list) else [])],
        configs=[{"config_name": "default", "data_files": [{"split": "train", "path": "data/*.parquet"}]}],
    )
    plots = []
    if corpus_stats:
        plot_prevalence(corpus_stats, output / "prevalence.png")
        plots.append(("prevalence and co-occurrence", "prevalence.png"))
    selection_rows = [("input", parameters["input"]), ("text key", parameters["text_key"]),
                      ("classifier", parameters["classifier"])]
    selection_rows += [(k.replace("_", " "), v) for k, v in parameters["selection"].items()]
    selection_rows += [("dedup", dedup), ("decontam", decontam or "no")]
    selection_rows += list((extra or {}).items())
    card = render_card(
        card_data,
        summary=f"{selected:,} documents that show {wanted}"
        + ("" if behaviors == "none" else f" (each at least {parameters['selection']['min_count']} time(s))") + ".",
        method=f"Documents were tagged with the behavior classifier `{parameters['classifier']}`, selected with a "
               "DuckDB query over the attribute shards, and written with their text and attributes.",
        parameters=selection_rows,
        command=build_command(parameters, output, dedup, decontam, benchmarks_dir, license, tags_root, keep_columns),
        sections=[("Behaviors in this dataset", stats_table(dataset_stats)),
                  ("Behaviors in the tagged source corpus", stats_table(corpus_stats)),
                  ("Records that could not be read", rejects_table(rejects))],
        plots=plots,
        fields=BEHAVIOR_FIELDS + [(f"`{name}`", "as in the source", "source column kept with --keep-columns")
                                  for name in keep_columns or []],
        load='from datasets import load_dataset\nds = load_dataset("parquet", data_dir="data", split="train")',
        limitations=LIMITATIONS,
    )
    save_card(card, output)
    return card

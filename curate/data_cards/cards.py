"""Dataset cards generated from measured statistics with huggingface_hub's card machinery."""

from __future__ import annotations

import shlex
from datetime import datetime, timezone
from pathlib import Path

from huggingface_hub import DatasetCard, DatasetCardData

import curate
from curate.behaviors import BEHAVIOR_NAMES
from curate.data_cards.plots import plot_prevalence

TEMPLATES = Path(__file__).parent / "templates"

LIMITATIONS = (
    "Counts come from an automatic classifier and carry its errors; see the project's bench figures for its "
    "precision and recall per behavior on a hand-labeled set. A behavior absent from the counts may still be "
    "present in words the classifier does not know."
)


def size_category(n: int) -> str:
    for limit, name in [(1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M"),
                        (10_000_000, "1M<n<10M"), (100_000_000, "10M<n<100M"), (1_000_000_000, "100M<n<1B")]:
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


def reproduce_command(parameters: dict) -> str:
    selection = parameters["selection"]
    behaviors = selection["behaviors"]
    parts = ["curate", "build", "--input", parameters["input"], "--text-key", parameters["text_key"],
             "--classifier", parameters["classifier"],
             "--behaviors", behaviors if isinstance(behaviors, str) else ",".join(behaviors),
             "--min-count", str(selection["min_count"]), "--seed", str(selection["seed"])]
    if selection["exclude"]:
        parts += ["--exclude-behaviors", ",".join(selection["exclude"])]
    if selection["limit"]:
        parts += ["--limit", str(selection["limit"])]
    return shlex.join(parts)


def write_behavior_card(
    output: Path, parameters: dict, corpus_stats: list, dataset_stats: list, rejects: dict[str, int],
    license: str = "other", extra: dict | None = None,
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
    plot = None
    if corpus_stats:
        plot_prevalence(corpus_stats, output / "prevalence.png")
        plot = "prevalence.png"
    selection_rows = [("input", parameters["input"]), ("text key", parameters["text_key"]),
                      ("classifier", parameters["classifier"])]
    selection_rows += [(k.replace("_", " "), v) for k, v in parameters["selection"].items()]
    selection_rows += list((extra or {}).items())
    card = DatasetCard.from_template(
        card_data,
        template_path=str(TEMPLATES / "behavior_dataset.md"),
        pretty_name=card_data.pretty_name,
        summary=f"{selected:,} documents that show {wanted}"
        + ("" if behaviors == "none" else f" (each at least {parameters['selection']['min_count']} time(s))") + ".",
        curate_version=curate.__version__,
        built_at=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        classifier=parameters["classifier"],
        selection_rows=selection_rows,
        command=reproduce_command(parameters),
        dataset_table=stats_table(dataset_stats),
        corpus_table=stats_table(corpus_stats),
        rejects_table=rejects_table(rejects),
        plot=plot,
        limitations=LIMITATIONS,
    )
    tmp = output / "README.md.partial"
    card.save(tmp)
    tmp.replace(output / "README.md")
    return card

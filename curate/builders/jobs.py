"""The builders' job configs (see curate.pipelines.jobs): what `curate build` and the build flow take, and the
record of a build's output claim. Light: `--help` reads them; the jobs run in their builder modules."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from curate.behaviors import BEHAVIOR_NAMES
from curate.pipelines.executor_options import LOCAL, ExecutorOptions
from curate.pipelines.jobs import (
    ALLOW_PARTIAL_HELP,
    CLASSIFIER_HELP,
    CLEANING,
    EXECUTOR,
    INPUT,
    OVERWRITE_HELP,
    SAMPLE_GLOB,
    TASKS_HELP,
    VERIFY_INPUTS_HELP,
    WORKERS_HELP,
    group,
    option,
)

if TYPE_CHECKING:  # they import datatrove
    from curate.pipelines.cleaning import Cleaning
    from curate.pipelines.readers import InputSpec


@dataclass(frozen=True, kw_only=True)
class BuildJob:
    """Tag a corpus (reusing finished shards), select documents by behavior, write a dataset with its card."""

    behaviors: str = option(
        "Comma-separated behaviors every document must show, or 'none' for documents with none. "
        f"Names: {', '.join(BEHAVIOR_NAMES)} (aliases: subgoal, backchaining).")
    output: Path | None = option("Dataset directory (default: datasets/BEHAVIORS).", "--output", "-o", default=None)
    tags: Path | None = option("Tags root to reuse across builds (default: OUTPUT/tags).", default=None)
    classifier: str = option(CLASSIFIER_HELP, "--classifier", "-c", default="cues")
    min_count: int = option("Each chosen behavior must occur at least this often.", default=1, min=1)
    exclude_behaviors: str | None = option("Behaviors that must be absent.", default=None)
    limit: int | None = option("Keep at most this many documents (seeded random sample).", default=None, min=1)
    seed: int = option("Seed of the random sample.", default=0)
    tasks: int = option(TASKS_HELP, default=1, min=1)
    workers: int = option(WORKERS_HELP, default=1, min=1)
    license: str = option("License of the source text, for the dataset card.", default="other")
    verify_inputs: bool = option(VERIFY_INPUTS_HELP, "--verify-inputs", default=False)
    allow_partial: bool = option(ALLOW_PARTIAL_HELP, "--allow-partial", default=False)
    overwrite: bool = option(OVERWRITE_HELP, "--overwrite", default=False)
    keep_columns: str | None = option(
        "Comma-separated source fields to carry into the dataset beside id and text (e.g. url,license).", default=None)
    batch_size: int = 64  # documents per classifier call; not a flag of `curate build`, a flow may set it
    corpus: InputSpec = group(INPUT)
    cleaning: Cleaning = group(CLEANING, dedup="Remove exact and MinHash near duplicates from the built dataset.",
                               decontam="Remove rows overlapping these benchmarks (as `curate decontam --against`).")
    executor: ExecutorOptions = group(EXECUTOR, default=LOCAL)

    @property
    def dataset_dir(self) -> Path:
        if self.output is not None:
            return Path(self.output)
        return Path("datasets") / (self.behaviors.replace(",", "+").replace(" ", "") or "none")

    @property
    def sample(self) -> bool:
        """The bundled sample corpus (no --input): recorded as no input, and its card says its own license."""
        return self.corpus.path == SAMPLE_GLOB

    @property
    def kept_columns(self) -> list[str]:
        return [c.strip() for c in self.keep_columns.split(",") if c.strip()] if self.keep_columns else []

    @property
    def tags_inside(self) -> bool:
        """The tags live in OUTPUT/tags (the default): the output claim keeps them when the corpus changed."""
        return self.tags is None or Path(self.tags).resolve() == (self.dataset_dir / "tags").resolve()

    def record(self) -> dict:
        """The parameters of the output claim: what decides the dataset, not how it runs (tasks, workers, executor).
        Its keys are those every earlier `curate build` recorded, so that a rerun finds its dataset up to date."""
        what = {"behaviors": self.behaviors, "input": None if self.sample else self.corpus.path, "tags": self.tags,
                "classifier": self.classifier, "min_count": self.min_count, "exclude_behaviors": self.exclude_behaviors,
                "limit": self.limit, "seed": self.seed, "text_key": self.corpus.text_key, "id_key": self.corpus.id_key,
                "split": self.corpus.split, "streaming": self.corpus.streaming, "license": self.license,
                **self.cleaning.arguments()}
        if self.kept_columns:  # only when given, so that datasets built before the option existed stay up to date
            what["keep_columns"] = self.kept_columns
        return {k: str(v) if isinstance(v, Path) else v for k, v in what.items()}

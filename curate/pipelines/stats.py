"""The stats job: what the attribute shards under a directory say about each behavior (DuckDB over the shards),
which tagging runs there did not finish (their figures leave part of the corpus out), and the prevalence plot."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from curate.data_cards.plots import plot_prevalence
from curate.errors import CurateError
from curate.pipelines.jobs import StatsJob
from curate.pipelines.query import BehaviorStats, behavior_stats, parquet_files
from curate.pipelines.tag import MANIFEST, unfinished_tasks


class StatsError(CurateError, FileNotFoundError):
    pass


@dataclass(frozen=True)
class UnfinishedTags:
    tags_dir: Path
    unfinished: int
    total: int


@dataclass(frozen=True)
class TagStats:
    classifiers: list[BehaviorStats]  # one per classifier found under the directory
    unfinished: list[UnfinishedTags]
    plot: Path | None  # the PNG drawn, where the job asked for one


def tag_stats(job: StatsJob) -> TagStats:
    """Runs the stats job; a directory without shards fails here, saying how to make them. A flow's job holds its
    paths as strings."""
    directory = Path(job.directory)
    if not directory.exists():
        raise StatsError(f"{directory} does not exist")
    if not parquet_files(directory):
        raise StatsError(f"no parquet shards under {directory}; run `curate tag` first")
    classifiers = behavior_stats(directory)
    # The directory itself (one classifier's shards, a dataset's build logs) and each classifier's folder below it.
    tags_dirs = [directory, *sorted(p.parent for p in directory.glob(f"*/{MANIFEST}"))]
    unfinished = [UnfinishedTags(d, *unfinished_tasks(d)) for d in tags_dirs]
    plot = plot_prevalence(classifiers, job.plot) if job.plot else None
    return TagStats(classifiers, [u for u in unfinished if u.unfinished], plot)

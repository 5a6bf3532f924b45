"""The hand-off job configs (see curate.pipelines.jobs): what `curate export` (and the export flow) and `curate
filter-passrate` take. Light: `--help` reads them; the jobs run in their hand-off modules."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from curate.pipelines.executor_options import LOCAL, ExecutorOptions
from curate.pipelines.jobs import EXECUTOR, OVERWRITE_HELP, SERVER, TASKS_HELP, WORKERS_HELP, group, option

if TYPE_CHECKING:  # it imports datatrove
    from curate.handoff.passrate import SamplingOptions


@dataclass(frozen=True, kw_only=True)
class ExportJob:
    """Export a built dataset for a trainer: verl, TRL (GRPO), OpenRLHF, SFT {query, completion} or CPT text."""

    dataset: Path = option("Built dataset (DATASET/data/SPLIT-*.parquet) or parquet file/folder.", argument=True)
    to: str = option("verl | trl | openrlhf | sft | cpt", "--to")
    output: Path = option("Export directory (OUTPUT/data/SPLIT-*.parquet).", "--output", "-o")
    instruction: str | None = option("Appended to every prompt; default: the reward's own answer-format instruction; "
                                     "'' for none.", default=None)
    system: str | None = option("System message put before every prompt.", default=None)
    overwrite: bool = option(OVERWRITE_HELP, "--overwrite", default=False)


@dataclass(frozen=True, kw_only=True)
class PassRateJob:
    """Keep the prompts a policy solves sometimes but not always: k samples per prompt, scored by the row's reward."""

    dataset: Path = option("Built dataset with RL columns (question, data_source, ground truth).")
    model: str = option("The policy: hub name or local directory.")
    output: Path = option("Filtered dataset (OUTPUT/data), samples (OUTPUT/rates).", "--output", "-o")
    k: int = option("Samples per prompt.", default=8, min=1)
    band: str = option("LOW,HIGH: keep prompts whose pass rate is strictly inside.", default="0,1")
    instruction: str | None = option("Appended to every prompt; default: the reward's own instruction; '' for none.",
                                     default=None)
    limit: int = option("Sample at most this many prompts (-1: all).", default=-1)
    tasks: int = option(TASKS_HELP, default=1, min=1)
    workers: int = option(WORKERS_HELP, default=1, min=1)
    overwrite: bool = option(OVERWRITE_HELP, "--overwrite", default=False)
    # The policy's server and how it is sampled (SamplingOptions), holding `model`, `k` and `instruction` too.
    server: SamplingOptions = group(SERVER, config="sampling", sampling=True, also=("k", "instruction"))
    executor: ExecutorOptions = group(EXECUTOR, default=LOCAL)

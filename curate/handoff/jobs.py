"""The hand-off job configs (see curate.pipelines.jobs): what `curate export` and the export flow take. Light:
`--help` reads them; the jobs run in their hand-off modules."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from curate.pipelines.jobs import OVERWRITE_HELP, option


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

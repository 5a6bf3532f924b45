"""The candidate pools' texts and token counts: one datatrove pass over the corpus reads the documents of both pools
(selection.select_pools), counts their tokens with the named tokenizer and writes OUT/.curate/pool, kept while its
inputs and parameters are unchanged; --dedup and --decontam then clean the pool on this machine."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
from datatrove.data import DocumentsPipeline
from datatrove.pipeline.base import PipelineStep
from datatrove.pipeline.writers.parquet import ParquetWriter

from curate.behaviors import BEHAVIOR_NAMES
from curate.builders.cpt.common import CPTError, load_tokenizer
from curate.builders.cpt.selection import CPTSelection, select_pools, tag_files
from curate.builders.jobs import CPTJob
from curate.files import atomic_path, write_text_atomic
from curate.pipelines.decontam import decontaminate
from curate.pipelines.dedup import dedup as dedup_pool
from curate.pipelines.executors import Stage, input_signature, resumable_stage, run_stages
from curate.pipelines.query import parquet_files, write_kept_copies
from curate.pipelines.readers import InputSpec, make_reader
from curate.pipelines.state import STATE
from curate.pipelines.steps import ATTRIBUTES, AtomicOutput, KeepFirstCopy, KeepSelected, SplitRejects, batched

# Characters per token that no real tokenizer exceeds on prose or LaTeX: bounds the pool read from the corpus.
MAX_CHARS_PER_TOKEN = 8

POOL_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("text", pa.string()),
        ("pool", pa.string()),
        ("draw", pa.string()),
        ("domain", pa.string()),
        ("n_tokens", pa.int64()),
        ("n_chars", pa.int64()),
        *[(name, pa.int32()) for name in BEHAVIOR_NAMES],
        ("classifier", pa.string()),
        ("model", pa.string()),
        ("prompt_version", pa.string()),
    ]
)


class CountTokens(PipelineStep):
    """Counts each document's tokens with the named tokenizer (no special tokens) in batches."""

    name = "🔢 Count tokens"
    type = "🔢 - TOKENIZER"

    def __init__(self, tokenizer: str, domain_key: str | None, batch_size: int = 256):
        super().__init__()
        self.tokenizer = tokenizer
        self.domain_key = domain_key
        self.batch_size = batch_size

    def run(self, data: DocumentsPipeline, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        tokenizer = load_tokenizer(self.tokenizer)
        for batch in batched(data, self.batch_size):
            encoded = tokenizer([d.text for d in batch], add_special_tokens=False)["input_ids"]
            for document, ids in zip(batch, encoded, strict=True):
                row = document.metadata[ATTRIBUTES]
                row["n_tokens"] = len(ids)
                row["n_chars"] = len(document.text)
                if row.get("domain") is None and self.domain_key and document.metadata.get(self.domain_key) is not None:
                    row["domain"] = str(document.metadata[self.domain_key])
                self.stat_update("tokens", value=len(ids))
                yield document


class PoolWriter(AtomicOutput, ParquetWriter):
    name = "📒 CPT pool"

    def __init__(self, output_folder: str):
        super().__init__(output_folder, output_filename="train-${rank}.parquet", schema=POOL_SCHEMA,
                         adapter=lambda _w, d: {**{k: d.metadata[ATTRIBUTES].get(k) for k in POOL_SCHEMA.names},
                                                "text": d.text})


def build_pool(job: CPTJob, selection: CPTSelection, budget: int, trim: float | None,
               progress: bool) -> tuple[Path, dict]:
    """Both candidate pools of `job` with their texts and token counts (the corpus pass, on the job's executor; on
    Slurm it is submitted and JobSubmitted raised), cleaned by the job's --dedup / --decontam; returns the pool's
    folder and the selection's counts. `trim`: the quantile of each pool's characters cut before the common length
    range (None: no cut). Unreadable corpus records and what the cleaning removed go to OUT/rejects."""
    output, tags, spec = Path(job.output), Path(job.tags), job.corpus
    tasks, workers = job.executor.tasks, job.executor.workers
    state = output / STATE
    cleaned = state / "pool_clean"
    shutil.rmtree(cleaned, ignore_errors=True)
    # Absolute: Ray and Slurm workers need not share this process's working directory.
    pool_dir = state.resolve() / "pool"
    files = tag_files(tags)
    tag_rejects = tags / "rejects"
    resumed = resumable_stage(pool_dir, {
        "tags": [[f, Path(f).stat().st_size, Path(f).stat().st_mtime_ns] for f in files],
        "tag_rejects": input_signature(InputSpec(str(tag_rejects))) if tag_rejects.is_dir() else None,
        "texts": input_signature(spec), "text_key": spec.text_key, "id_key": spec.id_key,
        "selection": selection.describe(), "budget": budget, "oversample": job.oversample, "domain_key": job.domain_key,
        "length_trim": trim, "tokenizer": job.tokenizer, "tasks": tasks,
    })
    pools_path, pools_summary = pool_dir / "pools.parquet", pool_dir / "pools.json"
    kept_copies_path = pool_dir / "kept_copies.parquet"
    if not (resumed and pools_summary.exists()):
        # The quantile trim is applied once, on characters over every candidate; the token stage below only clips
        # both pools to their exact common token range (trim 0), so the tails are not trimmed twice.
        counts = select_pools(tags, selection, int(budget * MAX_CHARS_PER_TOKEN * job.oversample), pools_path,
                              job.domain_key, trim)
        write_kept_copies(files, tag_rejects, kept_copies_path)
        write_text_atomic(pools_summary, json.dumps(counts))
    pools = json.loads(pools_summary.read_text())  # read back in either case: a rerun sees the same types
    run_stages([Stage("curate-cpt-pool", [
        make_reader(spec, progress=progress), KeepFirstCopy(str(kept_copies_path)),
        SplitRejects(str(pool_dir / "rejects")), KeepSelected(str(pools_path)),
        CountTokens(job.tokenizer, job.domain_key), PoolWriter(str(pool_dir / "data")),
    ], tasks, pool_dir / "logs")], replace(job.runs_on, gpus_per_task=0), workers)  # counting needs no GPU
    if not parquet_files(pool_dir / "data"):
        raise CPTError(f"none of the {sum(pools['read_into_pool'].values()):,} candidate ids were found in "
                       f"{spec.path}; are the tags from this corpus (and --id-key right)?")
    (output / "rejects").mkdir(parents=True, exist_ok=True)
    for unreadable in sorted((pool_dir / "rejects").glob("*.jsonl")):
        # A copy, not a move: the pool stays whole for the next rerun. Through a partial, so a crash mid-copy leaves
        # no rejects file that looks finished.
        with atomic_path(output / "rejects" / unreadable.name) as copy:
            shutil.copyfile(unreadable, copy)
    # Cleaned into a folder of their own: the pool stays as the corpus pass wrote it, for the next rerun.
    pool = pool_dir
    cleaning = job.cleaning
    if cleaning.dedup:
        dedup_pool(pool, cleaned, text_key="text", tasks=tasks, workers=workers, progress=progress)
        pool = cleaned
    if cleaning.decontam:
        decontaminate(pool, cleaned, cleaning.decontam, fields=["text"], benchmarks_dir=cleaning.benchmarks_dir,
                      tasks=tasks, workers=workers, progress=progress)
        pool = cleaned
    for moved in sorted((cleaned / "rejects").glob("*.jsonl")) if (cleaned / "rejects").is_dir() else []:
        shutil.move(str(moved), output / "rejects" / moved.name)
    return pool, pools

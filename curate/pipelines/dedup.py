"""Near-duplicate removal: exact duplicates by normalized-text hash, then datatrove's MinHash steps.

    stage 1  read -> drop unreadable -> exact duplicates -> MinhashDedupSignature
    stage 2  MinhashDedupBuckets              (one task per bucket)
    stage 3  MinhashDedupCluster              (one task; saves cluster ids)
    stage 4  read -> SplitRejects -> exact duplicates -> MinhashDedupFilter -> write rows

Stage 4 sees the documents in the same order as stage 1 (same reader, same deterministic drops), which is
what MinHash's per-task document indices rely on. The stages run on any executor (executors.py): in order
here or on Ray, as one chain of job arrays on Slurm. Their working folder `OUT/.curate/dedup` survives a
kill or a Slurm submission, so a rerun resumes, unless the input files or the parameters changed. Every removed row lands in `OUT/rejects/duplicates.jsonl`
with the id of the document that was kept in its place (`duplicate_of`).

The exact pass works within a datatrove task; identical texts in different tasks share every MinHash
signature and are removed by the MinHash stages (reason `near_duplicate`, similarity 1).

The same module holds what decontamination reuses: reading any corpus or built dataset row-preserving,
writing the surviving rows back with their original columns, and the report section of the dataset card.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
from datatrove.data import Document, DocumentsPipeline
from datatrove.pipeline.base import PipelineStep
from datatrove.pipeline.dedup import MinhashDedupBuckets, MinhashDedupCluster, MinhashDedupFilter, MinhashDedupSignature
from datatrove.pipeline.dedup.minhash import MinhashConfig
from datatrove.pipeline.writers.jsonl import JsonlWriter
from datatrove.pipeline.writers.parquet import ParquetWriter
from datatrove.utils.hashes.xxhash import xxhash64
from datatrove.utils.hashing import HashConfig
from datatrove.utils.text import TextNormConfig, simplify_text

from curate.data_cards.cards import reproduce_command, update_card_section, write_step_card
from curate.dataset_files import DATA, dataset_files, split_of
from curate.errors import InputError, OptionError
from curate.files import atomic_open, atomic_path, replace_folder, write_text_atomic
from curate.pipelines.executors import (
    ExecutorOptions,
    Stage,
    finish_stage,
    input_signature,
    resumable_stage,
    run_stages,
)
from curate.pipelines.jobs import DedupJob
from curate.pipelines.query import parquet_files
from curate.pipelines.readers import CorpusReader, InputSpec, is_reject
from curate.pipelines.state import STATE, clean_once
from curate.pipelines.steps import AtomicOutput, SplitRejects

ROW = "curate_row"  # the record as read: written back unchanged
SPLIT = "curate_split"
DUPLICATE_OF = "curate_duplicate_of"
CLUSTER = "minhash_cluster_id"

# Exact means exact up to case and spacing: numbers and punctuation change the problem in math text.
EXACT_NORM = TextNormConfig(
    lowercase=True, norm_whitespace=True, remove_punctuation=False, norm_unicode_diacritics=False, norm_numbers=False
)


# --------------------------------------------------------------------------- reading and writing rows


def resolve_input(input: str | Path, text_key: str | None, id_key: str = "id") -> tuple[InputSpec, str | None]:
    """A built dataset directory reads its data/ folder; anything else is a corpus path for InputSpec.

    Without a text key: 'question' for RL datasets that have it, else 'text'. Returns the spec and the parquet
    schema of the input (None for JSON lines) so that written rows keep their column types."""
    path = Path(str(input)).expanduser()
    files = dataset_files(path) if (path / DATA).is_dir() else []
    if files:
        folder = str(path / "data")
    else:
        folder = str(input)
        if not str(input).startswith("hf:"):
            InputSpec(folder).folder_and_pattern()  # a clear FileNotFoundError now rather than inside a worker
            files = [f for f in dataset_files(path) if f.suffix == ".parquet"]
    schema = pq.read_schema(files[0]) if files else None
    if text_key is None:
        names = schema.names if schema is not None else first_record_keys(path)
        text_key = "question" if "question" in names and "text" not in names else "text"
    if schema is not None and text_key not in schema.names:
        raise InputError(f"no column {text_key!r} in {files[0]} (columns: {', '.join(schema.names)}); pass --text-key")
    return InputSpec(path=folder, text_key=text_key, id_key=id_key), schema


def first_record_keys(path: Path) -> list[str]:
    """Fields of the first JSON lines record under path (a file or the first .jsonl in a folder); [] if none."""
    candidates = [path] if path.is_file() else sorted(path.rglob("*.jsonl"))[:1] if path.is_dir() else []
    for candidate in candidates:
        if candidate.suffix not in (".jsonl", ".json", ".ndjson"):
            continue
        with candidate.open("rb") as f:
            for line in f:
                if line.strip():
                    try:
                        record = json.loads(line)
                    except ValueError:
                        return []
                    return list(record) if isinstance(record, dict) else []
    return []


class RowReader(CorpusReader):
    """CorpusReader that keeps each record whole, and the split named by its file (`test-00000.parquet` -> test)."""

    name = "📖 Rows (jsonl/parquet, rejects kept)"

    def _document(self, record: object, source: str, position: int, raw: str) -> Document:
        document = super()._document(record, source, position, raw)
        if not is_reject(document):
            document.metadata[ROW] = record
            document.metadata[SPLIT] = split_of(source)
        return document


class DropRejects(PipelineStep):
    """Drops unreadable records silently: the pass that writes them (stage 4) keeps them with their reason."""

    name = "🗑 Drop rejects"
    type = "🔻 - FILTER"

    def run(self, data: DocumentsPipeline, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        for document in data:
            if not is_reject(document):
                yield document


class RowWriter(AtomicOutput, ParquetWriter):
    """Writes each surviving record as it was read, one file per split: `SPLIT-RANK.parquet`."""

    name = "📒 Rows"

    def __init__(self, output_folder: str, schema=None):
        super().__init__(
            output_folder,
            output_filename="${" + SPLIT + "}-${rank}.parquet",
            adapter=lambda _writer, document: document.metadata[ROW],
            schema=schema,
            max_file_size=-1,  # rotation would prefix "000_" and break the SPLIT-*.parquet naming
        )


class RemovedWriter(AtomicOutput, JsonlWriter):
    """Side file of removed rows: why, what they duplicate or match, and the row itself."""

    name = "🗑 Removed"

    def __init__(self, output_folder: str, prefix: str, describe):
        super().__init__(
            output_folder,
            output_filename=prefix + "_${rank}.jsonl",
            compression=None,
            adapter=lambda _writer, document: {**describe(document), "id": document.id, "row": document.metadata[ROW]},
        )


def publish_stage(stage: Path, output: Path, prefix: str) -> tuple[int, int]:
    """Publishes what a cleaning step's stages wrote, called once the step's own reports that read the stage (its
    removed rows) are written: the records that could not be read go to OUTPUT/rejects (move_read_rejects), the
    stage is closed (finish_stage) and STAGE/data replaces OUTPUT/data (the input may have been OUTPUT/data itself).
    The move comes last, once the stage is closed, so that no rerun resumes on a half-moved stage. Returns
    (unreadable records, rows in OUTPUT/data)."""
    unreadable = move_read_rejects(stage, output, prefix)
    finish_stage(stage)
    new = stage / "data"
    new.mkdir(parents=True, exist_ok=True)
    replace_folder(new, output / "data")
    return unreadable, count_rows(output / "data")


def move_read_rejects(stage: Path, output: Path, prefix: str) -> int:
    """Copies the records that could not be read into OUTPUT/rejects/PREFIX_*.jsonl; returns how many. A copy,
    not a move: a rerun after an interruption here finds the stage as it was."""
    count = 0
    (output / "rejects").mkdir(parents=True, exist_ok=True)
    for old in (output / "rejects").glob(f"{prefix}_unreadable_*.jsonl"):
        old.unlink()
    for path in sorted((stage / "rejects").glob("*.jsonl")):
        with path.open() as f:
            count += sum(1 for line in f if line.strip())
        with atomic_path(output / "rejects" / f"{prefix}_unreadable_{path.name}") as partial:
            shutil.copyfile(path, partial)
    return count


def write_jsonl_query(connection: duckdb.DuckDBPyConnection, query: str, destination: Path) -> None:
    with atomic_path(destination) as partial:
        connection.execute(f"COPY ({query}) TO '{_quote(partial)}' (FORMAT json)")


def _quote(path: Path | str) -> str:
    return str(path).replace("'", "''")


def jsonl_glob(folder: Path) -> str:
    return _quote(folder / "*.jsonl")


def count_rows(directory: Path) -> int:
    files = parquet_files(directory)
    return sum(pq.ParquetFile(f).metadata.num_rows for f in files)


def write_report(input: str | Path, output: Path, key: str, report: str, card: dict) -> None:
    """A step run on a dataset in place adds its report to the dataset's card; run into another folder, it writes
    that folder a card of its own (`card`: write_step_card's keywords)."""
    in_place = Path(str(input)).expanduser().resolve() == output.resolve()
    if in_place and (output / "README.md").exists():
        update_card_section(output, key, report)
    else:
        write_step_card(input, output, key=key, report=report, **card)


# --------------------------------------------------------------------------- deduplication


def minhash_config(threshold: float, n_grams: int = 5, max_hashes: int = 128) -> MinhashConfig:
    """Buckets x hashes per bucket whose LSH threshold (1/b)^(1/r) is nearest the asked Jaccard similarity."""
    if not 0.0 < threshold < 1.0:
        raise OptionError(f"--threshold must be between 0 and 1 (exclusive), got {threshold}")
    best = min(
        ((b, r) for r in range(1, 17) for b in range(1, 41) if b * r <= max_hashes),
        key=lambda br: (round(abs((1 / br[0]) ** (1 / br[1]) - threshold), 3), -br[0] * br[1]),
    )
    # sha1: datatrove 0.10's xxhash helpers take bytes but MinHash shingles are str. Numbers are kept:
    # "divide x^9 + 1 by x - 1" and "divide x^6 - 3 by x + 1" are two problems, not one.
    return MinhashConfig(n_grams=n_grams, num_buckets=best[0], hashes_per_bucket=best[1],
                         norm_config=TextNormConfig(norm_numbers=False),
                         hash_config=HashConfig(hash_fc="sha1", precision=64))


class ExactDuplicates(PipelineStep):
    """Drops a document whose normalized text (case, spacing) was already seen in this task; records the first id."""

    name = "🫂 Exact duplicates"
    type = "🫂 - DEDUP"

    def __init__(self, exclusion_writer=None):
        super().__init__()
        self.exclusion_writer = exclusion_writer

    def run(self, data: DocumentsPipeline, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        seen: dict[int, str] = {}
        writer = self.exclusion_writer
        try:
            for document in data:
                with self.track_time():
                    key = xxhash64(simplify_text(document.text, EXACT_NORM).encode())
                    first = seen.get(key)
                    if first is None:
                        seen[key] = document.id
                    else:
                        self.stat_update("exact_duplicates")
                        if writer:
                            document.metadata[DUPLICATE_OF] = first
                            writer.write(document, rank)
                        continue
                yield document
        finally:
            if writer:
                writer.close()


class RecordClusterKeepers(PipelineStep):
    """Notes which document each MinHash cluster kept, so removed rows can name it."""

    name = "📝 Cluster keepers"
    type = "🫂 - DEDUP"

    def __init__(self, output_folder: str):
        super().__init__()
        self.output_folder = output_folder

    def run(self, data: DocumentsPipeline, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        with atomic_open(Path(self.output_folder) / f"keepers_{rank:05d}.jsonl") as out:
            for document in data:
                cluster = document.metadata.pop(CLUSTER, -1)
                if cluster >= 0:
                    out.write(json.dumps({"cluster": cluster, "id": document.id}) + "\n")
                yield document


class ClusterAwareFilter(MinhashDedupFilter):
    """MinhashDedupFilter that also reads the cluster ids of a task none of whose documents is removed.

    Such a task gets no .remove file from stage 3, and without one MinhashDedupFilter skips the cluster ids too:
    the rows removed elsewhere could not name their keeper. An empty .remove file is made in the task itself
    (not between stages) so that it happens wherever the stage runs, also in a Slurm chain."""

    def run(self, data: DocumentsPipeline, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        if self.data_folder.isfile(f"{rank:06d}.clusters") and not self.data_folder.isfile(f"{rank:06d}.remove"):
            self.data_folder.open(f"{rank:06d}.remove", "wb").close()
        yield from super().run(data, rank, world_size)


def _exact_row(document: Document) -> dict:
    return {"reason": "exact_duplicate", "duplicate_of": document.metadata[DUPLICATE_OF], "cluster": None}


def _near_row(document: Document) -> dict:
    return {"reason": "near_duplicate", "duplicate_of": None, "cluster": document.metadata.get(CLUSTER)}


@dataclass
class DedupResult:
    output: Path
    read: int
    kept: int
    exact_removed: int
    near_removed: int
    unreadable: int
    threshold: float
    parameters: dict = field(default_factory=dict)

    @property
    def removed(self) -> int:
        return self.exact_removed + self.near_removed


def dedup(
    input: str | Path,
    output: str | Path,
    text_key: str | None = None,
    id_key: str = "id",
    threshold: float = 0.75,
    n_grams: int = 5,
    tasks: int = 1,
    workers: int = 1,
    progress: bool = True,
    executor: ExecutorOptions | None = None,
) -> DedupResult:
    """Removes exact and near duplicates from a corpus or built dataset; writes OUTPUT/data, rejects, card section.

    OUTPUT may be the input dataset directory itself: the data folder is replaced only once the new one is whole.
    On Slurm the four stages are submitted as one chain and JobSubmitted is raised; rerun once it has finished."""
    output = Path(output)
    spec, schema = resolve_input(input, text_key, id_key)
    config = minhash_config(threshold, n_grams)
    # Absolute: Ray and Slurm workers need not share this process's working directory.
    stage = output.resolve() / STATE / "dedup"
    # The stage folder resumes only for the same input files and parameters: MinHash signatures index each
    # task's documents by position, so signatures of other inputs (or another task count) would misalign.
    resumable_stage(stage, {"input": input_signature(spec), "text_key": spec.text_key, "id_key": id_key,
                            "threshold": threshold, "n_grams": n_grams, "tasks": tasks})
    signatures, buckets, clusters = stage / "signatures", stage / "buckets", stage / "clusters"
    removed, keepers = stage / "removed", stage / "keepers"
    logs = stage / "logs"
    run_stages([
        Stage("curate-dedup-1-signatures",
              [RowReader(spec), DropRejects(), ExactDuplicates(), MinhashDedupSignature(str(signatures), config=config)],
              tasks, logs / "1_signatures"),
        # One bucket task per MinHash bucket, run `workers` at a time.
        Stage("curate-dedup-2-buckets", [MinhashDedupBuckets(str(signatures), str(buckets), config=config)],
              config.num_buckets, logs / "2_buckets"),
        Stage("curate-dedup-3-clusters",
              [MinhashDedupCluster(str(buckets), str(clusters), config=config, save_cluster_id=True)],
              1, logs / "3_clusters"),
        Stage("curate-dedup-4-filter", [
            RowReader(spec, progress=progress),
            SplitRejects(str(stage / "rejects")),
            ExactDuplicates(RemovedWriter(str(removed), "exact", _exact_row)),
            ClusterAwareFilter(str(clusters), exclusion_writer=RemovedWriter(str(removed), "near", _near_row),
                               load_cluster_ids=True),
            RecordClusterKeepers(str(keepers)),
            RowWriter(str(stage / "data"), schema=schema),
        ], tasks, logs / "4_filter"),
    ], executor, workers)

    # The removed rows are read from the stage before publish_stage closes it and moves its data away.
    counts = _write_duplicates(stage, output)
    unreadable, kept = publish_stage(stage, output, "dedup")
    parameters = {
        "input": str(input), "text_key": spec.text_key, "threshold": threshold, "n_grams": n_grams,
        "num_buckets": config.num_buckets, "hashes_per_bucket": config.hashes_per_bucket,
    }
    result = DedupResult(
        output=output, read=kept + counts["exact_duplicate"] + counts["near_duplicate"], kept=kept,
        exact_removed=counts["exact_duplicate"], near_removed=counts["near_duplicate"], unreadable=unreadable,
        threshold=threshold, parameters=parameters,
    )
    write_text_atomic(output / STATE / "dedup.json", json.dumps({**parameters, **_counts(result)}, indent=2))
    command = reproduce_command("dedup", input, options=[("--output", output), ("--threshold", threshold),
                                                         ("--ngrams", n_grams), ("--text-key", spec.text_key),
                                                         ("--id-key", id_key)])
    write_report(input, output, "dedup", dedup_card_section(result), {
        "step": "deduplication", "parameters": list(parameters.items()), "command": command,
        "method": "Exact duplicates (normalized-text hash) and then MinHash near duplicates (datatrove) were removed; "
                  "every other row is written back as it was read.",
        "limitations": "MinHash finds near duplicates with a probability that falls off below the threshold: a pair "
                       "slightly less similar than it may survive, a pair slightly more similar may not.",
    })
    for scratch in (signatures, buckets, clusters):
        shutil.rmtree(scratch, ignore_errors=True)
    return result


def dedup_dataset(directory: str | Path, **options) -> DedupResult:
    """Deduplicates a built dataset in place (DIR/data), for builders' --dedup option."""
    return dedup(directory, directory, **options)


def _write_duplicates(stage: Path, output: Path) -> dict[str, int]:
    """Joins removed rows to the document their cluster kept; writes OUTPUT/rejects/duplicates.jsonl."""
    destination = output / "rejects" / "duplicates.jsonl"
    destination.parent.mkdir(parents=True, exist_ok=True)
    removed_files = list((stage / "removed").glob("*.jsonl"))
    if not removed_files:
        destination.unlink(missing_ok=True)
        return {"exact_duplicate": 0, "near_duplicate": 0}
    with duckdb.connect() as connection:
        connection.execute(
            f"CREATE VIEW removed AS SELECT * FROM read_json('{jsonl_glob(stage / 'removed')}', "
            "format='newline_delimited', "
            "columns={reason: 'VARCHAR', duplicate_of: 'VARCHAR', cluster: 'BIGINT', id: 'VARCHAR', row: 'JSON'})"
        )
        keeper_files = [p for p in (stage / "keepers").glob("*.jsonl") if p.stat().st_size]
        if keeper_files:
            connection.execute(
                f"CREATE VIEW keepers AS SELECT * FROM read_json('{jsonl_glob(stage / 'keepers')}', "
                "format='newline_delimited', columns={cluster: 'BIGINT', id: 'VARCHAR'})"
            )
        else:
            connection.execute("CREATE VIEW keepers AS SELECT NULL::BIGINT AS cluster, NULL::VARCHAR AS id WHERE false")
        write_jsonl_query(
            connection,
            "SELECT r.reason, r.id, coalesce(r.duplicate_of, k.id) AS duplicate_of, r.cluster, r.row "
            "FROM removed r LEFT JOIN keepers k ON r.cluster = k.cluster ORDER BY r.reason, r.cluster, r.id",
            destination,
        )
        counts = dict(connection.sql("SELECT reason, count(*) FROM removed GROUP BY reason").fetchall())
    return {"exact_duplicate": counts.get("exact_duplicate", 0), "near_duplicate": counts.get("near_duplicate", 0)}


def _counts(result: DedupResult) -> dict:
    return {"read": result.read, "kept": result.kept, "exact_removed": result.exact_removed,
            "near_removed": result.near_removed, "unreadable": result.unreadable}


def dedup_card_section(result: DedupResult) -> str:
    p = result.parameters
    share = f"{100 * result.removed / result.read:.2f} %" if result.read else "-"
    return (
        "## Deduplication\n\n"
        f"Exact duplicates (same text up to case and spacing) first, then MinHash near-duplicates on "
        f"`{p['text_key']}` (word {p['n_grams']}-grams, {p['num_buckets']} buckets x {p['hashes_per_bucket']} hashes, "
        f"Jaccard threshold about {p['threshold']}).\n\n"
        "| | rows |\n|---|---|\n"
        f"| read | {result.read:,} |\n| exact duplicates removed | {result.exact_removed:,} |\n"
        f"| near duplicates removed | {result.near_removed:,} |\n| kept | {result.kept:,} |\n"
        f"| removed share | {share} |\n\n"
        "Removed rows are in `rejects/duplicates.jsonl`, each with the id of the row kept in its place (`duplicate_of`)."
    )


def dedup_job(job: DedupJob, progress: bool = True) -> DedupResult | None:
    """Runs `curate dedup`: into a new OUTPUT under its claim (None when up to date), or in place (no claim)."""
    return clean_once(job.input, job.output, "dedup", job.record(), lambda: dedup(
        job.input, job.output, text_key=job.text_key, id_key=job.id_key, threshold=job.threshold, n_grams=job.ngrams,
        tasks=job.executor.tasks, workers=job.executor.workers, progress=progress, executor=job.executor),
        overwrite=job.overwrite)

"""The tag job: corpus -> behavior classifier -> attribute shards in `TAGS/<classifier>/`.

Runs on a datatrove executor (local, Ray or Slurm; see executors.py). A rerun skips the tasks that
completed; a task that died mid-way runs again and replaces its shard, so no document is lost or
duplicated.

The manifest records every input file (size, mtime; SHA-256 with --verify-inputs), because a tags
directory outlives its corpus: files are added, grow, are fixed. A rerun over a changed corpus tags only
the new and changed files, as a new generation with its own job and shard names, after dropping the old
rows of every changed or removed file, so the tags always describe the corpus as it is now.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from curate.classifiers import needs_model_server, resolve_name
from curate.errors import CurateError, IncompleteRunError
from curate.files import atomic_path, write_text_atomic
from curate.pipelines.executors import ExecutorOptions, run_pipeline
from curate.pipelines.jobs import TagJob
from curate.pipelines.query import (
    DUPLICATE_REJECTS,
    count_rejects,
    first_reject_reason,
    parquet_files,
    write_duplicate_rejects,
)
from curate.pipelines.readers import InputSpec, make_reader
from curate.pipelines.steps import AttributeWriter, SplitRejects, TagDocuments

MANIFEST = "manifest.json"
PATHS_FILE = "input_files.txt"
UPDATE = "update-"
# Manifest entries that record progress, not what the tags are of: left out when two runs are compared.
STATE_KEYS = ("files", "generations", "pending_purge")


class TagsMismatchError(CurateError, RuntimeError):
    pass


class EmptyRunError(CurateError, RuntimeError):
    """A run that read no usable document: every record was rejected, or the input holds none."""


class InputChangedError(CurateError, RuntimeError):
    """The input changed since the tags were made and they cannot be brought up to date here."""


@dataclass
class TagResult:
    tags_dir: Path
    rejects_dir: Path
    classifier: str
    updated_files: list[str] = field(default_factory=list)  # new or changed input files tagged by this run
    removed_files: list[str] = field(default_factory=list)  # input files gone since; their rows were dropped


def _write_json(path: Path, data: dict) -> None:
    write_text_atomic(path, json.dumps(data, indent=2))


def _identity(manifest: dict) -> dict:
    return {k: v for k, v in manifest.items() if k not in STATE_KEYS}


def check_manifest(out: Path, manifest: dict) -> None:
    path = out / MANIFEST
    if path.exists():
        existing = _identity(json.loads(path.read_text()))
        if existing != manifest:
            if not _tagged_rows(out):
                # Nothing was tagged there (every record rejected, say for a wrong --text-key): the fixed run replaces it.
                from loguru import logger

                logger.warning(f"{out} holds no tagged document of an earlier run with other options; starting it afresh")
                shutil.rmtree(out)
                return check_manifest(out, manifest)
            raise TagsMismatchError(
                f"{out} already holds tags for a different input or classifier:\n"
                f"  there: {json.dumps(existing)}\n  now:   {json.dumps(manifest)}\n"
                "Pass another --tags directory for this input, or delete that one to re-tag."
            )
    else:
        out.mkdir(parents=True, exist_ok=True)
        _write_json(path, manifest)


def file_fingerprints(spec: InputSpec, verify: bool = False) -> dict[str, dict] | None:
    """Size and modification time of every input file (and its SHA-256 with `verify`); None for a hub dataset,
    whose files curate does not see."""
    if spec.is_hub:
        return None
    root = Path(spec.folder_and_pattern()[0])
    fingerprints = {}
    for relative in spec.list_files():
        stat = (root / relative).stat()
        fingerprint = {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
        if verify:
            digest = hashlib.sha256()
            with open(root / relative, "rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    digest.update(block)
            fingerprint["sha256"] = digest.hexdigest()
        fingerprints[relative] = fingerprint
    return fingerprints


def same_content(recorded: dict, current: dict) -> bool:
    """By hash when both sides have one (--verify-inputs), else by size and modification time."""
    if "sha256" in recorded and "sha256" in current:
        return recorded["sha256"] == current["sha256"]
    return recorded["size"] == current["size"] and recorded["mtime_ns"] == current["mtime_ns"]


def plan_generations(out: Path, identity: dict, current: dict[str, dict] | None) -> tuple[dict, list[str], list[str]]:
    """The manifest to run, with the new and changed files as a new generation (tagged into
    `attributes_update-NNNN_*` by their own job) and the files whose old rows must go listed in
    `pending_purge`. Generation 0 is the first run. Each generation reads exactly the files it was started
    with, so adding files never changes how an unfinished run deals its files to ranks; a file is read by
    the newest generation that lists it. Returns (manifest, new or changed files, removed files)."""
    check_manifest(out, identity)
    manifest = json.loads((out / MANIFEST).read_text())
    if current is None:
        manifest.setdefault("generations", [{"name": "", "files": None}])
        return manifest, [], []
    if "generations" not in manifest:
        if _tagged_rows(out):
            from loguru import logger

            logger.warning(f"{out} was tagged before curate recorded input files; taking the input as unchanged since "
                           f"(delete {out} to re-tag it from scratch)")
        manifest["generations"] = [{"name": "", "files": sorted(current)}]
        manifest["files"] = {name: {**fingerprint, "generation": ""} for name, fingerprint in current.items()}
        _write_json(out / MANIFEST, manifest)
        return manifest, [], []
    recorded = manifest["files"]
    changed = [name for name, fp in current.items() if name not in recorded or not same_content(recorded[name], fp)]
    removed = sorted(set(recorded) - set(current))
    for name, fingerprint in current.items():  # same content: keep a newly computed hash or a touched mtime
        if name not in changed and {**recorded[name], **fingerprint} != recorded[name]:
            recorded[name] = {**recorded[name], **fingerprint}
    superseded = [name for name in [*changed, *removed] if name in recorded]
    if changed:
        generation = f"{UPDATE}{len(manifest['generations']):04d}"
        manifest["generations"].append({"name": generation, "files": sorted(changed)})
        for name in changed:
            recorded[name] = {**current[name], "generation": generation}
    for name in removed:
        del recorded[name]
    if superseded:
        manifest["pending_purge"] = sorted({*manifest.get("pending_purge", []), *superseded})
    _write_json(out / MANIFEST, manifest)
    return manifest, sorted(changed), removed


def purge_sources(out: Path, sources: list[str]) -> None:
    """Drops the rows and rejects read from `sources` (files that changed or went away) from every shard, each
    rewritten whole (curate.files.atomic_path): a changed file's new rows replace its old ones, never add to them.
    A crash mid-way leaves each shard either as it was or purged, and `pending_purge` stays in the manifest until
    the purge is done, so the rerun purges again; purging a shard twice changes nothing."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    wanted = pa.array(sources, type=pa.string())
    for shard in sorted(out.glob("*.parquet")):  # datatrove names them 000_attributes_*.parquet
        table = pq.read_table(shard)
        if "source" not in table.column_names:
            continue
        stale = pc.fill_null(pc.is_in(table["source"], value_set=wanted), False)
        if pc.any(stale).as_py():
            with atomic_path(shard) as partial:
                pq.write_table(table.filter(pc.invert(stale)), partial)
    stale_sources = set(sources)
    for rejects in sorted((out / "rejects").glob("rejects_*.jsonl")):
        lines = rejects.read_bytes().splitlines(keepends=True)
        kept = [line for line in lines if json.loads(line).get("source") not in stale_sources]
        if len(kept) != len(lines):
            with atomic_path(rejects) as partial:
                partial.write_bytes(b"".join(kept))


def generation_logs(out: Path, generation: str) -> Path:
    return out / "_logs" / generation if generation else out / "_logs"


class TagJobError(CurateError, ValueError):
    pass


def check_no_model(job: TagJob) -> None:
    """A model server's options mean nothing to an in-process classifier: --model with one is a mistake, said so."""
    if job.model:
        raise TagJobError("--model applies to --classifier llm or cascade only")


def tag_job(job: TagJob, progress: bool = True) -> TagResult:
    """Runs the tag job of an in-process classifier (cues_vN, distilled); a rerun skips finished tasks. A job whose
    classifier needs a model server runs through curate.pipelines.tagging.tag, which this module does not import:
    `curate tag` with cues starts without loading the LLM job stack (datatrove's inference runner)."""
    if needs_model_server(job.classifier):
        raise TagJobError(f"--classifier {job.classifier} runs on a model server: use curate.pipelines.tagging.tag")
    check_no_model(job)
    return run_tagging(job.corpus, job.output, job.classifier, tasks=job.executor.tasks, workers=job.executor.workers,
                       batch_size=job.batch_size, progress=progress, limit=job.limit, verify_inputs=job.verify_inputs,
                       executor=job.executor)


def run_tagging(
    spec: InputSpec,
    tags_root: str | Path,
    classifier: str = "cues",
    tasks: int = 1,
    workers: int = 1,
    batch_size: int = 64,
    progress: bool = True,
    limit: int = -1,
    classifier_options: dict | None = None,
    executor: ExecutorOptions | None = None,
    verify_inputs: bool = False,
    allow_partial: bool = False,
) -> TagResult:
    """Tags what the tags directory does not hold yet: unfinished tasks, and the input files added or changed
    since (their old rows are dropped first). Raises EmptyRunError when no document could be tagged, and
    RuntimeError when tasks stay unfinished, unless `allow_partial` (then it warns and returns the tags there are)."""
    from loguru import logger

    name, argument = resolve_name(classifier)
    out = Path(tags_root) / name
    identity = {"classifier": name, "classifier_argument": argument, **spec.fingerprint(), "limit": limit}
    if name.startswith(("llm_", "cascade_")):
        unfinished = failed_tasks(out / "_logs", recorded_tasks(out / "_logs", tasks))
        if unfinished and allow_partial and _tagged_rows(out):
            logger.warning(f"{out}: {len(unfinished)} tagging tasks are unfinished; --allow-partial: using the "
                           f"documents the finished ones tagged")
        elif unfinished:
            # Their requests go through datatrove's InferenceRunner, which owns the model server.
            raise TagJobError(
                f"{name} tags through its own job: run `curate tag-llm --model M --backend vllm|endpoint|transformers "
                f"--input ... --output {tags_root}` first; `curate build --tags {tags_root} --classifier {name}` then reuses it."
            )
        check_manifest(out, identity)
        return TagResult(tags_dir=out, rejects_dir=out / "rejects", classifier=name)
    manifest, changed, removed = plan_generations(out, identity, file_fingerprints(spec, verify_inputs))
    if manifest.get("pending_purge"):
        purge_sources(out, manifest["pending_purge"])
        del manifest["pending_purge"]
        _write_json(out / MANIFEST, manifest)
    rejects = out / "rejects"
    owners = manifest.get("files", {})
    for generation in manifest["generations"]:
        label = generation["name"]
        logs = generation_logs(out, label)
        files = generation["files"]
        paths_file = None
        if files is not None:
            logs.mkdir(parents=True, exist_ok=True)
            paths_file = logs / PATHS_FILE
            if not paths_file.exists():
                write_text_atomic(paths_file, "".join(f"{f}\n" for f in files))
        # Generation 0 keeps the task count it was started with; an update runs as many tasks as it has files, at most.
        ran = recorded_tasks(logs, tasks) if not label else _recorded_count(logs, min(tasks, len(files)))
        if not failed_tasks(logs, ran):
            continue
        superseded = tuple(f for f in files or () if owners.get(f, {}).get("generation") != label)
        prefix = f"{label}_" if label else ""
        pipeline = [
            make_reader(spec, progress=progress, limit=limit, paths_file=str(paths_file) if paths_file else None,
                        skip_files=superseded),
            SplitRejects(str(rejects), prefix=prefix),
            TagDocuments(classifier, batch_size=batch_size, classifier_options=classifier_options),
            AttributeWriter(str(out), prefix=prefix),
        ]
        run_pipeline(pipeline, executor, ran, workers, logs, job_name=f"curate-tag-{name}{'-' + label if label else ''}")
        failed = failed_tasks(logs, ran)
        if failed and allow_partial:
            logger.warning(f"{len(failed)} of {ran} tagging tasks did not complete; --allow-partial: going on without them")
        elif failed:
            raise IncompleteRunError(
                f"{len(failed)} of {ran} tagging tasks did not complete (ranks {failed[:10]}); "
                f"see {logs / 'logs'}. Rerun the same command to finish them."
            )
    if not _tagged_rows(out):
        raise EmptyRunError(empty_run_message(spec, rejects))
    report_duplicate_ids(out)
    return TagResult(tags_dir=out, rejects_dir=rejects, classifier=name, updated_files=changed, removed_files=removed)


def _tagged_rows(out: Path) -> int:
    import pyarrow.parquet as pq

    files = parquet_files(out) if out.is_dir() else []
    return sum(pq.ParquetFile(f).metadata.num_rows for f in files)


def empty_run_message(spec: InputSpec, rejects_dir: Path) -> str:
    """Why a run tagged nothing, and what to do: the most common reject reason in full (a missing text field
    lists the fields the records do have), or that the input holds no record at all."""
    counts = count_rejects(rejects_dir)
    if not counts:
        return (f"no document to tag in {spec.path}: the files hold no records (are they empty?). "
                "Point --input at the corpus files.")
    total = sum(counts.values())
    kind, n = next(iter(counts.items()))
    example = first_reject_reason(rejects_dir, kind)
    return (f"no document to tag in {spec.path}: all {total:,} records were rejected; {n:,} as {example}. "
            f"Every reject is kept in {rejects_dir}.")


def unfinished_tasks(tags_dir: Path) -> tuple[int, int]:
    """(unfinished, total) tasks over every generation of a tags directory (or the build logs under
    `.curate/logs` of a dataset): what `stats` and `build` warn about."""
    tags_dir = Path(tags_dir)
    manifest_path = tags_dir / MANIFEST
    generations = [""]
    if manifest_path.is_file():
        generations = [g["name"] for g in json.loads(manifest_path.read_text()).get("generations", [{"name": ""}])]
    unfinished = total = 0
    for label in generations:
        logs = generation_logs(tags_dir, label)
        executor_json = logs / "executor.json"
        if not executor_json.is_file():
            continue
        tasks = int(json.loads(executor_json.read_text()).get("tasks", 1))
        total += tasks
        unfinished += len(failed_tasks(logs, tasks))
    return unfinished, total


def report_duplicate_ids(tags_dir: Path) -> int:
    """Once every task is done: the copies of an id that different tasks tagged, beyond the one every query keeps,
    go to the rejects as `duplicate_id` (the shards themselves are never rewritten). Returns how many."""
    files = parquet_files(tags_dir)
    return write_duplicate_rejects(files, tags_dir / "rejects" / DUPLICATE_REJECTS) if files else 0


def _recorded_count(logging_dir: Path, requested: int) -> int:
    path = Path(logging_dir) / "executor.json"
    return int(json.loads(path.read_text()).get("tasks", requested)) if path.is_file() else requested


def recorded_tasks(logging_dir: Path, requested: int) -> int:
    """The task count a tags directory is sharded by. Files are dealt to ranks by that count and a finished
    rank leaves a completion marker, so a rerun with another count would skip ranks whose files it now
    deals differently (dropping them) or tag files a finished rank already tagged. The count of the run
    that started the directory (datatrove's executor.json) wins; `requested` applies to a new directory."""
    path = Path(logging_dir) / "executor.json"
    if not path.is_file():
        return requested
    recorded = int(json.loads(path.read_text()).get("tasks", requested))
    if recorded != requested:
        from loguru import logger

        logger.warning(f"{Path(logging_dir).parent} is sharded into {recorded} tasks by the run that started it; "
                       f"using {recorded}, not --tasks {requested} (a new --output starts afresh)")
    return recorded


def failed_tasks(logging_dir: Path, tasks: int) -> list[int]:
    done = {p.name for p in (logging_dir / "completions").glob("*")}
    return [rank for rank in range(tasks) if f"{rank:05d}" not in done]

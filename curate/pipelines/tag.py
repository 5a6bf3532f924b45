"""The tag job: corpus -> behavior classifier -> attribute shards in `TAGS/<classifier>/`.

Runs on a datatrove executor (local, Ray or Slurm; see executors.py). A rerun skips the tasks that
completed; a task that died mid-way runs again and replaces its shard, so no document is lost or
duplicated.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from curate.classifiers import resolve_name
from curate.pipelines.executors import ExecutorOptions, run_pipeline
from curate.pipelines.query import (
    DUPLICATE_REJECTS,
    parquet_files,
    write_duplicate_rejects,
)
from curate.pipelines.readers import InputSpec, make_reader
from curate.errors import CurateError
from curate.pipelines.steps import AttributeWriter, SplitRejects, TagDocuments

MANIFEST = "manifest.json"


class TagsMismatchError(CurateError, RuntimeError):
    pass


@dataclass
class TagResult:
    tags_dir: Path
    rejects_dir: Path
    classifier: str


def tags_dir_for(tags_root: str | Path, classifier: str) -> Path:
    name, _ = resolve_name(classifier)
    return Path(tags_root) / name


def _check_manifest(out: Path, manifest: dict) -> None:
    path = out / MANIFEST
    if path.exists():
        existing = json.loads(path.read_text())
        if existing != manifest:
            raise TagsMismatchError(
                f"{out} already holds tags for a different input or classifier:\n"
                f"  there: {json.dumps(existing)}\n  now:   {json.dumps(manifest)}\n"
                "Pass another --tags directory for this input, or delete that one to re-tag."
            )
    else:
        out.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(manifest, indent=2))
        tmp.replace(path)


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
) -> TagResult:
    name, argument = resolve_name(classifier)
    out = Path(tags_root) / name
    if name.startswith(("llm_", "cascade_")) and _failed_tasks(out / "_logs", tasks):
        # Their requests go through datatrove's InferenceRunner, which owns the model server.
        raise ValueError(
            f"{name} tags through its own job: run `curate tag-llm --model M --backend vllm|endpoint|transformers "
            f"--input ... --output {tags_root}` first; `curate build --tags {tags_root} --classifier {name}` then reuses it."
        )
    _check_manifest(out, {"classifier": name, "classifier_argument": argument, **spec.fingerprint(), "limit": limit})
    tasks = recorded_tasks(out / "_logs", tasks)
    rejects = out / "rejects"
    pipeline = [
        make_reader(spec, progress=progress, limit=limit),
        SplitRejects(str(rejects)),
        TagDocuments(classifier, batch_size=batch_size, classifier_options=classifier_options),
        AttributeWriter(str(out)),
    ]
    run_pipeline(pipeline, executor, tasks, workers, out / "_logs", job_name=f"curate-tag-{name}")
    failed = _failed_tasks(out / "_logs", tasks)
    if failed:
        raise RuntimeError(
            f"{len(failed)} of {tasks} tagging tasks did not complete (ranks {failed[:10]}); "
            f"see {out / '_logs' / 'logs'}. Rerun the same command to finish them."
        )
    report_duplicate_ids(out)
    return TagResult(tags_dir=out, rejects_dir=rejects, classifier=name)


def report_duplicate_ids(tags_dir: Path) -> int:
    """Once every task is done: the copies of an id that different tasks tagged, beyond the one every query keeps,
    go to the rejects as `duplicate_id` (the shards themselves are never rewritten). Returns how many."""
    files = parquet_files(tags_dir)
    return write_duplicate_rejects(files, tags_dir / "rejects" / DUPLICATE_REJECTS) if files else 0


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


def _failed_tasks(logging_dir: Path, tasks: int) -> list[int]:
    done = {p.name for p in (logging_dir / "completions").glob("*")}
    return [rank for rank in range(tasks) if f"{rank:05d}" not in done]

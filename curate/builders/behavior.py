"""The build job: tag (reusing finished shards) -> select with DuckDB -> write the selected documents.

Output layout:
    OUT/data/train-*.parquet   text + attributes; `datasets.load_dataset("parquet", data_dir="OUT/data")`
    OUT/README.md              dataset card with measured prevalence
    OUT/rejects/               every record that could not be read, with its reason, and the copies of a
                               repeated id that were not kept (`duplicate_id`)
    OUT/.curate/               selection, parameters and executor logs (bookkeeping)
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from curate.behaviors import UnknownBehaviorError, parse_behavior_list
from curate.builders.jobs import BuildJob
from curate.classifiers import resolve_name
from curate.data_cards.cards import write_behavior_card
from curate.pipelines.decontam import decontaminate_dataset
from curate.pipelines.dedup import dedup_dataset
from curate.pipelines.executors import ExecutorOptions, run_pipeline
from curate.pipelines.query import (
    Selection,
    behavior_stats,
    count_kept_elsewhere,
    count_rejects,
    parquet_files,
    select_ids,
    write_kept_copies,
)
from curate.pipelines.readers import InputSpec, make_reader
from curate.pipelines.state import STATE, write_once
from curate.pipelines.steps import (
    DatasetWriter,
    KeepFirstCopy,
    KeepSelected,
    SplitRejects,
    kept_column_fields,
)
from curate.pipelines.tag import MANIFEST, EmptyRunError, file_fingerprints, run_tagging


@dataclass
class BuildResult:
    output: Path
    tags_dir: Path
    selected: int
    parameters: dict
    cross_file_duplicates: int = 0  # copies of an id dropped because another task read the copy kept


def run_build(
    spec: InputSpec,
    output: str | Path,
    selection: Selection,
    tags_root: str | Path | None = None,
    classifier: str = "cues",
    tasks: int = 1,
    workers: int = 1,
    batch_size: int = 64,
    progress: bool = True,
    license: str = "other",
    card_extra: dict | None = None,
    dedup: bool = False,
    decontam: str | None = None,
    benchmarks_dir: str | Path | None = None,
    executor: ExecutorOptions | None = None,
    verify_inputs: bool = False,
    allow_partial: bool = False,
    keep_columns: list[str] | None = None,
) -> BuildResult:
    output = Path(output)
    given_tags = tags_root
    kept = kept_column_fields(spec, keep_columns or [])  # a column no record has fails before the tagging
    tags_root = Path(tags_root) if tags_root else output / "tags"
    tagged = run_tagging(spec, tags_root, classifier, tasks=tasks, workers=workers, batch_size=batch_size, progress=progress,
                          executor=executor, verify_inputs=verify_inputs, allow_partial=allow_partial)

    state = output / STATE
    parameters = {
        **spec.fingerprint(),
        "classifier": tagged.classifier,
        "tags": str(tagged.tags_dir.resolve()),
        "selection": selection.describe(),
        # A cleaned build is another dataset: toggling either must not reuse the data of the other.
        "cleaning": {"dedup": dedup, "decontam": decontam},
        # Only when asked: the parameters of builds made before the option existed stay the same.
        **({"keep_columns": [f.name for f in kept]} if kept else {}),
        # The corpus as tagged: a file added or changed since the last build makes this another build, not a resume.
        "input_files": json.loads((tagged.tags_dir / MANIFEST).read_text()).get("files"),
    }
    parameters_path = state / "parameters.json"
    if parameters_path.exists() and json.loads(parameters_path.read_text()) != parameters:
        # Different selection: the finished tasks of the old build must not be skipped.
        shutil.rmtree(state)
        shutil.rmtree(output / "data", ignore_errors=True)
        shutil.rmtree(output / "rejects", ignore_errors=True)
    state.mkdir(parents=True, exist_ok=True)
    parameters_path.write_text(json.dumps(parameters, indent=2))

    selection_path = state / "selection.parquet"
    selected = select_ids(tagged.tags_dir, selection, selection_path)
    if not selected:
        # An empty dataset looks like a built one to everything downstream; say why instead.
        tagged_count = sum(s.documents for s in behavior_stats(tagged.tags_dir))
        raise EmptyRunError(
            f"no document matches the selection {json.dumps(selection.describe())} among the {tagged_count:,} tagged "
            f"in {tagged.tags_dir}; see `curate stats {tagged.tags_dir}`, then lower --min-count or choose other "
            "--behaviors")
    kept_copies_path = state / "kept_copies.parquet"
    write_kept_copies(parquet_files(tagged.tags_dir), tagged.rejects_dir, kept_copies_path)
    pipeline = [
        make_reader(spec, progress=progress),
        KeepFirstCopy(str(kept_copies_path)),
        SplitRejects(str(output / "rejects")),
        KeepSelected(str(selection_path)),
        DatasetWriter(str(output / "data"), kept),
    ]
    run_pipeline(pipeline, executor, tasks, workers, state / "logs", job_name="curate-build")

    corpus_stats = behavior_stats(tagged.tags_dir)
    dataset_stats = behavior_stats(output / "data") if parquet_files(output / "data") else []
    write_behavior_card(
        output,
        parameters=parameters,
        corpus_stats=corpus_stats,
        dataset_stats=dataset_stats,
        rejects=count_rejects(tagged.rejects_dir),
        license=license,
        extra=card_extra or {},
        dedup=dedup,
        decontam=decontam,
        benchmarks_dir=benchmarks_dir,
        tags_root=given_tags,
        keep_columns=[f.name for f in kept],
    )
    # After the card: each adds its own report section to it.
    if dedup:
        dedup_dataset(output, text_key="text", tasks=tasks, workers=workers, progress=progress)
    if decontam:
        decontaminate_dataset(output, decontam, fields=["text"], benchmarks_dir=benchmarks_dir, tasks=tasks,
                              workers=workers, progress=progress)
    return BuildResult(output=output, tags_dir=tagged.tags_dir, selected=selected, parameters=parameters,
                       cross_file_duplicates=count_kept_elsewhere(output / "rejects"))


def build_selection(job: BuildJob) -> Selection:
    """The job's selection; an unknown behavior or classifier, none named, or one both required and excluded fails
    here, before anything is claimed or tagged (the build flow checks its parameters with it)."""
    wanted = parse_behavior_list(job.behaviors, allow_none=True)
    if wanted == []:
        raise UnknownBehaviorError("--behaviors is empty; name at least one behavior, or 'none'")
    resolve_name(job.classifier)
    return Selection(behaviors=wanted, min_count=job.min_count, exclude=parse_behavior_list(job.exclude_behaviors) or [],
                     limit=job.limit, seed=job.seed)


def build(job: BuildJob, progress: bool = True, refresh: bool = False) -> BuildResult | None:
    """Runs `curate build` and the build flow: claims the output for `job.record()` (a folder holding another
    dataset is refused unless `job.overwrite`), then tags, selects and writes. None when the output is up to date;
    `refresh` builds it all the same (a flow whose cached result is stale: curate's code changed)."""
    selection = build_selection(job)
    output = job.dataset_dir
    return write_once(
        output, "build", job.record(), lambda: run_build(
            job.corpus, output, selection, tags_root=job.tags, classifier=job.classifier, tasks=job.executor.tasks,
            workers=job.executor.workers, batch_size=job.batch_size, progress=progress,
            license="apache-2.0" if job.sample else job.license, verify_inputs=job.verify_inputs,
            allow_partial=job.allow_partial, keep_columns=job.kept_columns, executor=job.executor,
            **job.cleaning.arguments()),
        inputs=file_fingerprints(job.corpus, job.verify_inputs), overwrite=job.overwrite,
        keep=("tags",) if job.tags_inside else (), refresh=refresh)

"""The one way an LLM job runs into a folder: its saved configuration decides whether an earlier run there is
resumed (the same configuration: finished chunks, checkpoints and the request cache are reused) or refused (another
one: nothing is mixed, nothing is silently removed; the message names the fields that differ and the fix, and
`overwrite` removes the old run and starts over), and one wiring runs it (run_llm_job: the steps that read its
documents, then a CurateInferenceRunner, on an executor, with its logs and checkpoints where LLMJobFolder puts them)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from datatrove.pipeline.inference.servers.base import ServerError

from curate.errors import CurateError, IncompleteRunError
from curate.files import write_text_atomic
from curate.options import DEFAULT_RECORDS_PER_CHUNK
from curate.pipelines.executors import LOCAL, ExecutorOptions, run_pipeline
from curate.pipelines.llm.server import CurateInferenceRunner, ModelServerError, server_failure
from curate.pipelines.tag import failed_tasks


class JobConfigChangedError(CurateError, ValueError):
    pass


def config_differences(saved: dict, config: dict) -> list[str]:
    """'field: saved -> now' for every top-level field that differs."""
    return [f"{key}: {json.dumps(saved[key]) if key in saved else 'absent'} -> {json.dumps(config[key]) if key in config else 'absent'}"
            for key in sorted(set(saved) | set(config)) if key not in saved or key not in config or saved[key] != config[key]]


def claim_job(record: Path, config: dict, what: str, fix: str, overwrite: bool = False,
              run: Sequence[Path] = ()) -> None:
    """Claims the job whose configuration is saved at `record` for `config` (JSON-serialisable). `run`: what the
    old run wrote (default: the record's folder), removed by `overwrite`. `what` names the results in a refusal
    ('LLM tags', 'samples'); `fix` is the option that starts over ('pass --overwrite')."""
    run = list(run) or [record.parent]
    if record.exists():
        saved = json.loads(record.read_text())
        if overwrite:
            for path in [*run, record]:
                if path.is_dir():
                    shutil.rmtree(path)
                else:
                    path.unlink(missing_ok=True)
        elif saved != json.loads(json.dumps(config)):
            differences = "; ".join(config_differences(saved, json.loads(json.dumps(config))))
            raise JobConfigChangedError(f"{record.parent} holds {what} made with another configuration ({differences}); "
                                        f"{fix}, or pass another output")
        else:
            return
    write_text_atomic(record, json.dumps(config, indent=2))


def run_job(pipeline: list, executor: ExecutorOptions, tasks: int, workers: int, logs: Path, job_name: str,
            what: str) -> None:
    """Runs a pipeline that ends in a CurateInferenceRunner (Slurm: raises JobSubmitted); a task that did not
    complete fails the job, and the same call resumes it. A server that did not start or answer (raised here when the
    task ran in this process) is a ModelServerError naming the server, not datatrove's traceback."""
    try:
        run_pipeline(pipeline, executor, tasks, workers, logs, job_name=job_name)
    except ServerError as error:
        raise ModelServerError(f"{what}: {server_failure(pipeline[-1].config, error)}") from None
    failed = failed_tasks(logs, tasks)
    if failed:
        raise IncompleteRunError(f"{len(failed)} of {tasks} {what} tasks did not complete (ranks {failed[:10]}); see "
                           f"{logs / 'logs'}. Rerun the same command to resume from the checkpoints.")


@dataclass(frozen=True)
class LLMJobFolder:
    """Where an LLM job keeps its bookkeeping: datatrove's logs (task completions, the server logs under server/) and
    the runner's checkpoints. `hidden`: '_logs' and '_checkpoints', in a folder that is read as data too (tags,
    results), whose readers skip '_x' folders; else 'logs' and 'checkpoints', in a stage of its own under .curate.
    Two layouts because runs already on disk resume only from where they put their checkpoints."""

    root: Path
    hidden: bool = True

    @property
    def logs(self) -> Path:
        return self.root / ("_logs" if self.hidden else "logs")

    @property
    def server_logs(self) -> str:
        """What inference_config takes as its log folder."""
        return str(self.logs / "server")

    @property
    def checkpoints(self) -> Path:
        return self.root / ("_checkpoints" if self.hidden else "checkpoints")


def run_llm_job(folder: LLMJobFolder, steps: list, *, rollout_fn: Callable, config, writer, metadata_key: str,
                records_per_chunk: int = DEFAULT_RECORDS_PER_CHUNK, shared_context=None,
                executor: ExecutorOptions = LOCAL, tasks: int = 1, workers: int = 1, job_name: str,
                what: str) -> None:
    """The one wiring of an LLM job, once claimed (claim_job): `steps` (a reader, or the documents themselves, and
    any filter) feed a CurateInferenceRunner that calls `rollout_fn` per document on the server `config` describes
    (inference_config, with folder.server_logs), checkpoints every `records_per_chunk` documents in
    folder.checkpoints (a rerun resumes there), skips a document whose request the server refused as malformed, and
    hands each result under `metadata_key` to `writer`; run_job runs it and fails on any unfinished task."""
    runner = CurateInferenceRunner(
        rollout_fn=rollout_fn,
        config=config,
        output_writer=writer,
        shared_context=shared_context,
        checkpoints_local_dir=str(folder.checkpoints),
        records_per_chunk=records_per_chunk,
        metadata_key=metadata_key,
        skip_bad_requests=True,
    )
    run_job([*steps, runner], executor, tasks, workers, folder.logs, job_name, what)

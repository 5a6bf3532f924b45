"""Where a datatrove pipeline runs: this machine, a Ray cluster, or a Slurm job array.

Every corpus job (tag, build) hands its pipeline to `run_pipeline`, which picks datatrove's
LocalPipelineExecutor, RayPipelineExecutor or SlurmPipelineExecutor. All three shard the input
files over `tasks` ranks and record a completion file per finished rank under the logging
directory, so a rerun of the same command, on any executor, only runs the ranks that did not finish.

Ray and Slurm workers must see the same filesystem paths as the submitting process (a shared
filesystem) and have curate installed in the same environment.

Slurm is asynchronous: the job array is submitted and the call returns. `JobSubmitted` says so;
rerunning the command after the job finishes continues with what depends on it. `dry_run` writes
the sbatch script and the pickled executor exactly as a submission would, without calling sbatch.

A command of several stages (dedup's four MinHash steps) runs them in order on this machine or Ray;
on Slurm one submission queues the whole chain, each job array starting once the one before it
succeeded (datatrove's `depends`). The folder the stages work in is kept between runs only while the
command's inputs and parameters are unchanged (`resumable_stage`), so a rerun resumes instead of
starting over, and a changed input starts over instead of resuming on stale intermediates.

GPUs (`gpus_per_task`): Slurm and Ray reserve them per task and set CUDA_VISIBLE_DEVICES themselves.
Locally, each running task gets its own consecutive slice of the visible GPUs through
CUDA_VISIBLE_DEVICES, which every process it starts (a model server) inherits.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path

from datatrove.executor import LocalPipelineExecutor

from curate.errors import IncompleteRunError
from curate.files import write_text_atomic
from curate.pipelines.executor_options import LOCAL, ExecutorConfigError, ExecutorOptions
from curate.pipelines.readers import NoInputFilesError

SLURM_SCRIPT = "launch_script.slurm"
DRY_RUN_JOB_ID = "dry-run"
DRY_RUN_SUBMISSION = "dry_run_sbatch.json"  # beside each script of a dry run: the job id it stands for, sbatch's arguments
STAGE_MANIFEST = "manifest.json"


class JobSubmitted(RuntimeError):
    """The work was handed to a scheduler and runs later; rerun the same command once it is done."""

    def __init__(self, message: str, script: Path | None = None, job_id: str | None = None,
                 scripts: tuple[Path, ...] = ()):
        super().__init__(message)
        self.script = script  # the last job's script: the one that runs once everything before it has
        self.job_id = job_id
        self.scripts = scripts or ((script,) if script else ())




def visible_gpus() -> list[str]:
    """The GPUs this process may use: CUDA_VISIBLE_DEVICES when it is set (indices, UUIDs or MIG names,
    kept as written, up to the first negative index, which CUDA treats as the end of the list), else
    the GPUs `nvidia-smi -L` lists, else none."""
    declared = os.environ.get("CUDA_VISIBLE_DEVICES")
    if declared is not None:
        gpus = []
        for token in (t.strip() for t in declared.split(",")):
            if not token or re.fullmatch(r"-\d+", token):
                break
            gpus.append(token)
        return gpus
    nvidia_smi = shutil.which("nvidia-smi")
    if nvidia_smi is None:
        return []
    try:
        listing = subprocess.run([nvidia_smi, "-L"], capture_output=True, text=True, timeout=60, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return re.findall(r"^GPU (\d+):", listing, flags=re.MULTILINE)


def gpu_slice(gpus: list[str], slot: int, gpus_per_task: int) -> list[str]:
    """The GPUs of the task that holds local slot `slot`: slot k gets the k-th group of `gpus_per_task`,
    so tasks holding different slots never share a GPU."""
    if gpus_per_task < 1 or slot < 0:
        raise ExecutorConfigError(f"gpus_per_task must be >= 1 and slot >= 0, got {gpus_per_task} and {slot}")
    start = slot * gpus_per_task
    if start + gpus_per_task > len(gpus):
        raise ExecutorConfigError(
            f"local slot {slot} needs GPUs {start}..{start + gpus_per_task - 1}, but only {len(gpus)} are visible"
        )
    return gpus[start:start + gpus_per_task]


def check_local_gpus(workers: int, gpus_per_task: int, gpus: list[str]) -> None:
    if workers * gpus_per_task > len(gpus):
        source = (f"CUDA_VISIBLE_DEVICES={os.environ['CUDA_VISIBLE_DEVICES']!r}" if "CUDA_VISIBLE_DEVICES" in os.environ
                  else "nvidia-smi -L")
        raise ExecutorConfigError(
            f"--workers {workers} x --gpus-per-task {gpus_per_task} needs {workers * gpus_per_task} GPUs on this machine, "
            f"but {len(gpus)} are visible ({source}); lower --workers or --gpus-per-task, or use --executor slurm/ray"
        )


class GpuSlotExecutor(LocalPipelineExecutor):
    """A LocalPipelineExecutor whose running tasks each see their own GPUs. datatrove hands every running
    task a local slot (0..workers-1) that no other running task holds at the same time, which a rank
    number cannot guarantee (ranks finish out of order); the slot picks the task's slice."""

    def __init__(self, *args, gpus: list[str], gpus_per_task: int, **kwargs):
        super().__init__(*args, **kwargs)
        check_local_gpus(self.workers, gpus_per_task, gpus)
        self.gpus = gpus
        self.gpus_per_task = gpus_per_task

    def _run_for_rank(self, rank: int, local_rank: int = 0, node_rank: int = -1):
        # With one worker the task runs in this very process, so the variable is put back afterwards.
        previous = os.environ.get("CUDA_VISIBLE_DEVICES")
        os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(gpu_slice(self.gpus, local_rank, self.gpus_per_task))
        try:
            return super()._run_for_rank(rank, local_rank, node_rank)
        finally:
            if previous is None:
                os.environ.pop("CUDA_VISIBLE_DEVICES", None)
            else:
                os.environ["CUDA_VISIBLE_DEVICES"] = previous


FORK_SAFE_THREAD = "fsspecIO"  # fsspec.asyn registers an after-fork reset for it


def _local_start_method() -> str:
    """How the local pool starts its workers. datatrove's default, forkserver, starts each worker as a
    fresh interpreter that imports datatrove, spaCy and curate again (2-3 s per worker, more on a busy
    2-core machine, paid on every run); fork starts them from this process, imports included. Fork is
    unsafe once CUDA is initialised here (children cannot use it), and in a process that runs other
    threads (a Prefect flow run: its API client and log shippers): a child can inherit a lock one of
    them held and wait on it forever. Those cases keep forkserver. fsspec's IO thread, which datatrove
    starts in every run, is the exception: fsspec resets its loop and lock in a forked child."""
    import multiprocessing
    import threading

    if "fork" not in multiprocessing.get_all_start_methods():
        return "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"
    others = [t for t in threading.enumerate() if t is not threading.main_thread() and t.name != FORK_SAFE_THREAD]
    if others:
        return "forkserver"
    torch = sys.modules.get("torch")
    cuda = getattr(torch, "cuda", None)
    if cuda is not None and cuda.is_initialized():
        return "forkserver"
    return "fork"


def _env_command() -> str:
    activate = Path(sys.prefix) / "bin" / "activate"
    return f"source {activate}" if activate.exists() else f"export PATH={Path(sys.executable).parent}:$PATH"


def make_executor(pipeline: list, options: ExecutorOptions, tasks: int, workers: int, logging_dir: str | Path,
                  job_name: str = "curate", depends=None):
    """The datatrove executor for `options`; `workers` bounds how many tasks run at once on every executor.
    `depends` (Slurm only): the executor whose job array must succeed before this one starts."""
    options.validate()
    logging_dir = str(Path(logging_dir).resolve()) if options.kind != "local" else str(logging_dir)
    if options.kind == "local":
        # More workers than tasks would only start idle processes (and hold GPU slots nothing uses).
        local = {"pipeline": pipeline, "tasks": tasks, "workers": min(workers, tasks), "logging_dir": logging_dir,
                 "skip_completed": True, "start_method": _local_start_method()}
        if options.gpus_per_task:
            return GpuSlotExecutor(**local, gpus=visible_gpus(), gpus_per_task=options.gpus_per_task)
        return LocalPipelineExecutor(**local)
    if options.kind == "ray":
        from datatrove.executor.ray import RayPipelineExecutor

        return RayPipelineExecutor(pipeline=pipeline, tasks=tasks, workers=workers, logging_dir=logging_dir,
                                   skip_completed=True, cpus_per_task=options.cpus_per_task,
                                   mem_per_cpu_gb=options.mem_per_cpu_gb, gpus_per_task=options.gpus_per_task)
    from datatrove.executor.slurm import SlurmPipelineExecutor

    return SlurmPipelineExecutor(
        pipeline=pipeline, tasks=tasks, workers=workers, logging_dir=logging_dir, skip_completed=True,
        time=options.time, partition=options.partition, qos=options.qos, cpus_per_task=options.cpus_per_task,
        mem_per_cpu_gb=options.mem_per_cpu_gb, gpus_per_task=options.gpus_per_task, job_name=job_name,
        env_command=options.env_command or _env_command(), depends=depends,
    )


@dataclass(frozen=True)
class Stage:
    """One datatrove job of a command: its pipeline, its number of tasks and its logging folder (completions)."""

    job_name: str
    pipeline: list
    tasks: int
    logging_dir: Path
    workers: int | None = None  # None: the command's --workers


def run_pipeline(pipeline: list, options: ExecutorOptions | None, tasks: int, workers: int, logging_dir: str | Path,
                 job_name: str = "curate") -> None:
    """Run (local, Ray) or submit (Slurm) `pipeline`. Raises JobSubmitted when ranks were left to a scheduler."""
    run_stages([Stage(job_name, pipeline, tasks, Path(logging_dir))], options, workers)


def run_stages(stages: list[Stage], options: ExecutorOptions | None, workers: int) -> None:
    """Runs the stages in order (local, Ray) or submits them to Slurm as one chain of job arrays, each starting
    when the one before it succeeded; raises JobSubmitted then. Tasks completed by an earlier run are skipped,
    so a rerun continues where the last one stopped. A stage that ends with tasks incomplete (a Ray task that
    failed its retries) stops the command: the next stage would read its missing output as empty."""
    options = options or LOCAL
    options.validate()
    if options.kind == "slurm":
        chain: list = []
        for stage in stages:
            chain.append(make_executor(stage.pipeline, options, stage.tasks, stage.workers or workers, stage.logging_dir,
                                       stage.job_name, depends=chain[-1] if chain else None))
        _submit_slurm(chain, options.dry_run)
        return
    cpus = max(min(stage.workers or workers, stage.tasks) for stage in stages) * options.cpus_per_task
    with _ray_connection(options.ray_address, cpus=cpus) if options.kind == "ray" else nullcontext():
        for stage in stages:
            executor = make_executor(stage.pipeline, options, stage.tasks, stage.workers or workers, stage.logging_dir,
                                     stage.job_name)
            executor.run()
            incomplete = executor.get_incomplete_ranks()
            if incomplete:
                raise IncompleteRunError(
                    f"{stage.job_name}: {len(incomplete)} of {stage.tasks} tasks did not complete (ranks {incomplete[:10]}); "
                    f"see {Path(stage.logging_dir) / 'logs'}. Rerun the same command to continue."
                )


def input_signature(spec) -> dict:
    """What a stage's result depends on in a corpus (an InputSpec): every file it reads, with size and
    modification time, so that a changed, added or removed file is noticed. A hub dataset: its name and split."""
    if spec.is_hub:
        return {"input": spec.path, "split": spec.split, "config": spec.config}
    folder, pattern = spec.folder_and_pattern()
    root = Path(folder)
    try:
        names = spec.list_files()
    except NoInputFilesError:
        names = []  # the stage that reads the input refuses an empty one; its signature is just empty
    files = []
    for name in names:
        stat = (root / name).stat()
        files.append([name, stat.st_size, stat.st_mtime_ns])
    return {"input": str(root.resolve()), "pattern": pattern, "files": files}


def resumable_stage(stage: Path, key: dict) -> bool:
    """Keeps the working folder `stage` when it was started for this same `key` (parameters and input
    signatures), so completed tasks are skipped; otherwise empties it and starts it for `key`. Returns
    whether it was kept. `finish_stage` ends it, so that the next run starts over."""
    manifest = stage / STAGE_MANIFEST
    wanted = json.loads(json.dumps(key))  # tuples become lists, as they come back from the file
    try:
        if json.loads(manifest.read_text()) == wanted:
            return True
    except (OSError, ValueError):
        pass
    shutil.rmtree(stage, ignore_errors=True)
    stage.mkdir(parents=True)
    write_text_atomic(manifest, json.dumps(wanted, indent=2))
    return False


def finish_stage(stage: Path) -> None:
    """Called before a command publishes what its stages wrote (which moves or deletes it): from here on a
    rerun must start over, never resume on a half-moved stage."""
    (stage / STAGE_MANIFEST).unlink(missing_ok=True)


@contextmanager
def _ray_connection(address: str | None, cpus: int | None = None):
    import os

    import ray

    started_here = not ray.is_initialized()
    if started_here:
        # No address and no RAY_ADDRESS: a single-node Ray on this machine, shut down afterwards. It is
        # sized to the run: Ray prestarts one idle worker process per CPU it manages, and on a machine
        # with more cores than this run uses those extra interpreters only compete with the tasks.
        local = address is None and not os.environ.get("RAY_ADDRESS")
        sized = {"num_cpus": min(cpus, os.cpu_count() or cpus)} if local and cpus and cpus > 0 else {}
        ray.init(address=address, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True, **sized)
    try:
        yield
    finally:
        if started_here:
            ray.shutdown()


def _submit_slurm(chain: list, dry_run: bool) -> None:
    """Submits the last executor of `chain`; datatrove submits the ones before it first and makes each job
    array depend on the previous one. Executors whose tasks all completed are not submitted."""
    from datatrove.executor import slurm

    if not any(executor.get_incomplete_ranks() for executor in chain):
        return
    last = chain[-1]
    if dry_run:
        # datatrove's own launch path runs whole (scripts, pickled executors, ranks to run, dependencies);
        # only the `sbatch` calls are replaced: each keeps its arguments beside its script and returns a job
        # id naming that job, which the next job's --dependency then names.
        def keep_script(contents: str, _retriever, *args) -> str:
            for executor in chain:
                if executor.logging_dir.resolve_paths("executor.pik") in contents:
                    job_id = f"{DRY_RUN_JOB_ID}-{executor.job_name}"
                    with executor.logging_dir.open(DRY_RUN_SUBMISSION, "w") as f:
                        json.dump({"job_id": job_id, "sbatch_args": list(args)}, f, indent=2)
                    return job_id
            return f"{DRY_RUN_JOB_ID}-merge-stats"  # datatrove's stats-merging job after each array

        launch, slurm.launch_slurm_job = slurm.launch_slurm_job, keep_script
        try:
            last.launch_job()
        finally:
            slurm.launch_slurm_job = launch
        scripts = _launched_scripts(chain)
        order = " -> ".join(str(script) for script in scripts)
        raise JobSubmitted(
            f"dry run: Slurm script{'s' if len(scripts) > 1 else ''} written, not submitted: {order}"
            + (f" (each runs after the one before; sbatch arguments in {DRY_RUN_SUBMISSION} beside each)"
               if len(scripts) > 1 else f"; submit it with `sbatch {scripts[0]}`")
            + ". Or rerun without --slurm-dry-run.",
            script=scripts[-1], job_id=None, scripts=tuple(scripts),
        )
    last.launch_job()
    scripts = _launched_scripts(chain)
    jobs = [str(executor.job_id) for executor in chain if executor.job_id not in (None, -1)]
    raise JobSubmitted(
        f"submitted Slurm job{'s' if len(jobs) > 1 else ''} {', '.join(jobs)} "
        f"({sum(len(e.get_incomplete_ranks()) for e in chain)} tasks{', each job after the one before' if len(jobs) > 1 else ''}; "
        f"script{'s' if len(scripts) > 1 else ''} {', '.join(map(str, scripts))}); "
        "rerun the same command when the last has finished to continue.",
        script=scripts[-1], job_id=jobs[-1], scripts=tuple(scripts),
    )


def _launched_scripts(chain: list) -> list[Path]:
    return [Path(executor.logging_dir.resolve_paths(SLURM_SCRIPT)) for executor in chain
            if executor.job_id not in (None, -1)]

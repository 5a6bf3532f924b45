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

GPUs (`gpus_per_task`): Slurm and Ray reserve them per task and set CUDA_VISIBLE_DEVICES themselves.
Locally, each running task gets its own consecutive slice of the visible GPUs through
CUDA_VISIBLE_DEVICES, which every process it starts (a model server) inherits.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from datatrove.executor import LocalPipelineExecutor

EXECUTORS = ("local", "ray", "slurm")
SLURM_SCRIPT = "launch_script.slurm"
DRY_RUN_JOB_ID = "dry-run"


class ExecutorConfigError(ValueError):
    pass


class JobSubmitted(RuntimeError):
    """The work was handed to a scheduler and runs later; rerun the same command once it is done."""

    def __init__(self, message: str, script: Path | None = None, job_id: str | None = None):
        super().__init__(message)
        self.script = script
        self.job_id = job_id


@dataclass(frozen=True)
class ExecutorOptions:
    kind: str = "local"
    ray_address: str | None = None  # None: RAY_ADDRESS from the environment, else a local Ray started here
    cpus_per_task: int = 1
    mem_per_cpu_gb: float = 2
    gpus_per_task: int = 0
    partition: str | None = None
    time: str = "24:00:00"
    qos: str | None = None
    env_command: str | None = None  # default: activate the virtual environment this process runs in
    dry_run: bool = False

    def validate(self) -> None:
        if self.kind not in EXECUTORS:
            raise ExecutorConfigError(f"unknown executor {self.kind!r}; choose one of {', '.join(EXECUTORS)}")
        if self.kind == "slurm" and not self.partition:
            raise ExecutorConfigError("--executor slurm needs --slurm-partition (the partition to submit to)")
        if self.kind != "slurm" and self.dry_run:
            raise ExecutorConfigError("--slurm-dry-run only applies to --executor slurm")
        if self.kind != "ray" and self.ray_address:
            raise ExecutorConfigError("--ray-address only applies to --executor ray")
        if self.kind == "ray":
            import importlib.util

            if importlib.util.find_spec("ray") is None:
                raise ExecutorConfigError("--executor ray needs Ray: pip install 'ray[default]'")

    def describe(self) -> dict:
        return {"executor": self.kind, **({"ray_address": self.ray_address} if self.kind == "ray" else {}),
                **({"partition": self.partition, "dry_run": self.dry_run} if self.kind == "slurm" else {})}


LOCAL = ExecutorOptions()


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
        raise ValueError(f"gpus_per_task must be >= 1 and slot >= 0, got {gpus_per_task} and {slot}")
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


def _local_start_method() -> str:
    """How the local pool starts its workers. datatrove's default, forkserver, starts each worker as a
    fresh interpreter that imports datatrove, spaCy and curate again (2-3 s per worker, more on a busy
    2-core machine, paid on every run); fork starts them from this process, imports included. Fork is
    unsafe once CUDA is initialised here (children cannot use it), so that case keeps forkserver."""
    import multiprocessing

    if "fork" not in multiprocessing.get_all_start_methods():
        return "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"
    torch = sys.modules.get("torch")
    cuda = getattr(torch, "cuda", None)
    if cuda is not None and cuda.is_initialized():
        return "forkserver"
    return "fork"


def _env_command() -> str:
    activate = Path(sys.prefix) / "bin" / "activate"
    return f"source {activate}" if activate.exists() else f"export PATH={Path(sys.executable).parent}:$PATH"


def make_executor(pipeline: list, options: ExecutorOptions, tasks: int, workers: int, logging_dir: str | Path,
                  job_name: str = "curate"):
    """The datatrove executor for `options`; `workers` bounds how many tasks run at once on every executor."""
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
        env_command=options.env_command or _env_command(),
    )


def run_pipeline(pipeline: list, options: ExecutorOptions | None, tasks: int, workers: int, logging_dir: str | Path,
                 job_name: str = "curate") -> None:
    """Run (local, Ray) or submit (Slurm) `pipeline`. Raises JobSubmitted when ranks were left to a scheduler."""
    options = options or LOCAL
    executor = make_executor(pipeline, options, tasks, workers, logging_dir, job_name)
    if options.kind == "local":
        executor.run()
    elif options.kind == "ray":
        with _ray_connection(options.ray_address, cpus=workers * options.cpus_per_task):
            executor.run()
    else:
        _submit_slurm(executor, options.dry_run)


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


def _submit_slurm(executor, dry_run: bool) -> None:
    import datatrove.executor.slurm as slurm

    if not executor.get_incomplete_ranks():
        return
    script = Path(executor.logging_dir.resolve_paths(SLURM_SCRIPT))
    if dry_run:
        # datatrove's own launch path runs whole (script, pickled executor, ranks to run); only the
        # final `sbatch` call is replaced by one that keeps the script and submits nothing.
        submitted: list[str] = []

        def keep_script(contents: str, _retriever, *args) -> str:
            submitted.append(contents)
            return DRY_RUN_JOB_ID

        launch, slurm.launch_slurm_job = slurm.launch_slurm_job, keep_script
        try:
            executor.launch_job()
        finally:
            slurm.launch_slurm_job = launch
        raise JobSubmitted(
            f"dry run: Slurm script written to {script} (not submitted); submit it with `sbatch {script}`, "
            "or rerun without --slurm-dry-run.", script=script, job_id=None,
        )
    executor.launch_job()
    raise JobSubmitted(
        f"submitted Slurm job {executor.job_id} ({len(executor.get_incomplete_ranks())} tasks, script {script}); "
        "rerun the same command when it has finished to continue.", script=script, job_id=str(executor.job_id),
    )

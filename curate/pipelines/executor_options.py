"""What a job's datatrove tasks run on (local, Ray, Slurm) and with which resources, without datatrove itself.

The command line builds and validates these options for every command before it starts a job, so they
live apart from `executors` (which imports datatrove's executors, seconds of start-up a `--help` or an
option error should not pay).
"""

from __future__ import annotations

from dataclasses import dataclass

from curate.errors import CurateError
from curate.options import option

EXECUTORS = ("local", "ray", "slurm")


class ExecutorConfigError(CurateError, ValueError):
    pass


@dataclass(frozen=True)
class ExecutorOptions:
    """Where a job's datatrove tasks run and with what: the "Executor" options."""

    tasks: int = option("datatrove tasks (input files are split among them).", default=1, min=1)
    workers: int = option("Tasks run at the same time.", default=1, min=1)
    kind: str = option("Where tasks run: local, ray (a Ray cluster) or slurm (a job array).", "--executor",
                       default="local")
    # None: RAY_ADDRESS from the environment, else a local Ray started here
    ray_address: str | None = option("Ray cluster address (default: RAY_ADDRESS, else a local Ray).", default=None)
    partition: str | None = option("Slurm partition (--executor slurm).", "--slurm-partition", default=None)
    time: str = option("Slurm time limit per task.", "--slurm-time", default="24:00:00")
    qos: str | None = option("Slurm QOS.", "--slurm-qos", default=None)
    dry_run: bool = option("Write the sbatch script and pickled job; submit nothing.", "--slurm-dry-run",
                           default=False)
    cpus_per_task: int = option("CPUs reserved per task (ray, slurm).", default=1, min=1)
    mem_per_cpu_gb: float = option("Memory per CPU in GB (ray, slurm).", "--mem-per-cpu-gb", default=2.0)
    gpus_per_task: int = option("GPUs per task: ray and slurm reserve them; local gives each running task its own "
                                "slice of the visible GPUs.", default=0, min=0)
    # Not an option: derived from the virtual environment the command runs in (default: activate it).
    env_command: str | None = None

    def validate(self) -> None:
        for flag, value in (("--tasks", self.tasks), ("--workers", self.workers)):
            if value < 1:
                raise ExecutorConfigError(f"{flag} must be at least 1, not {value}")
        if self.mem_per_cpu_gb <= 0:
            raise ExecutorConfigError(f"--mem-per-cpu-gb must be above 0, not {self.mem_per_cpu_gb}")
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

"""What a job's datatrove tasks run on (local, Ray, Slurm) and with which resources, without datatrove itself.

The command line builds and validates these options for every command before it starts a job, so they
live apart from `executors` (which imports datatrove's executors, seconds of start-up a `--help` or an
option error should not pay).
"""

from __future__ import annotations

from dataclasses import dataclass

from curate.errors import CurateError

EXECUTORS = ("local", "ray", "slurm")


class ExecutorConfigError(CurateError, ValueError):
    pass


@dataclass(frozen=True)
class ExecutorOptions:
    tasks: int = 1  # datatrove tasks: the input files are split among them
    workers: int = 1  # tasks run at the same time
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
        for flag, value in (("--tasks", self.tasks), ("--workers", self.workers)):
            if value < 1:
                raise ExecutorConfigError(f"{flag} must be at least 1, not {value}")
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

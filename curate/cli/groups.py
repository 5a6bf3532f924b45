"""Option groups generated from the job configs: each group is declared once, shown in its own help panel,
and handed to the command as one config object.

Seven commands take the nine executor options; declared in each of them, they had drifted (help texts,
defaults, the order of the `executor_options(...)` call). `executor_group` adds them to a command from the
fields of `ExecutorOptions`, builds and validates the options, and passes them on as `runs_on`:

    @app.command()
    @executor_group
    def tag(..., runs_on: ExecutorOptions) -> None: ...

The flags stay those users know (`--executor`, `--slurm-partition`, ...): `FLAGS` maps each field to its
parameter name, and tests/cli/options_snapshot.json checks that every command keeps them.
"""

from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass
from collections.abc import Callable
from typing import Annotated, Any, Optional

import typer

from curate.pipelines.executor_options import ExecutorOptions

EXECUTOR_PANEL = "Executor"


@dataclass(frozen=True)
class GroupField:
    parameter: str  # the command-line parameter ('slurm_partition' -> --slurm-partition)
    annotation: Any
    default: Any


def _option(kind: Any, *flags: str, help: str, **extra) -> Any:
    return Annotated[kind, typer.Option(*flags, help=help, rich_help_panel=EXECUTOR_PANEL, **extra)]


# ExecutorOptions field -> how the command line spells it. env_command is not an option: it is derived from
# the virtual environment the command runs in.
FLAGS: dict[str, GroupField] = {
    "kind": GroupField("executor", _option(
        str, "--executor", help="Where tasks run: local, ray (a Ray cluster) or slurm (a job array)."), "local"),
    "ray_address": GroupField("ray_address", _option(
        Optional[str], help="Ray cluster address (default: RAY_ADDRESS, else a local Ray)."), None),
    "partition": GroupField("slurm_partition", _option(Optional[str], help="Slurm partition (--executor slurm)."),
                            None),
    "time": GroupField("slurm_time", _option(str, help="Slurm time limit per task."), "24:00:00"),
    "qos": GroupField("slurm_qos", _option(Optional[str], help="Slurm QOS."), None),
    "dry_run": GroupField("slurm_dry_run", _option(
        bool, "--slurm-dry-run", help="Write the sbatch script and pickled job; submit nothing."), False),
    "cpus_per_task": GroupField("cpus_per_task", _option(int, help="CPUs reserved per task (ray, slurm).", min=1), 1),
    "mem_per_cpu_gb": GroupField("mem_per_cpu_gb", _option(
        float, "--mem-per-cpu-gb", help="Memory per CPU in GB (ray, slurm)."), 2.0),
    "gpus_per_task": GroupField("gpus_per_task", _option(
        int, help="GPUs per task: ray and slurm reserve them; local gives each running task its own slice of the "
                  "visible GPUs.", min=0), 0),
}


def executor_group(command: Callable | None = None, *, without: tuple[str, ...] = ()) -> Callable:
    """Adds the executor options to `command` and calls it with `runs_on=ExecutorOptions(...)`, validated.

    `without`: options the command does not offer (their defaults are used). An option the command declares
    itself, with its own help (cpt's `--gpus-per-task` is about the rewrite's model servers), is left to it and
    its value still goes into `runs_on`."""
    if command is None:
        return functools.partial(executor_group, without=without)
    signature = inspect.signature(command, eval_str=True)
    if "runs_on" not in signature.parameters:
        raise TypeError(f"{command.__name__} must take a 'runs_on' parameter to receive the executor options")
    own = [p for p in signature.parameters.values() if p.name != "runs_on"]
    declared = {p.name for p in own} & {f.parameter for f in FLAGS.values()}
    unknown = set(without) - {f.parameter for f in FLAGS.values()}
    if unknown:
        raise TypeError(f"not executor options: {', '.join(sorted(unknown))}")
    added = [inspect.Parameter(f.parameter, inspect.Parameter.KEYWORD_ONLY, annotation=f.annotation, default=f.default)
             for f in FLAGS.values() if f.parameter not in declared and f.parameter not in without]
    parameters = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own] + added

    @functools.wraps(command)
    def with_executor(**values):
        if "runs_on" in values:  # one command calling another (tag -> tag-llm) hands its options on as they are
            return command(**values)
        chosen = {}
        for name, f in FLAGS.items():
            if f.parameter in declared:
                chosen[name] = values[f.parameter]
            elif f.parameter in without:
                chosen[name] = f.default
            else:
                chosen[name] = values.pop(f.parameter)
        options = ExecutorOptions(**chosen)
        options.validate()  # an ExecutorConfigError is a CurateError: one line and exit 2 (cli.app)
        return command(**values, runs_on=options)

    del with_executor.__wrapped__  # typer must read the signature below, not the command's own
    with_executor.__signature__ = signature.replace(parameters=parameters)
    with_executor.__annotations__ = {p.name: p.annotation for p in parameters} | {"return": signature.return_annotation}
    return with_executor

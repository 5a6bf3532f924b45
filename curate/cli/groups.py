"""The command line's option groups, generated from their declarations in curate.options: each group shows in a
help panel of its own and reaches the command as one config object.

- `executor_group`: the "Executor" panel, from ExecutorOptions' fields (`--tasks`, `--executor`,
  `--slurm-partition`, ...), handed to the command validated, as `runs_on`;
- `server_group`: the "Model server" panel, from ServerFields (with `sampling`, SamplingFields too; with `judge`,
  JudgeFields' --judge-* flags), handed over as `server` (a ServerOptions, or a job's subclass of it such as the
  pass-rate filter's SamplingOptions) and `judge`;
- `cleaning_group`: the "Cleaning" panel, from CleaningFields with each builder's help of --dedup / --decontam,
  handed over validated as `cleaning`;
- `input_group`: the "Input" panel, from InputFields (or the required `--texts` of a command whose tags were made
  from a corpus), handed over as one InputSpec, `corpus`.

`flags_of` turns a group's fields into typer options: each field's flags (the parameter is named for the first long
one), help, bounds and default, or the job's own help and default where its group says so. FLAGS, SERVER_FLAGS,
SAMPLING_FLAGS, JUDGE_FLAGS and INPUT_FLAGS are its tables of the groups, and tests/cli/options_snapshot.json checks
that every command keeps its flags and defaults.

Every command but classifiers, reward-path, serve and deploy runs a job, a config dataclass (curate.pipelines.jobs,
curate.builders.jobs, curate.handoff.jobs, curate.review.jobs), and takes `job_command(JobClass)`: its options are
the job's own fields, in declaration order, then one panel per group the job is composed of, built by the group
decorators above with the job's settings of the group; the command receives one job, which it hands to the function
that runs it (the command's flow hands that function the same job: curate.flows.common.job_model):

    @app.command()
    @job_command(PassRateJob)
    def filter_passrate(job: PassRateJob) -> None: ...

The job's own options that say where and how its result is written (--output, --overwrite, --license, ...) show in
the "Output" panel (OUTPUT_PANEL, set in their field's metadata).
"""

from __future__ import annotations

import builtins
import dataclasses
import functools
import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

import typer

from curate.cli.options import input_spec, llm_tag_config, sampling_config
from curate.options import (
    CLEANING,
    CLEANING_PANEL,
    EXECUTOR,
    EXECUTOR_PANEL,
    INPUT,
    INPUT_PANEL,
    SERVER,
    SERVER_PANEL,
    TEXTS_HELP,
    CleaningFields,
    InputFields,
    JudgeFields,
    SamplingFields,
    ServerFields,
    default_of,
    field_types,
    group_defaults,
    groups,
    help_of,
    offered,
    parameter_name,
)
from curate.pipelines.executor_options import ExecutorOptions


@dataclass(frozen=True)
class GroupField:
    parameter: str  # the command-line parameter ('slurm_partition' -> --slurm-partition)
    annotation: Any
    default: Any


def _option(kind: Any, *flags: str, help: str, panel: str = EXECUTOR_PANEL, **extra) -> Any:
    return Annotated[kind, typer.Option(*flags, help=help, rich_help_panel=panel, **extra)]


def flags_of(config_class: type, panel: str, settings: dict | None = None,
             defaults: dict | None = None) -> dict[str, GroupField]:
    """The command-line options of a group's offered fields (curate.options), in declaration order: field ->
    its parameter, annotated with its flags, help (a job's `help` setting, where it gives one), panel and bounds, and
    its default (a job's own, where `defaults` gives one)."""
    types = field_types(config_class)
    return {
        f.name: GroupField(
            parameter_name(f),
            _option(f.metadata.get("flag_type", types[f.name]), *f.metadata["flags"], help=help_of(f, settings or {}),
                    panel=panel, **f.metadata["bounds"]),
            default_of(f, defaults or {}),
        )
        for f in offered(config_class)
    }


# ExecutorOptions field -> how the command line spells it. env_command is not an option: it is derived from
# the virtual environment the command runs in.
FLAGS = flags_of(ExecutorOptions, EXECUTOR_PANEL)


def executor_group(command: Callable | None = None, *, without: tuple[str, ...] = ()) -> Callable:
    """Adds the executor options to `command` and calls it with `runs_on=ExecutorOptions(...)`, validated.

    `without`: options the command does not offer (their defaults are used). An option the command declares
    itself, with its own help (cpt's `--gpus-per-task` is about the rewrite's model servers), is left to it and
    its value still goes into `runs_on`."""
    if command is None:
        return functools.partial(executor_group, without=without)

    def make(chosen: dict) -> dict:
        options = ExecutorOptions(**chosen)
        options.validate()  # an ExecutorConfigError is a CurateError: one line and exit 2 (cli.app)
        return {"runs_on": options}

    return _with_group(command, ("runs_on",), FLAGS, make, without)


# The parameters the groups hand a command (runs_on, server, judge, cleaning, corpus): their annotations may name a
# config class that the command's module imports under TYPE_CHECKING only, for this group or one stacked above it.
RECEIVED = ("runs_on", "server", "judge", "cleaning", "corpus")


def _evaluated(command: Callable, receives: tuple[str, ...]) -> inspect.Signature:
    """The command's signature with its annotations evaluated, except the names in the annotations of the
    parameters groups hand in (RECEIVED) that its module does not import at run time (a config class imported
    under TYPE_CHECKING only)."""
    raw = inspect.signature(command)
    for name in receives:
        if name not in raw.parameters:
            raise TypeError(f"{command.__name__} must take a {name!r} parameter to receive its options")
    known = getattr(command, "__globals__", {})
    unresolved = {}
    for name in set(RECEIVED) & set(raw.parameters):
        annotation = raw.parameters[name].annotation
        for word in re.findall(r"[A-Za-z_]\w*", annotation if isinstance(annotation, str) else ""):
            if word not in known and not hasattr(builtins, word):
                unresolved[word] = object
    return inspect.signature(command, eval_str=True, locals=unresolved)


def _with_group(
    command: Callable,
    receives: tuple[str, ...],
    flags: dict[str, GroupField],
    make: Callable[[dict], dict],
    without: tuple[str, ...] = (),
    taken: dict[str, str] | None = None,
) -> Callable:
    """`command` with the parameters of `flags` added, called with the parameters `make({field: value})` returns
    (`receives`). A flag the command declares itself is left to it, and its value still goes to `make`; so do
    `taken`'s (field -> a parameter of the command); `without`: the fields not offered (their defaults are used)."""
    signature = _evaluated(command, receives)
    own = [p for p in signature.parameters.values() if p.name not in receives]
    names = {p.name for p in own}
    offered = {f.parameter for f in flags.values()}
    declared = names & offered
    if set(without) - set(flags):
        raise TypeError(f"not options of this group: {', '.join(sorted(set(without) - set(flags)))}")
    without = {flags[name].parameter for name in without}
    taken = dict(taken or {})
    if set(taken.values()) - names:
        raise TypeError(f"{command.__name__} lacks the parameters {', '.join(sorted(set(taken.values()) - names))}")
    added = [
        inspect.Parameter(f.parameter, inspect.Parameter.KEYWORD_ONLY, annotation=f.annotation, default=f.default)
        for f in flags.values()
        if f.parameter not in declared and f.parameter not in without
    ]
    parameters = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own] + added

    @functools.wraps(command)
    def with_group(**values):
        if receives[0] in values:  # one command calling another (tag -> tag-llm) hands its options on as they are
            return command(**values)
        chosen = {name: values[parameter] for name, parameter in taken.items()}
        for name, f in flags.items():
            if f.parameter in declared:
                chosen[name] = values[f.parameter]
            elif f.parameter in without:
                chosen[name] = f.default
            else:
                chosen[name] = values.pop(f.parameter)
        return command(**values, **make(chosen))

    del with_group.__wrapped__  # typer must read the signature below, not the command's own
    with_group.__signature__ = signature.replace(parameters=parameters)
    with_group.__annotations__ = {p.name: p.annotation for p in parameters} | {"return": signature.return_annotation}
    return with_group


# ServerFields -> flag: where the model runs and how its server is started. The model itself is the
# command's own parameter (`--model`, audit-verifier's `--policy`; required or not), named by server_group(model=).
SERVER_FLAGS = flags_of(ServerFields, SERVER_PANEL)
# The sampling fields of a job's ServerOptions subclass (the pass-rate filter's SamplingOptions) -> flag.
SAMPLING_FLAGS = flags_of(SamplingFields, SERVER_PANEL)
# A judge's server (an LLM judge, an LLM classifier) where it is not the policy's (JudgeFields).
JUDGE_FLAGS = flags_of(JudgeFields, SERVER_PANEL)


def server_args(items: list[str] | None) -> dict:
    """--server-arg KEY=VALUE (or a bare KEY, a flag) -> {KEY: VALUE or True}."""
    parsed = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        parsed[key.strip().lstrip("-")] = value if sep else True
    return parsed


def judge_server(policy, model: str | None, backend: str | None = None, endpoint_url: str | None = None):
    """The judge's ServerOptions: the server part of the policy's (`policy.server`) with the judge's model, and its
    backend and URL where given (a judge on another backend does not take the policy's URL); None without a model."""
    if model is None:
        return None
    server = policy.server
    backend = backend or server.backend
    url = endpoint_url or (server.endpoint_url if backend == server.backend else None)
    return dataclasses.replace(server, model=model, backend=backend, endpoint_url=url)


def server_options(**fields):
    """A plain ServerOptions, imported when the command runs (curate.pipelines.llm.options imports datatrove's server
    classes, which `--help` need not load)."""
    from curate.pipelines.llm.options import ServerOptions

    return ServerOptions(**fields)


def server_group(
    command: Callable | None = None,
    *,
    config: Callable[..., Any] = server_options,
    model: str = "model",
    sampling: bool = False,
    judge: bool = False,
    also: tuple[str, ...] = (),
    without: tuple[str, ...] = (),
    help: dict[str, str] | None = None,
    defaults: dict[str, Any] | None = None,
) -> Callable:
    """Adds the model-server options to `command` (with `sampling`, the sampling options too) and calls it with
    `server=config(**fields)`: a ServerOptions or a job's subclass of it. With `judge`, also the judge's flags, and
    `judge=` the judge's ServerOptions (judge_server), or None when no --judge-model is given.

    Not validated here: a command that may run no model (audit-verifier on --pairs) takes the options too, and
    every job validates its options before a server starts. `model`: the command's own parameter holding the model;
    `also`: more of the command's own parameters that are fields of `config` (k, instruction, prompt_format);
    `without`: options the command does not offer (their defaults are used); `help`: {field: help} where the
    command says what an option is for (`--reformulate: the model`); `defaults`: {field: default} where the
    command's default differs from the group's.

    Put it below `executor_group`: the config class is imported only when the command runs."""
    if command is None:
        return functools.partial(
            server_group, config=config, model=model, sampling=sampling, judge=judge, also=also, without=without,
            help=help, defaults=defaults,
        )
    server = flags_of(ServerFields, SERVER_PANEL, {"help": help}, defaults)
    flags = server | (SAMPLING_FLAGS if sampling else {})
    judging = {f"judge.{name}": f for name, f in JUDGE_FLAGS.items()} if judge else {}

    def make(chosen: dict) -> dict:
        asked = {name.removeprefix("judge."): chosen.pop(name) for name in judging}
        chosen["server_args"] = server_args(chosen["server_args"])
        server = config(**chosen)
        return {"server": server, **({"judge": judge_server(server, **asked)} if judge else {})}

    return _with_group(
        command,
        ("server", "judge") if judge else ("server",),
        flags | judging,
        make,
        without,
        {"model": model, **{name: name for name in also}},
    )


def cleaning_options(**fields):
    """A Cleaning, validated, imported when the command runs: its check reads the benchmark list with
    curate.pipelines.decontam, which imports datatrove."""
    from curate.pipelines.cleaning import Cleaning

    cleaning = Cleaning(**fields)
    cleaning.validate()  # a CleaningError or BenchmarkError is a CurateError: one line and exit 2 (cli.app)
    return cleaning


def cleaning_group(*, dedup: str, decontam: str) -> Callable:
    """Adds --dedup / --decontam / --benchmarks-dir to a builder and calls it with `cleaning=Cleaning(...)`, validated
    before the build starts. `dedup`, `decontam`: the help of those two flags, which says what this builder judges
    (the built rows, the source problems, the candidates; on the question or the completion)."""
    flags = flags_of(CleaningFields, CLEANING_PANEL, {"help": {"dedup": dedup, "decontam": decontam}})

    def make(chosen: dict) -> dict:
        return {"cleaning": cleaning_options(**chosen)}

    return lambda command: _with_group(command, ("cleaning",), flags, make)


# InputFields -> flag: where a corpus is and how it is read. A hub dataset's `config` has no flag.
INPUT_FLAGS = flags_of(InputFields, INPUT_PANEL)

# The corpus that a command's tags were made from (cpt, distill): required, and called --texts there.
TEXTS_FLAG = GroupField("texts", _option(str, help=TEXTS_HELP, panel=INPUT_PANEL), inspect.Parameter.empty)


def input_group(command: Callable | None = None, *, texts: bool = False) -> Callable:
    """Adds the input options to `command` and calls it with `corpus=InputSpec(...)`: a local corpus that names no
    file fails here, in one line, and without --input the bundled sample corpus is read (and said so). With
    `texts`, the corpus is the required `--texts`: the one the command's tags were made from."""
    if command is None:
        return functools.partial(input_group, texts=texts)
    flags = INPUT_FLAGS | ({"path": TEXTS_FLAG} if texts else {})

    def make(chosen: dict) -> dict:
        return {
            "corpus": input_spec(
                chosen["path"], chosen["text_key"], chosen["id_key"], chosen["split"], chosen["streaming"]
            )
        }

    return _with_group(command, ("corpus",), flags, make)


# What each group hands the command it decorates (see RECEIVED).
GROUP_RECEIVES = {INPUT: "corpus", CLEANING: "cleaning", SERVER: "server", EXECUTOR: "runs_on"}
# A job's server config by the name its SERVER group gives (`config="sampling"`): the job's module cannot name the
# factory, which imports datatrove when the command runs.
SERVER_CONFIGS = {"sampling": sampling_config, "llm_tag": llm_tag_config}


def job_command(job_class: type) -> Callable:
    """Makes `command(job)` a command whose options are `job_class`'s: its own fields' (help and flags from their
    metadata, in declaration order, in the panel their metadata names: Output for where and how the result is
    written), then the panel of each of its groups (Input, Cleaning, Model server, Executor),
    built by the group decorators above with the group's settings in the job (cleaning's help, a server's config
    and `also`, the options a group leaves out; a server group's `judge`: the judge's flags too, whose server goes to
    the job's `judge` field); the command is called with one `job_class(...)`, its groups validated as the
    decorators validate them:

        @app.command()
        @job_command(BuildJob)
        def build(job: BuildJob) -> None: ...

    A field without option metadata (a flow's batch_size) is not offered: the job gets its default."""

    def decorate(command: Callable) -> Callable:
        own = offered(job_class)
        types = field_types(job_class)
        grouped = groups(job_class)
        if set(grouped) - set(GROUP_RECEIVES):
            unknown = ", ".join(sorted(set(grouped) - set(GROUP_RECEIVES)))
            raise TypeError(f"{job_class.__name__}: no command-line group for {unknown}")
        parameters = [
            inspect.Parameter(
                f.name,
                inspect.Parameter.KEYWORD_ONLY,
                annotation=Annotated[
                    types[f.name],
                    typer.Argument(help=f.metadata["help"], **f.metadata["bounds"]) if f.metadata["argument"]
                    else typer.Option(*f.metadata["flags"], help=f.metadata["help"],
                                      rich_help_panel=f.metadata["panel"], **f.metadata["bounds"]),
                ],
                default=inspect.Parameter.empty if f.default is dataclasses.MISSING else f.default,
            )
            for f in own
        ]
        parameters += [
            inspect.Parameter(GROUP_RECEIVES[kind], inspect.Parameter.KEYWORD_ONLY, annotation=object)
            for kind in grouped
        ]
        # A server group with `judge=True` also hands the judge's server, to the job's field `judge`.
        judged = SERVER in grouped and grouped[SERVER].metadata["settings"].get("judge", False)
        if judged:
            parameters.append(inspect.Parameter("judge", inspect.Parameter.KEYWORD_ONLY, annotation=object))

        @functools.wraps(command)
        def run(**values):
            chosen = {f.name: values[f.name] for f in own}
            chosen |= {f.name: values[GROUP_RECEIVES[kind]] for kind, f in grouped.items()}
            if judged:
                chosen["judge"] = values["judge"]
            return command(job_class(**chosen))

        del run.__wrapped__  # the groups (and typer) read the signature below, not the command's
        run.__signature__ = inspect.Signature(parameters)
        run.__annotations__ = {p.name: p.annotation for p in parameters}
        wrapped = run
        settings = {kind: f.metadata["settings"] for kind, f in grouped.items()}
        if INPUT in grouped:
            wrapped = input_group(wrapped, texts=settings[INPUT].get("texts", False))
        if CLEANING in grouped:
            wrapped = cleaning_group(**settings[CLEANING])(wrapped)
        if SERVER in grouped:
            server = settings[SERVER]
            config = {"config": SERVER_CONFIGS[server["config"]]} if "config" in server else {}
            wrapped = server_group(wrapped, **server | config, defaults=group_defaults(grouped[SERVER]))
        if EXECUTOR in grouped:
            wrapped = executor_group(wrapped, without=settings[EXECUTOR].get("without", ()))
        return wrapped

    return decorate

"""What every flow shares: validated input parameters and the cache key that lets a rerun skip finished work.

A flow's parameters are generated from its command's job (job_model) and the option groups' declarations
(curate.options): the same types, defaults, help and bounds as the command line's.

The cache key hashes what determines a job's output: its parameters, the resolved (versioned) classifier,
the size and modification time of every local input file, the curate version and a hash of curate's own
code (modules, prompts, templates), so a fix that changes outputs is not hidden behind a cached result of
the same release. Prefect persists the task result under that key; a flow refreshes it when the outputs
it points at are gone.
"""

from __future__ import annotations

import dataclasses
import glob as globlib
import hashlib
import json
import typing
from collections.abc import Callable, Collection
from functools import cache
from pathlib import Path
from typing import Annotated, Any, ClassVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, create_model, model_validator

import curate
from curate.classifiers import UnknownClassifierError, resolve_name
from curate.errors import CurateError
from curate.options import (
    CLEANING,
    EXECUTOR,
    INPUT,
    SERVER,
    InputFields,
    ServerFields,
    field_types,
    group_defaults,
    groups,
    offered,
)
from curate.pipelines.cleaning import Cleaning
from curate.pipelines.executors import ExecutorOptions
from curate.pipelines.llm.options import ServerOptions
from curate.pipelines.readers import InputSpec
from curate.pipelines.state import claim_output, files_signature, output_finished


def check_classifier(value: str) -> str:
    """A pydantic validator body: the classifier spec must name a registered classifier."""
    try:
        resolve_name(value)
    except UnknownClassifierError as error:
        raise ValueError(str(error)) from None
    return value


# A classifier parameter: a registered classifier's name ('cues' = the newest cues_vN, or a versioned name).
Classifier = Annotated[str, AfterValidator(check_classifier)]


def one_of(what: str, choices: Collection[str]) -> AfterValidator:
    """A pydantic validator: the value (or None) must be one of `choices`; the error names them."""

    def check(value: str | None) -> str | None:
        if value is not None and value not in choices:
            raise ValueError(f"unknown {what} {value!r}; choose one of {', '.join(choices)}")
        return value

    return AfterValidator(check)


class OptionsParameters(BaseModel):
    """A flow parameter made from one of the options dataclasses the commands use (ExecutorOptions, Cleaning): the
    same fields, checked by the dataclass's own `validate()`, so a flow refuses what its command refuses and a
    deployment can ask for everything the command's options can. `options()` is the dataclass."""

    model_config = ConfigDict(extra="forbid")
    options_class: ClassVar[type]

    @model_validator(mode="after")
    def _valid(self):
        try:
            self.options().validate()
        except CurateError as error:
            raise ValueError(str(error)) from None
        return self

    def options(self):
        return self.options_class(**self.model_dump())


def bounded(f: dataclasses.Field, default, named: bool = False) -> Any:
    """The pydantic Field of an offered option: its default, help and command-line bounds (min -> ge, max -> le);
    `named`: a path, or a required name, must not be empty."""
    bounds = f.metadata.get("bounds", {})
    return Field(default, description=f.metadata.get("help"), ge=bounds.get("min"), le=bounds.get("max"),
                 min_length=1 if named else None)


def option_fields(config_class: type, exclude: tuple[str, ...] = ()) -> dict:
    """The pydantic fields of a group's offered options (curate.options): type, default, help and bounds as the
    command line declares them."""
    hints = typing.get_type_hints(config_class)
    return {f.name: (hints[f.name], bounded(f, f.default) if f.default_factory is dataclasses.MISSING
                     else Field(default_factory=f.default_factory, description=f.metadata["help"]))
            for f in offered(config_class) if f.name not in exclude}


def parameters_model(options_class: type, doc: str) -> type:
    """The OptionsParameters model of `options_class`: its offered fields, with their defaults, help and bounds."""
    name = options_class.__name__.removesuffix("Options") + "Parameters"
    model = create_model(name, __base__=OptionsParameters, __module__=__name__, __doc__=doc,
                         **option_fields(options_class))
    model.options_class = options_class
    return model


ExecutorParameters = parameters_model(
    ExecutorOptions,
    """Where a flow's datatrove tasks run: the fields of `ExecutorOptions`, so a deployment can send a job to Slurm
    or Ray exactly as `curate ... --executor` does. env_command is derived from the worker's environment.""",
)

CleaningParameters = parameters_model(
    Cleaning,
    """A builder's optional clean-up of what it wrote (`Cleaning`): MinHash near-duplicate removal and n-gram
    decontamination against benchmarks named as `curate decontam --against` takes them, read from benchmarks_dir
    (default: $CURATE_BENCHMARKS_DIR); the benchmarks are checked before the run.""",
)


class ServerBase(BaseModel):
    """A flow's model server (ServerParameters): the "Model server" options (ServerFields); the model is the job's own
    parameter, and the server options are checked when the job starts its server, as the command's are."""

    model_config = ConfigDict(extra="forbid")

    def options(self, model: str | None) -> ServerOptions:
        return ServerOptions(model=model, **self.model_dump())


ServerParameters = create_model("ServerParameters", __base__=ServerBase, __module__=__name__,
                                **option_fields(ServerFields))


def server_parameters(defaults: dict | None) -> type:
    """ServerParameters, or a job's subclass of it with the job's `defaults` of some options (cpt's tp)."""
    if not defaults:
        return ServerParameters
    declared = {f.name: f for f in offered(ServerFields)}
    return create_model("ServerParameters", __base__=ServerParameters, __module__=__name__,
                        **{name: (ServerParameters.model_fields[name].annotation, bounded(declared[name], value))
                           for name, value in defaults.items()})

# A job's option group (curate.options) -> its flow parameter and that parameter's model. The corpus (INPUT)
# has no parameter of its own: its fields are InputParameters' own (input, text_key, ...), as deployments give them.
GROUP_PARAMETERS = {EXECUTOR: ("executor", ExecutorParameters), CLEANING: ("cleaning", CleaningParameters),
                    SERVER: ("server", ServerParameters)}
# The executor fields that were each job's own parameters until issue 16 (tasks, workers), still taken flat.
EXECUTOR_FIELDS_GIVEN_FLAT = ("tasks", "workers")
GROUP_CLASSES = {"ExecutorOptions": ExecutorOptions, "Cleaning": Cleaning, "InputSpec": InputSpec,
                 "ServerOptions": ServerOptions}


class JobParameters(BaseModel):
    """A flow's parameters generated from its command's job (job_model): the same options with the same defaults
    and bounds, checked by the check the job runs first, so that a flow refuses what its command refuses; `job()` is
    the job the command would run with those options."""

    model_config = ConfigDict(extra="forbid")
    job_class: ClassVar[type]
    job_check: ClassVar[Callable | None] = None

    @model_validator(mode="before")
    @classmethod
    def _executor_fields_given_flat(cls, data):
        """`tasks` and `workers` at the top level (`params: {tasks: 4}`), as deployments registered before they moved
        into the executor parameter give them, are the executor's: `executor: {tasks: 4}`. A job's own field of that
        name (mcqa's math-verify `workers`) is its own."""
        if not isinstance(data, dict) or EXECUTOR not in groups(cls.job_class):
            return data
        flat = {name: data[name] for name in EXECUTOR_FIELDS_GIVEN_FLAT if name in data and name not in cls.model_fields}
        if not flat:
            return data
        executor = data.get("executor", {})
        executor = executor.model_dump(exclude_unset=True) if isinstance(executor, BaseModel) else dict(executor)
        twice = sorted(set(flat) & set(executor))
        if twice:
            raise ValueError(f"{', '.join(twice)}: given both at the top level and in executor; give them in executor")
        return {key: value for key, value in data.items() if key not in flat} | {"executor": executor | flat}

    @model_validator(mode="after")
    def _checked(self):
        for f in dataclasses.fields(self.job_class):
            if f.metadata.get("group") == SERVER:
                refused = set(f.metadata["settings"].get("without", ())) & self.server.model_fields_set
                if refused:  # the command does not offer them either: its job sets them itself
                    raise ValueError(f"server: {', '.join(sorted(refused))} is not an option of this job")
        if self.job_check is not None:
            try:
                self.job_check(self.job())
            except (CurateError, ValueError) as error:
                raise ValueError(str(error)) from None
        return self

    def job(self, **changes):
        """The job, with `changes` (a flow argument that is no parameter: overwrite)."""
        values = {}
        for f in dataclasses.fields(self.job_class):
            kind = f.metadata.get("group")
            if kind == INPUT:
                values[f.name] = self.spec()
            elif kind == SERVER:
                values[f.name] = self.server.options(getattr(self, f.metadata["settings"].get("model", "model")))
            elif kind is not None:
                values[f.name] = getattr(self, GROUP_PARAMETERS[kind][0]).options()
            elif f.name in type(self).model_fields:
                values[f.name] = getattr(self, f.name)
        return self.job_class(**values | changes)


def job_model(job_class: type, doc: str, module: str, base: type[BaseModel] = BaseModel, check: Callable | None = None,
              exclude: tuple[str, ...] = (), **overrides) -> type:
    """The JobParameters model of `job_class`, named for it in `module` (the flow's, where it is pickled from): each
    of its fields (but `exclude`) with its type, default, help (description) and bounds (min -> ge, max -> le), and
    each of its groups as GROUP_PARAMETERS says (a server group with the job's own defaults of its options; a job that
    reads a corpus takes a CorpusParameters `base` naming it: InputParameters, or cpt's TaggedCorpus). A field `base`
    declares keeps base's declaration (its validator), which must have the job's default. `overrides`: field ->
    (type, default or Field) where a flow's parameter differs from the option (an output a deployment must name);
    `check(job)`: the job's own check, raising a CurateError."""
    types = field_types(job_class, known=GROUP_CLASSES)
    fields = {}
    for f in dataclasses.fields(job_class):
        kind = f.metadata.get("group")
        if f.name in exclude or kind == INPUT:
            if kind == INPUT and not issubclass(base, CorpusParameters):
                raise TypeError(f"{job_class.__name__} reads a corpus: its parameters need a CorpusParameters base")
            continue
        name, default = (f.name, f.default)
        if kind:  # the group's parameter model (a server group's with the job's own defaults of its options)
            name, parameters = GROUP_PARAMETERS[kind]
            if kind == SERVER:
                parameters = server_parameters(group_defaults(f))
            default = parameters()
        if name in base.model_fields:
            declared = base.model_fields[name].default
            if kind is None and declared != default:
                raise TypeError(f"{job_class.__name__}.{name}: the flow's default {declared!r} is not the job's "
                                f"{default!r}")
            continue
        if name in overrides:
            fields[name] = overrides[name]
        elif kind:
            fields[name] = (parameters, default)
        else:
            # A path is a string, as deployments give it and the flows hand it on (a Path would not be a str field);
            # a path, and a required name or list of them, is not empty.
            kind_of = {Path: str, Path | None: str | None}.get(types[name], types[name])
            required = default is dataclasses.MISSING
            named = types[name] is Path or (required and kind_of in (str, list[str]))
            fields[name] = (kind_of, bounded(f, ... if required else str(default) if isinstance(default, Path)
                                             else default, named))
    name = job_class.__name__.removesuffix("Job") + "Parameters"
    bases = (JobParameters,) if base is BaseModel else (JobParameters, base)
    model = create_model(name, __base__=bases, __module__=module, __doc__=doc, **fields)
    model.job_class = job_class
    model.job_check = staticmethod(check) if check else None
    return model


def claim(output: str | Path, command: str, parameters: dict, inputs=None, overwrite: bool = False,
          keep: tuple[str, ...] = ()):
    """The output rule of the commands, for a flow: a folder holding another dataset fails the flow run (with the
    fix) unless `overwrite`; a folder that is up to date is left to the flow's cached task. The
    parameters use the command's keys, so a flow and `curate COMMAND` each see the other's dataset as their own."""
    parameters = {k: str(v) if isinstance(v, Path) else v for k, v in parameters.items()}
    return claim_output(output, command, parameters, inputs=inputs, overwrite=overwrite, keep=keep)


def submission_summary(submitted) -> dict:
    """What a flow returns when its job went to Slurm: not a failure; the same run again continues it."""
    return {"submitted": str(submitted), "job_id": submitted.job_id,
            "scripts": [str(script) for script in submitted.scripts]}


class CorpusParameters(BaseModel):
    """Parameters that read a corpus, the InputSpec their `spec()` returns: a local one must name a file before
    the run starts."""

    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="after")
    def _input_exists(self):
        check_input(self.spec())
        return self

    @property
    def reads_remote(self) -> bool:
        return self.spec().is_hub


def corpus_fields(path: str = "input", help: str | None = None) -> dict:
    """The "Input" options (InputFields) as flow parameters, the corpus itself named `path` (input, or cpt's texts,
    with its `help`) and required."""
    declared = next(f for f in offered(InputFields) if f.name == "path")
    return {path: (str, Field(min_length=1, description=help or declared.metadata["help"])),
            **option_fields(InputFields, exclude=("path",))}


class InputBase(CorpusParameters):
    """A corpus read by a classifier (InputParameters): where the corpus is, which classifier reads it (checked to be
    a registered one), where the tasks run."""

    config: str | None = None  # a hub dataset's configuration
    classifier: Classifier = "cues"
    batch_size: int = Field(64, ge=1)
    executor: ExecutorParameters = ExecutorParameters()

    @property
    def resolved_classifier(self) -> str:
        return resolve_name(self.classifier)[0]

    def spec(self):
        return InputSpec(path=self.input, text_key=self.text_key, id_key=self.id_key, split=self.split,
                         config=self.config, streaming=self.streaming)


InputParameters = create_model(
    "InputParameters", __base__=InputBase, __module__=__name__, __doc__="""A corpus: a file, a directory, a glob
    ('corpus/*.jsonl') or a Hugging Face dataset 'hf:ORG/NAME', and how it is read (the "Input" options).""",
    **corpus_fields())


def check_input(spec) -> None:
    """Raises ValueError (a pydantic validation error) when a local InputSpec names no file."""
    if spec.is_hub:
        return
    try:
        folder, pattern = spec.folder_and_pattern()
    except FileNotFoundError as error:
        raise ValueError(str(error)) from None
    if pattern and globlib.has_magic(pattern) and not any(Path(folder).glob(pattern)):
        raise ValueError(f"input {spec.path!r} matches no file")


def spec_files_signature(spec) -> list:
    if spec.is_hub:
        return []
    folder, pattern = spec.folder_and_pattern()
    return files_signature(Path(folder).glob(pattern) if pattern else Path(folder).rglob("*"))


def input_files_signature(parameters: InputParameters) -> list:
    return spec_files_signature(parameters.spec())


PACKAGE_ROOT = Path(curate.__file__).parent
# Bundled inputs, not code: a flow that reads them has them in its input-file signature already.
NOT_CODE = {"sample_data", "__pycache__"}


@cache
def code_signature(root: Path = PACKAGE_ROOT) -> str:
    """A hash of every file of the package that shapes outputs: modules, prompt files, card templates."""
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file() and not NOT_CODE & set(p.relative_to(root).parts)):
        if path.suffix in {".pyc", ".pyo"}:
            continue
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def cache_key(job: str, parameters: BaseModel, *extra) -> str:
    """A key from the job, its parameters, the classifier version, the input files and curate's version and code."""
    payload = {"job": job, "parameters": parameters.model_dump(mode="json"), "curate": curate.__version__,
               "code": code_signature(), "extra": extra}
    if isinstance(parameters, InputParameters):
        payload["classifier"] = parameters.resolved_classifier
        payload["input_files"] = input_files_signature(parameters)
    digest = hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()
    return f"curate-{job}-{digest[:32]}"


def job_task(task, output: str | Path | None = None, overwrite: bool = False, remote: bool = False,
             finished: bool | None = None):
    """`task` (a job's one Prefect task) with the options every job flow gives it. Prefect's cached result is served
    only while the job's output is up to date by the command's own rule (output_finished of `output`; never with
    `overwrite`); a job whose output has a rule of its own (tags) says `finished` itself. A job that does `remote` I/O
    (the Hub, an endpoint) is retried twice, 30 s apart; a local failure is deterministic and a retry would only
    repeat it."""
    if finished is None:
        finished = not overwrite and output_finished(output)
    return task.with_options(refresh_cache=not finished, retries=2 if remote else 0, retry_delay_seconds=30)

"""What every flow shares: validated input parameters and the cache key that lets a rerun skip finished work.

The cache key hashes what determines a job's output: its parameters, the resolved (versioned) classifier,
the size and modification time of every local input file, the curate version and a hash of curate's own
code (modules, prompts, templates), so a fix that changes outputs is not hidden behind a cached result of
the same release. Prefect persists the task result under that key; a flow refreshes it when the outputs
it points at are gone.
"""

from __future__ import annotations

import glob as globlib
import hashlib
import json
from functools import cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

import curate
from curate.classifiers import UnknownClassifierError, resolve_name
from curate.pipelines.executors import ExecutorConfigError, ExecutorOptions
from curate.pipelines.readers import InputSpec
from curate.pipelines.state import claim_output


def check_classifier(value: str) -> str:
    """A pydantic validator body: the classifier spec must name a registered classifier."""
    try:
        resolve_name(value)
    except UnknownClassifierError as error:
        raise ValueError(str(error)) from None
    return value

class ExecutorParameters(BaseModel):
    """Where a flow's datatrove tasks run: the fields of `ExecutorOptions`, checked by its own `validate()`, so a
    deployment can send a job to Slurm or Ray exactly as `curate ... --executor` does."""

    model_config = ConfigDict(extra="forbid")

    kind: str = "local"
    ray_address: str | None = None
    cpus_per_task: int = Field(1, ge=1)
    mem_per_cpu_gb: float = Field(2, gt=0)
    gpus_per_task: int = Field(0, ge=0)
    partition: str | None = None
    time: str = "24:00:00"
    qos: str | None = None
    dry_run: bool = False

    @model_validator(mode="after")
    def _valid(self):
        try:
            self.options().validate()
        except ExecutorConfigError as error:
            raise ValueError(str(error)) from None
        return self

    def options(self):
        return ExecutorOptions(**self.model_dump())


class CleaningParameters(BaseModel):
    """A builder's optional clean-up of what it wrote: MinHash near-duplicate removal and n-gram decontamination
    against named benchmarks (the --dedup / --decontam / --benchmarks-dir options of the commands)."""

    model_config = ConfigDict(extra="forbid")

    dedup: bool = False
    decontam: str | None = Field(None, description="Comma-separated benchmarks (e.g. gsm8k,math500).")
    benchmarks_dir: str | None = Field(None, description="Where the benchmark files are (default: built-in paths).")

    def arguments(self) -> dict:
        return {"dedup": self.dedup, "decontam": self.decontam, "benchmarks_dir": self.benchmarks_dir}


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


class InputParameters(BaseModel):
    """A corpus: a file, a directory, a glob ('corpus/*.jsonl') or a Hugging Face dataset 'hf:ORG/NAME'."""

    model_config = ConfigDict(extra="forbid")

    input: str = Field(min_length=1)
    text_key: str = "text"
    id_key: str = "id"
    split: str = "train"
    config: str | None = None
    streaming: bool = False
    classifier: str = "cues"
    tasks: int = Field(1, ge=1)
    workers: int = Field(1, ge=1)
    batch_size: int = Field(64, ge=1)
    executor: ExecutorParameters = ExecutorParameters()

    @field_validator("classifier")
    @classmethod
    def _registered(cls, value: str) -> str:
        return check_classifier(value)

    @model_validator(mode="after")
    def _input_exists(self):
        check_input(self.spec())
        return self

    @property
    def resolved_classifier(self) -> str:
        return resolve_name(self.classifier)[0]

    @property
    def reads_remote(self) -> bool:
        return self.input.startswith("hf:")

    def spec(self):
        return InputSpec(path=self.input, text_key=self.text_key, id_key=self.id_key, split=self.split,
                         config=self.config, streaming=self.streaming)


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


def files_signature(paths) -> list:
    """Name, size and mtime of every file: an edited input gets a new cache key."""
    return sorted([str(p.resolve()), p.stat().st_size, p.stat().st_mtime_ns] for p in map(Path, paths) if p.is_file())


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


def completed_tasks(logging_dir: Path) -> int:
    """datatrove writes one completion marker per finished task."""
    completions = Path(logging_dir) / "completions"
    return len(list(completions.iterdir())) if completions.is_dir() else 0

"""Job configs: one frozen dataclass per command, holding the command's own options (each field's metadata carries
the help and flags the command line shows) and the shared option groups it is composed of (the corpus, the
cleaning, the model server, the executor).

The command line generates a command's options from its job (curate.cli.groups.job_command) and hands one job to
the one function that runs it; the command's flow takes the same job as a pydantic model generated from it
(curate.flows.common.job_model) and calls the same function, so a flow and its command cannot drift:

    @dataclass(frozen=True, kw_only=True)
    class BuildJob:
        behaviors: str = option("Comma-separated behaviors every document must show ...")
        seed: int = option("Seed of the random sample.", default=0)
        corpus: InputSpec = group(INPUT)
        executor: ExecutorOptions = group(EXECUTOR, default=LOCAL)

Light on purpose: the command line imports every job to build `--help`, so a job module imports no datatrove; the
group classes that live beside datatrove code (InputSpec, Cleaning, ServerOptions) are named for type checking only.
"""

from __future__ import annotations

import builtins
import dataclasses
import re
import sys
import typing
from pathlib import Path
from typing import Any

SAMPLE_CORPUS = Path(__file__).parents[1] / "sample_data" / "corpus"
SAMPLE_GLOB = str(SAMPLE_CORPUS / "*.jsonl")  # what a command without --input reads

# The option groups a job can be composed of; each is one help panel on the command line and one config object.
INPUT, CLEANING, SERVER, EXECUTOR = "input", "cleaning", "server", "executor"

# Help shared by the options that several jobs have.
CLASSIFIER_HELP = "Registered classifier ('cues' = newest cues_vN, or a versioned name)."
TASKS_HELP = "datatrove tasks (input files are split among them)."
WORKERS_HELP = "Tasks run at the same time."
VERIFY_INPUTS_HELP = "Also compare input files by SHA-256, not only size and modification time (reads them)."
ALLOW_PARTIAL_HELP = "Build from tags whose tasks did not all finish (warns); default: refuse."
OVERWRITE_HELP = "--output holds another dataset: remove what it wrote, then write this one."


def option(help: str, *flags: str, default: Any = dataclasses.MISSING, **bounds) -> Any:
    """A job field that the command line offers: its help; its flags where they are not --FIELD-NAME ('--output',
    '-o'; a bool given its one flag has no --no- form); typer's bounds (min=1, max=0.99), which a flow checks too;
    and its default (none: the option is required)."""
    return dataclasses.field(default=default, metadata={"help": help, "flags": flags, "bounds": bounds})


def group(kind: str, default: Any = dataclasses.MISSING, **settings) -> Any:
    """A job field holding one option group (INPUT, CLEANING, SERVER, EXECUTOR) with the command's `settings` of it:
    CLEANING takes `dedup` and `decontam`, the help of those flags (what this job judges); EXECUTOR takes `without`,
    the options the command does not offer."""
    return dataclasses.field(default=default, metadata={"group": kind, "settings": settings})


def offered(job_class: type) -> list[dataclasses.Field]:
    """The job's own fields that the command line offers, in declaration order (the order of --help)."""
    return [f for f in dataclasses.fields(job_class) if "help" in f.metadata]


def groups(job_class: type) -> dict[str, dataclasses.Field]:
    """The job's option groups: kind -> field."""
    return {f.metadata["group"]: f for f in dataclasses.fields(job_class) if "group" in f.metadata}


def field_types(job_class: type, known: dict[str, type] | None = None) -> dict[str, Any]:
    """Each field's type. A name that the job's module imports for type checking only (a group's class) is `known`'s
    class of that name, else `object`: the command line, which must not import those classes to build `--help`,
    reads only the types of the job's own fields."""
    module = vars(sys.modules[job_class.__module__])
    names = {word for f in dataclasses.fields(job_class) for word in re.findall(r"[A-Za-z_]\w*", str(f.type))}
    unresolved = {name: (known or {}).get(name, object) for name in names
                  if name not in module and not hasattr(builtins, name)}
    return typing.get_type_hints(job_class, localns=unresolved)

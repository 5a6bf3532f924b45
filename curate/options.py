"""Where every option is declared: the `option()` / `group()` field helpers the job configs use, the option groups a
job is composed of, and the defaults several of them share.

Each option is declared once, as a dataclass field whose metadata carries its help, its flags, its bounds and its
help panel, in the class that holds it:

- a job's own options, in its job config (curate.pipelines.jobs, curate.builders.jobs, curate.handoff.jobs,
  curate.review.jobs);
- the options of a group, in the group's fields here (ServerFields, SamplingFields, JudgeFields, InputFields,
  CleaningFields) or in the group's class where that class is as light (ExecutorOptions). The config classes
  that run a group (ServerOptions, SamplingOptions, InputSpec, Cleaning) inherit these fields, so that their types
  and defaults are the declared ones.

The command line (curate.cli.groups) and the Prefect flows (curate.flows.common) are generated from these fields.
Light on purpose: `--help` reads every declaration, so this module imports nothing beyond the standard library.
"""

from __future__ import annotations

import builtins
import dataclasses
import re
import sys
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# The option groups a job can be composed of; each is one help panel on the command line and one config object.
INPUT, CLEANING, SERVER, EXECUTOR = "input", "cleaning", "server", "executor"
INPUT_PANEL, CLEANING_PANEL, SERVER_PANEL, EXECUTOR_PANEL = "Input", "Cleaning", "Model server", "Executor"
# The help panel of a job's own options that say where and how its result is written: the output folder and what
# happens to one that holds another result, files written beside it (a report, a plot), and what the written dataset
# carries besides its rows (the card's license, source columns kept).
OUTPUT_PANEL = "Output"

# Defaults that several configs share.
DEFAULT_MAX_DOC_TOKENS = 3072  # model tokens a document is cut to before an LLM reads it (tagging, the cpt rewrite)
TAG_REQUEST_TIMEOUT = 300.0  # seconds per LLM tagging request (one document, short answers) before it is retried
DEFAULT_RECORDS_PER_CHUNK = 500  # documents per checkpoint chunk of an LLM job
DEFAULT_EMBEDDING_MODEL = "all-MiniLM-L6-v2"  # the bundled sentence embedder of distilled heads (offline)
DEFAULT_MAX_CHUNKS = 8  # token windows embedded per long document by distilled heads

# Help shared by the options that several jobs have.
CLASSIFIER_HELP = "Registered classifier ('cues' = newest cues_vN, or a versioned name)."
VERIFY_INPUTS_HELP = "Also compare input files by SHA-256, not only size and modification time (reads them)."
ALLOW_PARTIAL_HELP = "Build from tags whose tasks did not all finish (warns); default: refuse."
OVERWRITE_HELP = "--output holds another dataset: remove what it wrote, then write this one."
ID_KEY_HELP = "Field holding the document id; missing ids become 'source path/position'."
SPLIT_HELP = "Split of a Hugging Face dataset."
CLEANED_HELP = "Corpus (file, directory, glob) or a built dataset directory (DIR/data)."
CLEANED_OUTPUT_HELP = "Output directory (may be the input dataset: replaced in place)."

SYSTEM_HELP = "System message before every prompt."
INSTRUCTION_HELP = "Appended to every prompt; default: the reward's own instruction; '' for none."

MISSING: Any = dataclasses.MISSING


def option(help: str, *flags: str, default: Any = MISSING, default_factory: Any = MISSING, argument: bool = False,
           panel: str | None = None, flag_type: Any = MISSING, flag_default: Any = MISSING, shared: str | None = None,
           **bounds) -> Any:
    """A field that the command line offers: its help; its flags where they are not --FIELD-NAME ('--output', '-o';
    a bool given its one flag has no --no- form; the command-line parameter is named for the first long flag), or
    `argument`: a positional argument; its help panel where not the command's own (OUTPUT_PANEL, or a group's); typer's
    bounds (min=1, max=0.99), which a flow checks too; and its default (none: the option is required).
    `flag_type` and `flag_default`: what the command line takes where the field holds something else (repeated
    --server-arg KEY=VALUE strings for a dict; no --input for the bundled sample corpus). `shared`: the name of the
    SHARED_OPTIONS declaration it is (see `shared()`)."""
    metadata = {"help": help, "flags": flags, "bounds": bounds, "argument": argument, "panel": panel, "shared": shared}
    if flag_type is not MISSING:
        metadata["flag_type"] = flag_type
    if flag_default is not MISSING:
        metadata["flag_default"] = flag_default
    return field(default=default, default_factory=default_factory, metadata=metadata)


# The options that several jobs (and groups) offer alike, declared here once: name -> (help, flags, settings).
SHARED_OPTIONS: dict[str, tuple[str, tuple[str, ...], dict]] = {
    "overwrite": (OVERWRITE_HELP, ("--overwrite",), {"default": False, "panel": OUTPUT_PANEL}),
    "verify_inputs": (VERIFY_INPUTS_HELP, ("--verify-inputs",), {"default": False}),
    "classifier": (CLASSIFIER_HELP, ("--classifier", "-c"), {"default": "cues"}),
    "id_key": (ID_KEY_HELP, (), {"default": "id"}),
    "split": (SPLIT_HELP, (), {"default": "train"}),
    "system": (SYSTEM_HELP, (), {"default": None}),
    "instruction": (INSTRUCTION_HELP, (), {"default": None}),
    # dedup and decontam: what they clean and where the result goes.
    "cleaned_input": (CLEANED_HELP, (), {"argument": True}),
    "cleaned_output": (CLEANED_OUTPUT_HELP, ("--output", "-o"), {"panel": OUTPUT_PANEL}),
    # How an LLM classifier prompts (tag-llm; tag says the same with "--classifier llm:" in front).
    "llm_mode": ("per-behavior (four requests sharing the document prefix) or joint (one JSON answer).", (),
                 {"default": "per-behavior"}),
    "llm_structured": ("Ask the server for JSON by schema (response_format).", (), {"default": False}),
    "llm_gate": ("Cascade: only documents this cheap classifier flags reach the LLM (e.g. 'cues').", (),
                 {"default": None}),
    "llm_max_doc_tokens": ("Truncate documents to this many model tokens, at the last newline.", (),
                           {"default": DEFAULT_MAX_DOC_TOKENS, "min": 16}),
}


def shared(name: str, help: str | None = None, **changes) -> Any:
    """A field offering the SHARED_OPTIONS option `name`, as declared there; `help`: how this command says what it is
    for (tag's "--classifier llm: ..."); `changes`: a job's own default of it (priming's check classifier)."""
    declared_help, flags, settings = SHARED_OPTIONS[name]
    return option(help or declared_help, *flags, shared=name, **settings | changes)


def group(kind: str, default: Any = MISSING, **settings) -> Any:
    """A job field holding one option group (INPUT, CLEANING, SERVER, EXECUTOR) with the command's `settings` of it:
    CLEANING takes `dedup` and `decontam`, the help of those flags (what this job judges); a group takes `without`,
    the options the command does not offer, `help`, {field: help} where this command says what the option is
    for (`--reformulate: the model`). A group's `default` is the job's group when none is given (a job built without
    the command line); where it sets an option otherwise than the group declares (cpt's tp), that is the job's
    default of the option on the command line and in the flow too (group_defaults)."""
    return field(default=default, metadata={"group": kind, "settings": settings})


def offered(config_class: type) -> list[dataclasses.Field]:
    """The fields of a job or group that the command line offers, in declaration order (the order of --help)."""
    return [f for f in dataclasses.fields(config_class) if "help" in f.metadata]


def groups(job_class: type) -> dict[str, dataclasses.Field]:
    """The job's option groups: kind -> field."""
    return {f.metadata["group"]: f for f in dataclasses.fields(job_class) if "group" in f.metadata}


def parameter_name(f: dataclasses.Field) -> str:
    """The command-line parameter of an offered field: named for its first long flag ('--slurm-partition' ->
    slurm_partition), else for the field."""
    long = [flag for flag in f.metadata.get("flags", ()) if flag.startswith("--")]
    return long[0].removeprefix("--").replace("-", "_") if long else f.name


def field_types(config_class: type, known: dict[str, type] | None = None) -> dict[str, Any]:
    """Each field's type. A name that the class's module imports for type checking only (a group's class) is
    `known`'s class of that name, else `object`: the command line, which must not import those classes to build
    `--help`, reads only the types of the options."""
    names = {word for f in dataclasses.fields(config_class) for word in re.findall(r"[A-Za-z_]\w*", str(f.type))}
    namespace = {}
    for klass in config_class.__mro__:
        namespace |= vars(sys.modules[klass.__module__])
    unresolved = {name: (known or {}).get(name, object) for name in names
                  if name not in namespace and not hasattr(builtins, name)}
    return typing.get_type_hints(config_class, localns=unresolved)


def help_of(f: dataclasses.Field, settings: dict) -> str:
    """An offered field's help, or the help a job's group `settings` give it."""
    return (settings.get("help") or {}).get(f.name, f.metadata["help"])


def default_of(f: dataclasses.Field, defaults: dict) -> Any:
    """An offered field's default on the command line, or a job's own (`defaults`: group_defaults)."""
    return defaults.get(f.name, f.metadata.get("flag_default", f.default))


def group_defaults(group_field: dataclasses.Field) -> dict:
    """The job's own defaults of its group's options: those its group field's default sets otherwise than the group
    declares them (cpt's ServerFields(tp=1))."""
    default = group_field.default
    if default is MISSING:
        return {}
    return {f.name: getattr(default, f.name) for f in offered(type(default))
            if f.default is not MISSING and getattr(default, f.name) != f.default}


DEVICE_HELP = "--backend transformers: device for `transformers serve`."
START_TIMEOUT_HELP = ("Seconds one server start may take until it answers (default: vllm 1800, transformers 600, "
                      "endpoint 300).")
START_RETRIES_HELP = "Start attempts after a failed one (default: vllm 2, else 1)."


@dataclass(frozen=True, kw_only=True)
class ServerFields:
    """Where a model runs and how its server is started: the "Model server" options of every job that calls a model.
    The model itself is the job's own option (`--model`, audit-verifier's `--policy`), named by its SERVER group."""

    backend: str = option("vllm (spawns `vllm serve`), endpoint (OpenAI-compatible URL), transformers (spawns "
                          "`transformers serve`).", default="transformers")
    endpoint_url: str | None = option("Base URL for --backend endpoint; key from CURATE_API_KEY or OPENAI_API_KEY.",
                                      default=None)
    device: str = option(DEVICE_HELP, default="auto")
    concurrency: int | None = option("Requests in flight (default: vllm 256, endpoint 32, transformers 4).",
                                     default=None, min=1)
    # None: the GPUs per task (shared by the --dp replicas) for vllm, else 1 (ServerOptions.tensor_parallel)
    tp: int | None = option("vLLM tensor parallelism (default: --gpus-per-task, else 1).", default=None, min=1)
    dp: int = option("vLLM data parallelism.", default=1, min=1)
    server_start_timeout: float | None = option(START_TIMEOUT_HELP, default=None, min=1)
    server_start_retries: int | None = option(START_RETRIES_HELP, default=None, min=0)
    # Extra server flags, KEY -> VALUE (True: a bare flag).
    server_args: dict = option("Extra server flag KEY=VALUE (or KEY), repeatable: --server-arg "
                               "gpu-memory-utilization=0.9", "--server-arg", default_factory=dict,
                               flag_type=list[str] | None, flag_default=None)


# The server of a job that runs no model unless asked (mcqa --reformulate, priming --writer llm, cpt --rewrite), as a
# job built without the command line (a test, a bench) gets it.
DEFAULT_SERVER = ServerFields()


@dataclass(frozen=True, kw_only=True)
class SamplingFields:
    """How a policy is sampled (`sampling=True` of a SERVER group): the options of SamplingOptions."""

    temperature: float = option("Sampling temperature.", default=1.0, min=0)
    top_p: float = option("Nucleus sampling.", default=1.0)
    max_tokens: int = option("Generation budget per sample.", default=1024, min=1)
    system: str | None = shared("system")


@dataclass(frozen=True, kw_only=True)
class JudgeFields:
    """A judge's server (an LLM judge, an LLM classifier) where it is not the policy's (`judge=True` of a SERVER
    group): its model, and its backend and URL where they differ. Its other settings are the policy's."""

    model: str | None = option("The judge's model (hub name or local directory). It runs on the policy's server "
                               "settings unless --judge-backend / --judge-endpoint-url say otherwise.",
                               "--judge-model", default=None)
    backend: str | None = option("The judge's backend (default: --backend).", "--judge-backend", default=None)
    endpoint_url: str | None = option("--backend endpoint: the judge's base URL (default: --endpoint-url, when the "
                                      "judge runs on the policy's backend).", "--judge-endpoint-url", default=None)


# The corpus that a command's tags were made from (cpt, distill: `group(INPUT, texts=True)`): required, and called
# --texts there, with this help.
TEXTS_HELP = "The corpus the tags were made from (file, directory, glob or hf:NAME)."


@dataclass(frozen=True)
class InputFields:
    """Where a corpus is and how it is read: the "Input" options (InputSpec holds them, and a hub dataset's config).
    Without --input a command reads the bundled sample corpus."""

    path: str = option("File, directory, glob ('corpus/*.jsonl') or Hugging Face dataset 'hf:ORG/NAME'.", "--input",
                       "-i", flag_type=str | None, flag_default=None)
    text_key: str = option("Field holding the text.", default="text")
    id_key: str = shared("id_key")
    split: str = shared("split")
    streaming: bool = option("Stream a Hugging Face dataset instead of downloading it.", default=False)


@dataclass(frozen=True)
class CleaningFields:
    """A builder's optional clean-up of what it wrote (Cleaning holds them). The help of --dedup and --decontam is
    each builder's: what it judges (`group(CLEANING, dedup=..., decontam=...)`)."""

    dedup: bool = option("Remove exact and MinHash near duplicates.", "--dedup", default=False)
    decontam: str | None = option("Remove rows overlapping these benchmarks (as `curate decontam --against`).",
                                  default=None)
    # Benchmarks as `curate decontam --against` takes them, read from here (default: $CURATE_BENCHMARKS_DIR).
    benchmarks_dir: Path | None = option("Local copies of built-in benchmarks for --decontam.", default=None)

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

Each option is declared once (curate.options): a job's own options here, the groups' options in their group.
Light on purpose: the command line imports every job to build `--help`, so a job module imports no datatrove; the
group classes that live beside datatrove code (InputSpec, Cleaning, ServerOptions) are named for type checking only.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from curate.options import (
    DEFAULT_EMBEDDING_MODEL,
    DEFAULT_MAX_CHUNKS,
    DEFAULT_RECORDS_PER_CHUNK,
    EXECUTOR,
    INPUT,
    OUTPUT_PANEL,
    SERVER,
    TAG_REQUEST_TIMEOUT,
    group,
    option,
    shared,
)
from curate.pipelines.executor_options import LOCAL, ExecutorOptions

if TYPE_CHECKING:  # they import datatrove
    from curate.pipelines.llm.options import ServerOptions
    from curate.pipelines.llm.tag_options import LLMTagOptions
    from curate.pipelines.readers import InputSpec

SAMPLE_CORPUS = Path(__file__).parents[1] / "sample_data" / "corpus"
SAMPLE_GLOB = str(SAMPLE_CORPUS / "*.jsonl")  # what a command without --input reads


@dataclass(frozen=True, kw_only=True)
class TagJob:
    """Tag a corpus: one attribute row per document in OUTPUT/CLASSIFIER/; an LLM classifier (llm, cascade) tags
    through its own job, on the model server the server group describes."""

    output: Path = option("Tags root; shards go to OUTPUT/CLASSIFIER/.", "--output", "-o", default=Path("tags"),
                          panel=OUTPUT_PANEL)
    classifier: str = shared("classifier")
    batch_size: int = option("Documents per classifier call.", default=64, min=1)
    verify_inputs: bool = shared("verify_inputs")
    limit: int = option("Read at most this many documents per task (-1: all).", default=-1, min=-1)
    model: str | None = option("--classifier llm/cascade: the model (hub name or local dir); its server: the Model "
                               "server options.", default=None)
    mode: str = shared("llm_mode", help="--classifier llm: per-behavior or joint.")
    structured: bool = shared("llm_structured", help="--classifier llm: ask the server for JSON by schema.")
    gate: str | None = shared("llm_gate", help="--classifier llm: cheap gate classifier (cascade); cascade defaults "
                              "to 'cues'.")
    max_doc_tokens: int = shared("llm_max_doc_tokens", help="--classifier llm: truncate documents to this many model "
                                 "tokens.")
    corpus: InputSpec = group(INPUT)
    # The server's model is `model`; an LLM tagging run takes its parallelism from --gpus-per-task.
    server: ServerOptions = group(SERVER, without=("tp", "dp"))
    executor: ExecutorOptions = group(EXECUTOR, default=LOCAL)


@dataclass(frozen=True, kw_only=True)
class TagLLMJob:
    """Tag a corpus with an LLM (llm_v1, or cascade_v1 with a gate) through datatrove's InferenceRunner."""

    model: str = option("Model: hub name or local directory (also the tokenizer unless --tokenizer).")
    output: Path = option("Tags root; shards go to OUTPUT/llm_v1/ (or cascade_v1/).", "--output", "-o",
                          default=Path("tags"), panel=OUTPUT_PANEL)
    mode: str = shared("llm_mode")
    structured: bool = shared("llm_structured")
    max_doc_tokens: int = shared("llm_max_doc_tokens")
    max_answer_tokens: int | None = option("Generation budget per answer (default 48 per-behavior, 96 joint).",
                                           default=None, min=1)
    tokenizer: str | None = option("Tokenizer for truncation when the model name is not loadable here.", default=None)
    gate: str | None = shared("llm_gate")
    request_timeout: float = option("Seconds per request before it is retried.", default=TAG_REQUEST_TIMEOUT,
                                           min=1)
    records_per_chunk: int = option("Documents per checkpoint chunk (a killed run resumes from the last one).",
                                    default=DEFAULT_RECORDS_PER_CHUNK, min=1)
    limit: int = option("Read at most this many documents per task (-1: all).", default=-1, min=-1)
    chat_template_kwargs: str | None = option(
        "JSON object for the model's chat template, e.g. '{\"enable_thinking\": false}' (default: per model family; "
        "Qwen3 gets thinking off, others {}).", default=None)
    reasoning_parser: str | None = option("--backend vllm: vLLM reasoning parser (deepseek_r1, qwen3, ...) that "
                                          "splits thinking off the answer.", default=None)
    corpus: InputSpec = group(INPUT)
    # The server and how tagging prompts it (LLMTagOptions), holding the fields of `also` too.
    server: LLMTagOptions = group(SERVER, config="llm_tag", also=(
        "mode", "structured", "max_doc_tokens", "max_answer_tokens", "tokenizer", "gate", "request_timeout",
        "records_per_chunk", "reasoning_parser"))
    executor: ExecutorOptions = group(EXECUTOR, default=LOCAL)


@dataclass(frozen=True, kw_only=True)
class DedupJob:
    """Remove exact duplicates (normalized-text hash) and near duplicates (datatrove MinHash) from a corpus or a
    built dataset (in place when OUTPUT is that dataset)."""

    input: str = shared("cleaned_input")
    output: Path = shared("cleaned_output")
    threshold: float = option("Jaccard similarity above which two texts are near duplicates.", default=0.75,
                              min=0.05, max=0.99)
    ngrams: int = option("Word shingle size of MinHash.", default=5, min=1)
    text_key: str | None = option("Field compared (default: question if present, else text).", default=None)
    id_key: str = shared("id_key")
    overwrite: bool = shared("overwrite")
    executor: ExecutorOptions = group(EXECUTOR, default=LOCAL, without=("gpus_per_task",))

    def record(self) -> dict:
        """The parameters of the output claim (those every earlier `curate dedup` recorded)."""
        return {"input": self.input, "threshold": self.threshold, "ngrams": self.ngrams, "text_key": self.text_key,
                "id_key": self.id_key}


@dataclass(frozen=True, kw_only=True)
class DecontamJob:
    """Remove the rows of a corpus or a built dataset that share an n-gram with benchmark items."""

    input: str = shared("cleaned_input")
    against: str = option("Comma-separated benchmarks: built-in names (gsm8k, math500, aqua, mathqa, mmlu_stem, "
                          "arc_challenge, aime24, amc23), files or hf:ORG/NAME@split; '=FIELD+FIELD' picks a source's "
                          "text fields.")
    output: Path = shared("cleaned_output")
    fields: str | None = option("Comma-separated row fields to check (default: question,answer if present, else "
                                "text).", default=None)
    ngrams: int = option("Word n-gram size.", default=13, min=2)
    short_min_words: int = option("A field shorter than --ngrams is matched whole if it has at least this many words "
                                  "(0: never).", default=4, min=0)
    benchmarks_dir: Path | None = option("Local copies of the built-in benchmarks (or $CURATE_BENCHMARKS_DIR).",
                                         default=None)
    id_key: str = shared("id_key")
    overwrite: bool = shared("overwrite")
    executor: ExecutorOptions = group(EXECUTOR, default=LOCAL, without=("gpus_per_task",))

    @property
    def field_list(self) -> list[str] | None:
        return [f.strip() for f in self.fields.split(",") if f.strip()] if self.fields else None

    def record(self) -> dict:
        """The parameters of the output claim (those every earlier `curate decontam` recorded)."""
        return {"input": self.input, "against": self.against, "fields": self.fields, "ngrams": self.ngrams,
                "short_min_words": self.short_min_words,
                "benchmarks_dir": None if self.benchmarks_dir is None else str(self.benchmarks_dir),
                "id_key": self.id_key}


@dataclass(frozen=True, kw_only=True)
class EvalGateJob:
    """Measure a cascade gate: its recall against LLM labels on a sample, and the share of LLM requests it saves."""

    labels: Path = option("LLM tags (e.g. tags/llm_v1) to measure the gate against.")
    gate: str = option("The cheap classifier used as the gate.", default="cues")
    sample: int = option("LLM-labelled documents to sample.", default=2000, min=1)
    seed: int = option("Seed of the sample.", default=0)
    corpus: InputSpec = group(INPUT)


@dataclass(frozen=True, kw_only=True)
class DistillJob:
    """Distil a classifier's labels (attribute shards) into heads on sentence embeddings, trained on the texts of the
    corpus those labels were made from."""

    labels: Path = option("Attribute shards to learn from (e.g. tags/cues_ngram_v1 or tags/llm_v1).")
    output: Path = option("New model directory (heads, thresholds, metrics, PR plot).", "--output", "-o",
                          panel=OUTPUT_PANEL)
    embedding_model: str = option("SentenceTransformer path or name; the default is bundled (offline).",
                                  default=DEFAULT_EMBEDDING_MODEL)
    max_chunks: int = option("Token windows embedded per long document, spread over it.", default=DEFAULT_MAX_CHUNKS,
                             min=1)
    validation: float = option("Share of documents for choosing thresholds.", default=0.15, min=0.05, max=0.45)
    test: float = option("Share of documents held out for the report.", default=0.15, min=0.05, max=0.45)
    min_positives: int = option("Fewer positive (or negative) training labels: no head, and a warning.", default=5,
                                min=1)
    regularization: float = option("Inverse L2 strength C of logistic heads; L2 alpha of MLP heads.", default=1.0,
                                   min=1e-6)
    head: str = option("Head per behavior: logistic (linear) or mlp (one hidden layer of 256).", default="logistic")
    level: str = option("What a head scores: document (whole texts, document labels) or sentence (each unit, labelled "
                        "from the teacher's evidence spans, e.g. spans_v1's).", default="document")
    seed: int = option("Seed of the train/validation/test split.", default=0)
    limit: int = option("Use at most this many labelled documents (-1: all).", default=-1)
    batch_size: int = option("Text windows per embedding batch.", default=64, min=1)
    # The corpus is --texts, required: the one the labels were made from.
    corpus: InputSpec = group(INPUT, texts=True)


@dataclass(frozen=True, kw_only=True)
class StatsJob:
    """Describe attribute shards: prevalence, co-occurrence, count histogram and null rate per behavior."""

    directory: Path = option("Tags root, one classifier's shards, or a built dataset.", argument=True)
    plot: Path | None = option("Also draw prevalence and co-occurrence to this PNG.", default=None, panel=OUTPUT_PANEL)

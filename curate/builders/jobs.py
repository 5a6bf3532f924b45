"""The builders' job configs (see curate.pipelines.jobs): what `curate build`, `curate multihop`, `curate mcqa` (and
their flows) take, and the record of each one's output claim. Light: `--help` reads them; the jobs run in their builder modules."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from curate.behaviors import BEHAVIOR_NAMES
from curate.pipelines.executor_options import LOCAL, ExecutorOptions
from curate.pipelines.jobs import (
    ALLOW_PARTIAL_HELP,
    CLASSIFIER_HELP,
    CLEANING,
    DEVICE_HELP,
    EXECUTOR,
    INPUT,
    OVERWRITE_HELP,
    SAMPLE_GLOB,
    SPLIT_HELP,
    TASKS_HELP,
    VERIFY_INPUTS_HELP,
    WORKERS_HELP,
    group,
    option,
)

if TYPE_CHECKING:  # they import datatrove
    from curate.pipelines.cleaning import Cleaning
    from curate.pipelines.readers import InputSpec


@dataclass(frozen=True, kw_only=True)
class BuildJob:
    """Tag a corpus (reusing finished shards), select documents by behavior, write a dataset with its card."""

    behaviors: str = option(
        "Comma-separated behaviors every document must show, or 'none' for documents with none. "
        f"Names: {', '.join(BEHAVIOR_NAMES)} (aliases: subgoal, backchaining).")
    output: Path | None = option("Dataset directory (default: datasets/BEHAVIORS).", "--output", "-o", default=None)
    tags: Path | None = option("Tags root to reuse across builds (default: OUTPUT/tags).", default=None)
    classifier: str = option(CLASSIFIER_HELP, "--classifier", "-c", default="cues")
    min_count: int = option("Each chosen behavior must occur at least this often.", default=1, min=1)
    exclude_behaviors: str | None = option("Behaviors that must be absent.", default=None)
    limit: int | None = option("Keep at most this many documents (seeded random sample).", default=None, min=1)
    seed: int = option("Seed of the random sample.", default=0)
    tasks: int = option(TASKS_HELP, default=1, min=1)
    workers: int = option(WORKERS_HELP, default=1, min=1)
    license: str = option("License of the source text, for the dataset card.", default="other")
    verify_inputs: bool = option(VERIFY_INPUTS_HELP, "--verify-inputs", default=False)
    allow_partial: bool = option(ALLOW_PARTIAL_HELP, "--allow-partial", default=False)
    overwrite: bool = option(OVERWRITE_HELP, "--overwrite", default=False)
    keep_columns: str | None = option(
        "Comma-separated source fields to carry into the dataset beside id and text (e.g. url,license).", default=None)
    batch_size: int = 64  # documents per classifier call; not a flag of `curate build`, a flow may set it
    corpus: InputSpec = group(INPUT)
    cleaning: Cleaning = group(CLEANING, dedup="Remove exact and MinHash near duplicates from the built dataset.",
                               decontam="Remove rows overlapping these benchmarks (as `curate decontam --against`).")
    executor: ExecutorOptions = group(EXECUTOR, default=LOCAL)

    @property
    def dataset_dir(self) -> Path:
        if self.output is not None:
            return Path(self.output)
        return Path("datasets") / (self.behaviors.replace(",", "+").replace(" ", "") or "none")

    @property
    def sample(self) -> bool:
        """The bundled sample corpus (no --input): recorded as no input, and its card says its own license."""
        return self.corpus.path == SAMPLE_GLOB

    @property
    def kept_columns(self) -> list[str]:
        return [c.strip() for c in self.keep_columns.split(",") if c.strip()] if self.keep_columns else []

    @property
    def tags_inside(self) -> bool:
        """The tags live in OUTPUT/tags (the default): the output claim keeps them when the corpus changed."""
        return self.tags is None or Path(self.tags).resolve() == (self.dataset_dir / "tags").resolve()

    def record(self) -> dict:
        """The parameters of the output claim: what decides the dataset, not how it runs (tasks, workers, executor).
        Its keys are those every earlier `curate build` recorded, so that a rerun finds its dataset up to date."""
        what = {"behaviors": self.behaviors, "input": None if self.sample else self.corpus.path, "tags": self.tags,
                "classifier": self.classifier, "min_count": self.min_count, "exclude_behaviors": self.exclude_behaviors,
                "limit": self.limit, "seed": self.seed, "text_key": self.corpus.text_key, "id_key": self.corpus.id_key,
                "split": self.corpus.split, "streaming": self.corpus.streaming, "license": self.license,
                **self.cleaning.arguments()}
        if self.kept_columns:  # only when given, so that datasets built before the option existed stay up to date
            what["keep_columns"] = self.kept_columns
        return {k: str(v) if isinstance(v, Path) else v for k, v in what.items()}


@dataclass(frozen=True, kw_only=True)
class MultihopJob:
    """Chain verifiable problems so that each answer feeds the next: `full`, `half` and `single` ablation splits."""

    input: str = option("GSM8K-style problems: jsonl/parquet file, glob, or 'hf:ORG/NAME'.", "--input", "-i")
    output: Path = option("Dataset directory.", "--output", "-o")
    hops: str = option("Hops per chain: a number or a range such as 2-4 (drawn uniformly).", default="2-4")
    n: int = option("Chains to build.", "--n", default=5000, min=1)
    seed: int = option("Seed of the chain sampler.", default=0)
    max_ratio: float = option("Every intermediate value must stay within this factor of its original.", default=10.0,
                              min=1.01)
    tries_per_link: int = option("Candidate links tried before a chain is abandoned.", default=64, min=1)
    question_key: str = option("Field holding the problem text.", default="question")
    answer_key: str = option("Field holding the worked solution with <<a=b>> annotations and '#### N'.",
                             default="answer")
    id_key: str = option("Field holding the problem id (becomes each hop's source_id); else file/line.", default="id")
    split: str = option(SPLIT_HELP, default="train")
    license: str = option("License of the source problems, for the dataset card.", default="mit")
    overwrite: bool = option(OVERWRITE_HELP, "--overwrite", default=False)
    cleaning: Cleaning = group(CLEANING, dedup="Remove exact and MinHash near duplicates from the source problems "
                               "before chaining.",
                               decontam="Remove source problems overlapping these benchmarks (as `curate decontam "
                               "--against`).")

    def record(self) -> dict:
        """The parameters of the output claim (those every earlier `curate multihop` and multihop flow recorded)."""
        what = {"input": self.input, "hops": self.hops, "n": self.n, "seed": self.seed, "max_ratio": self.max_ratio,
                "tries_per_link": self.tries_per_link, "question_key": self.question_key,
                "answer_key": self.answer_key, "id_key": self.id_key, "split": self.split, "license": self.license,
                **self.cleaning.arguments()}
        return {k: str(v) if isinstance(v, Path) else v for k, v in what.items()}


@dataclass(frozen=True, kw_only=True)
class McqaJob:
    """Convert multiple-choice items to open-answer questions (optionally reformulated and judged by an LLM)."""

    inputs: list[str] = option("File, directory, glob or hf:NAME[:SPLIT]; repeatable.", "--input", "-i")
    output: Path = option("Dataset directory (data/, rejects/, README.md).", "--output", "-o")
    format: str = option("auto | aqua | mmlu_csv | jsonl | arc | alpaca", "--format", default="auto")
    workers: int = option("Processes checking answers with math-verify.", default=1)
    limit: int = option("Read at most this many records per input (-1: all).", default=-1)
    reformulate: bool = option("LLM rewrite of each kept stem plus an LLM judge (Big-Math); needs --model.",
                               "--reformulate", default=False)
    model: str | None = option("--reformulate: the model (hub name or local dir).", default=None)
    backend: str = option("--reformulate: vllm, endpoint or transformers.", default="transformers")
    endpoint_url: str | None = option("--backend endpoint: base URL; key from CURATE_API_KEY or OPENAI_API_KEY.",
                                      default=None)
    device: str = option(DEVICE_HELP, default="auto")
    max_tokens: int = option("--reformulate: generation budget per rewrite.", default=1024, min=16)
    concurrency: int | None = option("--reformulate: requests in flight.", default=None, min=1)
    overwrite: bool = option(OVERWRITE_HELP, "--overwrite", default=False)
    cleaning: Cleaning = group(CLEANING, dedup="Remove exact and MinHash near duplicates (judged on the question).",
                               decontam="Remove rows whose question overlaps these benchmarks (as `curate decontam "
                               "--against`).")

    @property
    def llm(self) -> dict | None:
        """--reformulate: the LLMOptions fields of the rewriter and judge (greedy), as the command always gave them."""
        if not self.reformulate:
            return None
        return {"model": self.model, "backend": self.backend, "endpoint_url": self.endpoint_url, "device": self.device,
                "max_tokens": self.max_tokens, "temperature": 0.0, "concurrency": self.concurrency}

"""The builders' job configs (see curate.pipelines.jobs): what `curate build`, `curate multihop`, `curate mcqa`,
`curate priming`, `curate cpt` (and their flows) take, and the record of each one's output claim. Light: `--help`
reads them; the jobs run in their builder modules."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from curate.behaviors import BEHAVIOR_NAMES
from curate.options import (
    ALLOW_PARTIAL_HELP,
    CLEANING,
    DEFAULT_MAX_DOC_TOKENS,
    DEFAULT_SERVER,
    EXECUTOR,
    INPUT,
    OUTPUT_PANEL,
    SERVER,
    ServerFields,
    group,
    option,
    shared,
)
from curate.pipelines.executor_options import LOCAL, ExecutorOptions
from curate.pipelines.jobs import SAMPLE_GLOB

if TYPE_CHECKING:  # they import datatrove
    from curate.pipelines.cleaning import Cleaning
    from curate.pipelines.readers import InputSpec


def server_start(server: ServerFields) -> dict:
    """How a job's model server is started (--server-start-timeout, --server-start-retries), as ServerOptions fields:
    only those given, so that the parameters a dataset was claimed with before the options existed still match."""
    given = {"server_start_timeout": server.server_start_timeout, "server_start_retries": server.server_start_retries}
    return {name: value for name, value in given.items() if value is not None}


@dataclass(frozen=True, kw_only=True)
class BuildJob:
    """Tag a corpus (reusing finished shards), select documents by behavior, write a dataset with its card."""

    behaviors: str = option(
        "Comma-separated behaviors every document must show, or 'none' for documents with none. "
        f"Names: {', '.join(BEHAVIOR_NAMES)} (aliases: subgoal, backchaining).")
    output: Path | None = option("Dataset directory (default: datasets/BEHAVIORS).", "--output", "-o", default=None,
                                 panel=OUTPUT_PANEL)
    tags: Path | None = option("Tags root to reuse across builds (default: OUTPUT/tags).", default=None)
    classifier: str = shared("classifier")
    min_count: int = option("Each chosen behavior must occur at least this often.", default=1, min=1)
    exclude_behaviors: str | None = option("Behaviors that must be absent.", default=None)
    limit: int | None = option("Keep at most this many documents (seeded random sample).", default=None, min=1)
    seed: int = option("Seed of the random sample.", default=0)
    license: str = option("License of the source text, for the dataset card.", default="other", panel=OUTPUT_PANEL)
    verify_inputs: bool = shared("verify_inputs")
    allow_partial: bool = option(ALLOW_PARTIAL_HELP, "--allow-partial", default=False)
    overwrite: bool = shared("overwrite")
    keep_columns: str | None = option(
        "Comma-separated source fields to carry into the dataset beside id and text (e.g. url,license).", default=None,
        panel=OUTPUT_PANEL)
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
    output: Path = option("Dataset directory.", "--output", "-o", panel=OUTPUT_PANEL)
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
    split: str = shared("split")
    license: str = option("License of the source problems, for the dataset card.", default="mit", panel=OUTPUT_PANEL)
    overwrite: bool = shared("overwrite")
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
    output: Path = option("Dataset directory (data/, rejects/, README.md).", "--output", "-o", panel=OUTPUT_PANEL)
    format: str = option("auto | aqua | mmlu_csv | jsonl | arc | alpaca", "--format", default="auto")
    workers: int = option("Processes checking answers with math-verify.", default=1, min=1)
    limit: int = option("Read at most this many records per input (-1: all).", default=-1, min=-1)
    reformulate: bool = option("LLM rewrite of each kept stem plus an LLM judge (Big-Math); needs --model.",
                               "--reformulate", default=False)
    model: str | None = option("--reformulate: the model (hub name or local dir).", default=None)
    max_tokens: int = option("--reformulate: generation budget per rewrite.", default=1024, min=16)
    overwrite: bool = shared("overwrite")
    cleaning: Cleaning = group(CLEANING, dedup="Remove exact and MinHash near duplicates (judged on the question).",
                               decontam="Remove rows whose question overlaps these benchmarks (as `curate decontam "
                               "--against`).")
    # The rewriter's and judge's server (its model: `model`).
    server: ServerFields = group(SERVER, default=DEFAULT_SERVER, without=("tp", "dp", "server_args"), help={
        "backend": "--reformulate: vllm, endpoint or transformers.",
        "endpoint_url": "--backend endpoint: base URL; key from CURATE_API_KEY or OPENAI_API_KEY.",
        "concurrency": "--reformulate: requests in flight."})

    @property
    def llm(self) -> dict | None:
        """--reformulate: the LLMOptions fields of the rewriter and judge (greedy), as the command always gave them."""
        if not self.reformulate:
            return None
        server = self.server
        return {"model": self.model, "backend": server.backend, "endpoint_url": server.endpoint_url,
                "device": server.device, "max_tokens": self.max_tokens, "temperature": 0.0,
                "concurrency": server.concurrency, **server_start(server)}


# The priming check is the cue engine, not `cues` (cues_ngram_v1): the symbolic writer's templates were written
# against the cue rules, and the head reads a backward step whose yield is then built ("so 77, 72 would have to make
# 17") as a subgoal too, as the blind guide's round-12 rule does, so it refuses every backtracking_backward trace.
PRIMING_CHECK = "cues_v11"


@dataclass(frozen=True, kw_only=True)
class PrimingJob:
    """Countdown priming datasets: behavior-controlled traces, checked by a classifier, one dataset per variant.

    A preset sets numbers, number_range and target_range where they were not given: builders.priming.resolve_preset
    applies it with the names of those given (typed on the command line, set in a flow's parameters)."""

    variant: str = option("all_strategies, only_backtracking, backtracking_verification, backtracking_subgoal, "
                          "backtracking_backward, negative_control, empty_cot, placeholder_cot; a comma list or 'all' "
                          "builds each into OUTPUT/VARIANT.")
    output: Path = option("Dataset directory.", "--output", "-o", panel=OUTPUT_PANEL)
    answers: str = option("correct; incorrect (well-formed expressions with a wrong value, from natural failures); any "
                          "(the search's own accuracy, as the reference's main sets).", default="correct")
    n: int = option("Training rows.", "--n", default=1000, min=0)
    test_n: int = option("Test rows (no problem is in both splits).", default=100, min=0)
    writer: str = option("symbolic (the solver's search narrated) or llm (a teacher model).", default="symbolic")
    classifier: str = shared("classifier", default=PRIMING_CHECK)
    numbers: str = option("Numbers per problem (2-6); a comma list mixes sizes, e.g. 3,4.", default="4")
    number_range: str = option("LOW,HIGH of the numbers.", default="1,99")
    target_range: str = option("LOW,HIGH of the target.", default="10,100")
    preset: str | None = option("tinyzero: the reference study's problems (3 or 4 numbers in 1-100, targets 10-100); "
                                "--numbers/--number-range/--target-range given explicitly override it.", default=None)
    fractional_division: bool = option("Allow divisions with a fractional result.", default=False)
    format_score: float = option("Countdown reward of a well-formed wrong equation, carried by every row (verl "
                                 "extra_info.format_score); TinyZero's runs use 0.1.", default=0.0, min=0.0)
    max_dead_ends: int = option("Most dead ends a backtracking trace narrates.", default=3, min=1)
    tokenizer: str | None = option("Tokenizer (hub name or local dir) for placeholder_cot lengths and token "
                                   "statistics.", default=None)
    placeholder_for: str = option("Variant whose trace length placeholder_cot matches.", default="all_strategies")
    seed: int = option("Seed of problems and phrasing.", default=0)
    model: str | None = option("--writer llm: the teacher model (hub name or local dir).", default=None)
    temperature: float = option("--writer llm: sampling temperature of the teacher.", default=0.7, min=0)
    max_trace_tokens: int = option("--writer llm: generation budget per trace.", default=2048, min=16)
    judge_model: str | None = option("Also judge every written trace with this model (LLM judge, Countdown prompt with "
                                     "the numbers and target; served by --backend/--endpoint-url/--device): the card "
                                     "reports its acceptance beside the classifier's.", default=None)
    overwrite: bool = shared("overwrite")
    # --writer llm: problems sent per missing row in one job, since each job starts a server; not a flag of `curate
    # priming`, a flow may set it
    llm_oversample: float = 2.0
    cleaning: Cleaning = group(CLEANING, dedup="Remove exact and MinHash near duplicates (judged on the completion).",
                               decontam="Remove rows whose question or completion overlaps these benchmarks (as "
                               "`curate decontam --against`).")
    # The teacher's server (its model: `model`), which the judge (`judge_model`) runs on too.
    server: ServerFields = group(SERVER, default=DEFAULT_SERVER, without=("tp", "dp", "server_args"), help={
        "backend": "--writer llm / --judge-model: vllm, endpoint or transformers.",
        "endpoint_url": "--backend endpoint: base URL; key from CURATE_API_KEY or OPENAI_API_KEY.",
        "concurrency": "--writer llm / --judge-model: requests in flight."})

    @property
    def llm(self) -> dict | None:
        """--writer llm: the LLMOptions fields of the teacher, as the command always gave them."""
        if self.writer != "llm":
            return None
        server = self.server
        return {"model": self.model, "backend": server.backend, "endpoint_url": server.endpoint_url,
                "device": server.device, "temperature": self.temperature, "max_tokens": self.max_trace_tokens,
                "concurrency": server.concurrency, **server_start(server)}

    @property
    def judge(self) -> dict | None:
        """--judge-model: the JudgeOptions fields of the judge, on the writer's server settings."""
        if not self.judge_model:
            return None
        server = self.server
        return {"model": self.judge_model, "backend": server.backend, "endpoint_url": server.endpoint_url,
                "device": server.device, "concurrency": server.concurrency, **server_start(server)}


# cpt's LLM jobs run at tp 1 unless given, not at the GPUs per task: their checkpoints record it, and a run resumed
# after an upgrade must find its own.
CPT_SERVER = ServerFields(tp=1)


@dataclass(frozen=True, kw_only=True)
class CPTJob:
    """Behavior-enriched and behavior-minimized CPT sets at one matched token budget, with cards and exports."""

    tags: Path = option("One classifier's attribute shards (e.g. tags/cues_ngram_v1).")
    tokens: str = option("Token budget of each set, e.g. 8.3M.")
    tokenizer: str = option("Tokenizer (path or hub name) that counts and packs the tokens.")
    output: Path = option("Output folder: enriched/, minimized/, exports/.", "--output", "-o", panel=OUTPUT_PANEL)
    behaviors: str = option("Chosen behaviors (comma-separated).", default=",".join(BEHAVIOR_NAMES))
    min_behaviors: int = option("Enriched: at least k chosen behaviors.", "--min-behaviors", "-k", default=1, min=1)
    min_count: int = option("A behavior counts as shown from this many instances.", default=1, min=1)
    seed: int = option("Seed of the random sample.", default=0)
    tolerance: float = option("Allowed relative gap of each token total to the budget.", default=0.01)
    length_bins: int = option("Length strata for matching the two length distributions.", default=10, min=1)
    length_match: str = option("best: both sets at the full budget, lengths matched as closely as both pools allow "
                               "(residual KS and pool use on the card); strict: cut both pools to their common length "
                               "range and refuse when it holds too few tokens (old name: common); range: the cut only; "
                               "none: stratified filling only.", default="best")
    length_trim: float = option("Quantile trimmed off each end of each pool before the common length range is taken.",
                                default=0.025, min=0.0, max=0.49)
    oversample: float = option("Candidates read into each pool, as a multiple of the budget (at the most characters a "
                               "token takes): more gives the matching more to choose from.", default=2.0, min=1.0)
    domain_key: str | None = option("Tag column or corpus field to match the domain mix on (default: a `domain` tag "
                                    "column where there is one).", default=None)
    rewrite: bool = option("Rewrite both sets as question / thoughts / answer.", "--rewrite", default=False)
    rewrite_oversample: float = option("--rewrite: source tokens rewritten first, as a multiple of the budget (the set "
                                       "plus more of its pool); later rounds rewrite what the kept rewrites still "
                                       "lack, so that both rewritten sets are matched at the budget.", default=1.25,
                                       min=1.0)
    require_solution: bool = option("Keep only documents that state a problem and work out its solution (judged by "
                                    "--solution-judge); the others are rejected with their reason.",
                                    "--require-solution", default=False)
    solution_judge: str = option("--require-solution: cues (a CPU rule) or llm (the is_solution prompt on --model / "
                                 "--backend, the server --rewrite uses).", default="cues")
    model: str | None = option("--rewrite / --solution-judge llm: the model (path or name).", default=None)
    max_doc_tokens: int = option("--rewrite: documents cut to this many model tokens.",
                                 default=DEFAULT_MAX_DOC_TOKENS, min=16)
    max_new_tokens: int = option("--rewrite: generation limit per document.", default=4096, min=1)
    pack_length: int = option("Tokens per packed sequence.", default=4096, min=2)
    pack_format: str = option("Packed sequences as parquet or memmap (tokens.bin).", default="parquet")
    license: str = option("License of the source text, for the cards.", default="other", panel=OUTPUT_PANEL)
    # The executor's GPUs, with cpt's own help (the corpus pass takes none): the command line hands it to the
    # executor too, and the job runs on `runs_on`, the executor with these GPUs.
    gpus_per_task: int = option("--rewrite: GPUs per model server (ray and slurm reserve them; local gives each task "
                                "its own). The corpus pass uses none.", default=0, min=0)
    overwrite: bool = shared("overwrite")
    export: bool = True  # write OUTPUT/exports/ (packed sequences); not a flag of `curate cpt`, a flow may skip it
    corpus: InputSpec = group(INPUT, texts=True)
    cleaning: Cleaning = group(CLEANING, dedup="Remove exact and near duplicates from the candidates first.",
                               decontam="Remove candidates overlapping these benchmarks.")
    # The server of the LLM jobs (the rewrite, the solution judge; its model: `model`).
    server: ServerFields = group(SERVER, default=CPT_SERVER, without=("device", "server_args"), help={
        "backend": "--rewrite: vllm, endpoint or transformers.",
        "endpoint_url": "--backend endpoint: base URL; key from CURATE_API_KEY.",
        "tp": "--backend vllm: tensor parallel size.",
        "dp": "--backend vllm: data parallel size.",
        "concurrency": "--rewrite: requests in flight."})
    executor: ExecutorOptions = group(EXECUTOR, default=LOCAL)

    @property
    def llm(self) -> dict:
        """The server fields of the LLM jobs (RewriteOptions, SolutionJudgeOptions), as the command always gave them."""
        server = self.server
        return {"model": self.model, "backend": server.backend, "endpoint_url": server.endpoint_url,
                "max_doc_tokens": self.max_doc_tokens, "tp": server.tp, "dp": server.dp,
                "concurrency": server.concurrency, **server_start(server)}

    @property
    def runs_on(self) -> ExecutorOptions:
        """The executor, with the job's GPUs per task (a flow's executor parameter need not repeat them)."""
        return dataclasses.replace(self.executor, gpus_per_task=self.gpus_per_task)

    def record(self) -> dict:
        """The parameters of the output claim: those every earlier `curate cpt` recorded (the cpt flow recorded its
        own until this job; a dataset either wrote is claimed under these keys now)."""
        what = {"tags": self.tags, "texts": self.corpus.path, "tokens": self.tokens, "tokenizer": self.tokenizer,
                "behaviors": self.behaviors, "min_behaviors": self.min_behaviors, "min_count": self.min_count,
                "seed": self.seed, "tolerance": self.tolerance, "length_bins": self.length_bins,
                "length_match": self.length_match, "length_trim": self.length_trim, "oversample": self.oversample,
                "domain_key": self.domain_key, "text_key": self.corpus.text_key, "id_key": self.corpus.id_key,
                "split": self.corpus.split, **self.cleaning.arguments(), "rewrite": self.rewrite, "model": self.model,
                "max_doc_tokens": self.max_doc_tokens, "max_new_tokens": self.max_new_tokens,
                "pack_length": self.pack_length, "rewrite_oversample": self.rewrite_oversample,
                "require_solution": self.require_solution, "solution_judge": self.solution_judge,
                "pack_format": self.pack_format, "license": self.license}
        if not self.export:  # only when skipped, so that the command's datasets (always exported) stay up to date
            what["export"] = False
        return {k: str(v) if isinstance(v, Path) else v for k, v in what.items()}

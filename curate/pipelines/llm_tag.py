"""LLM tagging on datatrove's InferenceRunner: corpus -> [cue gate] -> model server -> attribute shards.

Backends: `vllm` (InferenceRunner spawns `vllm serve`, tp/dp), `endpoint` (any OpenAI-compatible
URL; key from CURATE_API_KEY or OPENAI_API_KEY), `transformers` (spawns `transformers serve MODEL`,
for CPU or a small GPU). Shards go to TAGS/<llm_v1|cascade_v1>/ with the same manifest and task
bookkeeping as `run_tagging`, so `curate build --tags TAGS --classifier llm` selects from them.

Resume: finished chunks are final parquet files; documents of the unfinished chunk are replayed
from the local checkpoint, and requests already answered come from datatrove's request cache.

Scale: the pipeline runs on any executor of executors.py (local, Ray, Slurm). Every datatrove task
starts its own server (InferenceRunner does, per rank, on a port derived from the rank);
`gpus_per_task` gives each task's server its own GPUs, and vLLM's tensor parallelism defaults to it.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path

import pyarrow as pa
from datatrove.data import DocumentsPipeline
from datatrove.pipeline.base import PipelineStep
from datatrove.pipeline.inference.run_inference import InferenceConfig, InferenceRunner
from datatrove.pipeline.inference.servers import CustomServer, InferenceServer
from datatrove.pipeline.inference.servers.base import ServerError
from datatrove.pipeline.inference.types import InferenceError
from datatrove.pipeline.writers.parquet import ParquetWriter

from curate.behaviors import BEHAVIOR_NAMES
from curate.classifiers.cascade import GATED_OUT, ROUTE_LLM, CascadeClassifier, gate_passes
from curate.classifiers.llm import DEFAULT_MAX_DOC_TOKENS, LLMClassifier
from curate.errors import CurateError
from curate.pipelines.executors import LOCAL, ExecutorOptions, run_pipeline
from curate.pipelines.readers import InputSpec, make_reader
from curate.pipelines.steps import AtomicOutput, SplitRejects, batched
from curate.pipelines.tag import TagResult, check_manifest, failed_tasks, recorded_tasks, report_duplicate_ids
from curate.schema import ATTRIBUTE_SCHEMA, Labels, attribute_row

BACKENDS = ("vllm", "endpoint", "transformers")
API_KEY_VARIABLES = ("CURATE_API_KEY", "OPENAI_API_KEY")
GATE_KEY = "curate_gate"
RESULTS_KEY = "curate_llm"
LLM_CONFIG = "llm_config.json"
DEFAULT_CONCURRENCY = {"vllm": 256, "endpoint": 32, "transformers": 4}
# One start attempt: spawning the server (on a retry, waiting for another task's first start) and then until it
# answers. A real model's first vLLM start (weights from a network disk, torch.compile, CUDA graphs) takes minutes.
DEFAULT_START_TIMEOUT = {"vllm": 1800.0, "endpoint": 300.0, "transformers": 600.0}
DEFAULT_START_RETRIES = {"vllm": 2, "endpoint": 1, "transformers": 1}

LLM_ATTRIBUTE_SCHEMA = pa.schema(
    [
        *ATTRIBUTE_SCHEMA,
        ("route", pa.string()),
        ("truncated", pa.bool_()),
        ("doc_tokens", pa.int32()),
        ("prompt_tokens", pa.int64()),
        ("completion_tokens", pa.int64()),
        (
            "llm_answers",
            pa.list_(pa.struct([("question", pa.string()), ("answer", pa.string()), ("finish_reason", pa.string())])),
        ),
    ]
)


class LLMTagConfigError(CurateError, ValueError):
    pass


@dataclass
class LLMTagOptions:
    model: str
    backend: str = "transformers"
    mode: str = "per-behavior"
    structured: bool = False
    max_doc_tokens: int = DEFAULT_MAX_DOC_TOKENS
    tokenizer: str | None = None
    max_answer_tokens: int | None = None
    endpoint_url: str | None = None
    tp: int | None = None  # None: the GPUs per task for vllm, else 1
    dp: int = 1
    server_args: dict = field(default_factory=dict)
    concurrency: int | None = None
    request_timeout: float = 300.0
    records_per_chunk: int = 500
    gate: str | None = None  # set: cascade_v1 with this gate classifier
    device: str = "auto"  # transformers backend only
    chat_template_kwargs: dict | None = None  # None: the model family's default (Qwen3: thinking off), else {}
    reasoning_parser: str | None = None  # vllm only: the server splits <think> off into `reasoning`
    max_model_len: int | None = None  # the server's context; None: max_doc_tokens + 1024 (tag-llm sets its budget)
    server_start_timeout: float | None = None  # seconds per start attempt; None: DEFAULT_START_TIMEOUT
    server_start_retries: int | None = None  # None: DEFAULT_START_RETRIES

    def template_kwargs(self) -> dict:
        from curate.classifiers.llm import default_chat_template_kwargs

        if self.chat_template_kwargs is not None:
            return dict(self.chat_template_kwargs)
        return default_chat_template_kwargs(self.tokenizer or self.model)

    def classifier(self):
        llm_options = dict(mode=self.mode, structured=self.structured, max_doc_tokens=self.max_doc_tokens, tokenizer=self.tokenizer,
                           max_answer_tokens=self.max_answer_tokens, chat_template_kwargs=self.template_kwargs())
        if self.gate:
            return CascadeClassifier(self.model, gate=self.gate, **llm_options)
        return LLMClassifier(self.model, **llm_options)

    def tensor_parallel(self, gpus_per_task: int = 0) -> int:
        if self.tp is not None:
            return self.tp
        return gpus_per_task if self.backend == "vllm" and gpus_per_task else 1

    def validate(self, gpus_per_task: int = 0) -> None:
        if self.backend not in BACKENDS:
            raise LLMTagConfigError(f"unknown backend {self.backend!r}; choose one of {', '.join(BACKENDS)}")
        if self.backend == "endpoint" and not self.endpoint_url:
            raise LLMTagConfigError("--backend endpoint needs --endpoint-url (an OpenAI-compatible base URL ending in /v1)")
        if self.backend != "endpoint" and self.endpoint_url:
            raise LLMTagConfigError("--endpoint-url only applies to --backend endpoint")
        if self.backend == "transformers" and shutil.which("transformers", path=_bin_path()) is None:
            raise LLMTagConfigError("--backend transformers needs `transformers serve`: pip install 'curate[serve]'")
        if self.backend == "endpoint" and gpus_per_task:
            raise LLMTagConfigError("--gpus-per-task applies to servers this job starts (vllm, transformers); "
                                    "an endpoint's GPUs are its own")
        parallel = self.tensor_parallel(gpus_per_task) * self.dp
        if self.backend == "vllm" and gpus_per_task and parallel != gpus_per_task:
            raise LLMTagConfigError(
                f"--tp {self.tensor_parallel(gpus_per_task)} x --dp {self.dp} = {parallel} GPUs per server, but each task "
                f"gets --gpus-per-task {gpus_per_task}; make them equal (--tp defaults to --gpus-per-task)"
            )
        if self.reasoning_parser and self.backend != "vllm":
            raise LLMTagConfigError("--reasoning-parser is a flag of `vllm serve`; it applies to --backend vllm only")
        if self.backend == "vllm":
            from curate.pipelines.vllm_serve import VLLMSetupError, check_vllm, reasoning_flags

            try:
                _, version = check_vllm()
                if self.reasoning_parser:
                    reasoning_flags(self.reasoning_parser, version)
            except VLLMSetupError as error:
                raise LLMTagConfigError(str(error)) from None


def _bin_path() -> str:
    return os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])


def context_budget(llm: LLMClassifier, options: LLMTagOptions) -> int:
    """The server context a tagging run needs: document + measured prompt + answer, checked against the model's
    own limit where its config is readable here."""
    from curate.classifiers.llm import model_context_limit

    overhead = llm.prompt_overhead()
    budget = llm.truncator.max_tokens + overhead + llm.max_answer_tokens
    limit = model_context_limit(options.model)
    if limit is not None and budget > limit:
        raise LLMTagConfigError(
            f"a request needs up to {budget:,} tokens (--max-doc-tokens {llm.truncator.max_tokens:,} + prompt "
            f"{overhead:,} + --max-answer-tokens {llm.max_answer_tokens:,}), but {options.model} takes at most "
            f"{limit:,}; lower --max-doc-tokens or --max-answer-tokens")
    return budget


# --------------------------------------------------------------------------------------------- #
# Servers
# --------------------------------------------------------------------------------------------- #
class TransformersServer(CustomServer):
    """`transformers serve MODEL` as a local OpenAI-compatible server; CustomServer's log-watching
    health monitor applies unchanged, only the command differs."""

    def __init__(self, config: InferenceConfig, rank: int):
        InferenceServer.__init__(self, config, rank)

    async def start_server(self) -> asyncio.subprocess.Process:
        options = dict(self.config.model_kwargs or {})
        cmd = [
            shutil.which("transformers", path=_bin_path()) or "transformers",
            "serve", self.config.model_name_or_path,
            "--host", "127.0.0.1", "--port", str(self._port), "--log-level", "info",
        ]
        for key, value in options.items():
            cmd += [f"--{key}"] if value is True else [f"--no-{key}"] if value is False else [f"--{key}", str(value)]
        return await asyncio.create_subprocess_exec(*cmd, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)

    def get_base_url(self) -> str:
        return f"http://127.0.0.1:{self._port}"


class CurateInferenceRunner(InferenceRunner):
    """InferenceRunner plus the `transformers` server, a per-request timeout for local servers, bounded
    retries on HTTP 500 and an API key read from the environment inside the worker (so it is never
    part of the pipeline description datatrove writes to executor.json)."""

    def _init_server(self, rank: int) -> InferenceServer:
        from curate.pipelines.vllm_serve import CurateVLLMServer

        if self.config.server_type == "endpoint" and self.config.api_key is None:
            self.config.api_key = next((os.environ[v] for v in API_KEY_VARIABLES if os.environ.get(v)), None)
        if self.config.server_type == "transformers":
            server = TransformersServer(self.config, rank)
        elif self.config.server_type == "vllm":
            server = CurateVLLMServer(self.config, rank)
        else:
            server = super()._init_server(rank)
        make_request, timeout = server._make_request, self.config.request_timeout

        async def bounded_request(payload: dict) -> dict:
            try:
                return await asyncio.wait_for(make_request(payload), timeout=timeout)
            except ServerError as error:
                # datatrove treats a 500 as fatal; a server that answered is alive, so this becomes a
                # ConnectionError that _send_request retries (6 attempts, exponential backoff).
                raise ConnectionError(str(error)) from error

        server._make_request = bounded_request
        return server


def inference_config(options: LLMTagOptions, log_folder: str, gpus_per_task: int = 0) -> InferenceConfig:
    server_type = options.backend
    concurrency = options.concurrency or DEFAULT_CONCURRENCY[options.backend]
    model_kwargs = dict(options.server_args)
    if options.backend == "transformers" and "device" not in model_kwargs:
        model_kwargs["device"] = options.device
    if options.backend == "vllm" and options.reasoning_parser:
        from curate.pipelines.vllm_serve import check_vllm, reasoning_flags

        model_kwargs.update(reasoning_flags(options.reasoning_parser, check_vllm()[1]))
    local = options.backend == "transformers"
    timeout = options.server_start_timeout or DEFAULT_START_TIMEOUT[options.backend]
    ready_delay = 0.5 if local else 5.0
    retries = options.server_start_retries
    return InferenceConfig(
        server_type=server_type,
        model_name_or_path=options.model,
        # tag-llm passes its measured budget (document + prompt + answer); other callers size max_doc_tokens so
        # that 1024 more tokens hold their prompt and answer.
        model_max_context=options.max_model_len or options.max_doc_tokens + 1024,
        endpoint_url=options.endpoint_url,
        tp=options.tensor_parallel(gpus_per_task),
        dp=options.dp,
        max_concurrent_generations=concurrency,
        request_timeout=options.request_timeout,
        model_kwargs=model_kwargs or None,
        server_log_folder=log_folder,
        metric_interval=60,
        server_start_timeout_sec=timeout,
        server_ready_delay_sec=ready_delay,
        server_ready_max_attempts=max(1, int(timeout / ready_delay)),
        server_start_max_retries=DEFAULT_START_RETRIES[options.backend] if retries is None else retries,
    )


# --------------------------------------------------------------------------------------------- #
# Steps
# --------------------------------------------------------------------------------------------- #
class GateDocuments(PipelineStep):
    """Runs the cheap gate over batches and records its verdict and labels in the metadata."""

    name = "🚦 Gate"
    type = "🏷 - TAGGER"

    def __init__(self, gate: str, batch_size: int = 64):
        super().__init__()
        self.gate = gate
        self.batch_size = batch_size

    def run(self, data: DocumentsPipeline, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        from curate.classifiers import get_classifier

        gate = get_classifier(self.gate)
        for batch in batched(data, self.batch_size):
            labels = gate.classify([d.text for d in batch])
            for document, label in zip(batch, labels, strict=True):
                passed = gate_passes(label)
                document.metadata[GATE_KEY] = {"name": gate.name, "passed": passed}
                self.stat_update("to_llm" if passed else "gated_out")
                yield document


class Meter:
    """Live throughput for the progress bar of one task (rollouts run on one event loop)."""

    def __init__(self, progress: bool):
        from tqdm import tqdm

        self.started = time.perf_counter()
        self.requests = self.prompt_tokens = self.completion_tokens = self.parse_failures = self.documents = 0
        self.bar = tqdm(desc="LLM tagging", unit="doc", disable=not progress, dynamic_ncols=True)

    def add(self, requests: int, prompt_tokens: int, completion_tokens: int, parse_failed: bool) -> None:
        self.documents += 1
        self.requests += requests
        self.prompt_tokens += prompt_tokens
        self.completion_tokens += completion_tokens
        self.parse_failures += parse_failed
        seconds = max(time.perf_counter() - self.started, 1e-9)
        self.bar.set_postfix_str(
            f"{self.requests / seconds:.1f} req/s, prompt {self.prompt_tokens / seconds:,.0f} tok/s, "
            f"gen {self.completion_tokens / seconds:,.0f} tok/s, parse fail {100 * self.parse_failures / self.documents:.1f} %",
            refresh=False,
        )
        self.bar.update(1)


@contextmanager
def rollout_context(classifier, progress: bool):
    """Built inside each worker: a progress bar does not travel between processes."""
    meter = Meter(progress)
    try:
        yield {"classifier": classifier, "meter": meter}
    finally:
        meter.bar.close()


async def llm_rollout(document, generate, classifier, meter: Meter) -> dict:
    """One document: its requests, sent concurrently so a server can share their prefix; always a row."""
    gate = document.metadata.get(GATE_KEY)
    if gate is not None and not gate["passed"]:
        meter.add(0, 0, 0, False)
        return {"route": f"{GATED_OUT}:{gate['name']}", "counts": {b: 0 for b in BEHAVIOR_NAMES}, "error": None,
                "answers": [], "truncated": False, "doc_tokens": None, "prompt_tokens": 0, "completion_tokens": 0}
    llm = classifier.llm if isinstance(classifier, CascadeClassifier) else classifier
    try:
        requests, truncated, doc_tokens = await asyncio.to_thread(llm.requests, document.text)
    except Exception as error:  # a document the tokenizer cannot handle is kept with its reason
        meter.add(0, 0, 0, False)
        return {"route": ROUTE_LLM, "counts": {b: None for b in BEHAVIOR_NAMES}, "error": f"tokenize: {type(error).__name__}: {error}",
                "answers": [], "truncated": False, "doc_tokens": None, "prompt_tokens": 0, "completion_tokens": 0}
    results = await asyncio.gather(*(generate(payload) for _, payload in requests), return_exceptions=True)
    answers, texts, failures = [], {}, []
    prompt_tokens = completion_tokens = 0
    for (key, _), result in zip(requests, results):
        if isinstance(result, (ServerError, asyncio.CancelledError)):
            raise result  # the server is gone: the task fails and a rerun resumes from the checkpoint
        if isinstance(result, BaseException):
            message = result.error if isinstance(result, InferenceError) else result
            failures.append(f"{key}: {type(result).__name__}: {str(message)[:300]}")
            answers.append({"question": key, "answer": None, "finish_reason": "error"})
            continue
        text = result.text
        if not text.strip() and getattr(result, "reasoning", ""):
            text = "<think>" + result.reasoning  # a reasoning parser split off thinking that never ended
        texts[key] = text
        answers.append({"question": key, "answer": text, "finish_reason": result.finish_reason})
        prompt_tokens += int(result.usage.get("prompt_tokens") or 0)
        completion_tokens += int(result.usage.get("completion_tokens") or 0)
    labels = _labels(llm, texts, failures)
    meter.add(len(requests), prompt_tokens, completion_tokens, bool(labels.error and "parse:" in labels.error))
    return {"route": ROUTE_LLM, "counts": labels.counts, "error": labels.error, "answers": answers, "truncated": truncated,
            "doc_tokens": doc_tokens, "prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens}


def _labels(llm: LLMClassifier, texts: dict[str, str], failures: list[str]) -> Labels:
    from curate.classifiers.llm import labels_from_answers

    labels = labels_from_answers(texts)
    if failures:
        labels.error = "; ".join(filter(None, ["request: " + "; ".join(failures), labels.error]))
    return labels


class LLMAttributeWriter(AtomicOutput, ParquetWriter):
    """Attribute rows plus audit columns, one parquet file per checkpoint chunk, each written as
    NAME.partial and renamed when its chunk closes (InferenceRunner closes chunks one by one)."""

    name = "📒 LLM attributes"

    def __init__(self, output_folder: str, classifier: str, model: str, prompt_version: str):
        super().__init__(
            output_folder,
            output_filename="attributes_${rank}_${chunk_index}.parquet",
            adapter=self._row,
            schema=LLM_ATTRIBUTE_SCHEMA,
            use_content_defined_chunking=False,
            max_file_size=-1,  # one file per chunk: a file-id prefix would break the chunk-wise rename
        )
        self.classifier, self.model, self.prompt_version = classifier, model, prompt_version

    def _row(self, _writer, document) -> dict:
        result = document.metadata[RESULTS_KEY][0]
        labels = Labels(counts=result["counts"], error=result["error"])
        row = attribute_row(document.id, len(document.text), labels, self.classifier, self.model, self.prompt_version,
                            source=document.metadata.get("source"))
        row.update(
            route=result["route"], truncated=result["truncated"], doc_tokens=result["doc_tokens"],
            prompt_tokens=result["prompt_tokens"], completion_tokens=result["completion_tokens"], llm_answers=result["answers"],
        )
        return row



# --------------------------------------------------------------------------------------------- #
# The job
# --------------------------------------------------------------------------------------------- #
@dataclass
class LLMTagResult(TagResult):
    seconds: float = 0.0
    documents: int = 0
    llm_documents: int = 0
    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    parse_failures: int = 0
    request_failures: int = 0

    def rates(self) -> dict[str, float]:
        s = max(self.seconds, 1e-9)
        return {
            "documents/s": self.documents / s,
            "requests/s": self.requests / s,
            "prompt tokens/s": self.prompt_tokens / s,
            "generated tokens/s": self.completion_tokens / s,
            "parse-failure rate": self.parse_failures / self.llm_documents if self.llm_documents else 0.0,
        }


def run_llm_tagging(
    spec: InputSpec,
    tags_root: str | Path,
    options: LLMTagOptions,
    tasks: int = 1,
    workers: int = 1,
    limit: int = -1,
    progress: bool = True,
    executor: ExecutorOptions | None = None,
) -> LLMTagResult:
    """Tag on `executor` (default: this machine). Slurm raises JobSubmitted once the array is submitted;
    rerun the same call when it has finished to get the summary."""
    executor = executor or LOCAL
    executor.validate()
    options.validate(executor.gpus_per_task)
    classifier = options.classifier()
    name = classifier.name
    llm = classifier.llm if options.gate else classifier
    out = Path(tags_root) / name
    # Ray workers start in their own working directory: every path a worker opens is absolute.
    root = out.resolve()
    # The manifest has run_tagging's exact shape so that `curate build --classifier llm` reuses these shards.
    check_manifest(out, {"classifier": name, "classifier_argument": None, **spec.fingerprint(), "limit": limit})
    _check_llm_config(out, {
        "model": options.model, "mode": options.mode, "structured": options.structured,
        "max_doc_tokens": options.max_doc_tokens, "max_answer_tokens": llm.max_answer_tokens, "tokenizer": options.tokenizer or options.model,
        "prompt_version": classifier.prompt_version, "gate": classifier.gate_name if options.gate else None,
        # Recorded only when set, so that tags made before the option existed still match.
        **({"chat_template_kwargs": llm.chat_template_kwargs} if llm.chat_template_kwargs else {}),
    })
    # Load the tokenizer now: a wrong model name fails here with a clear message, not in a worker.
    llm.truncator.tokenizer
    if options.max_model_len is None:
        options = replace(options, max_model_len=context_budget(llm, options))
    runner = CurateInferenceRunner(
        rollout_fn=llm_rollout,
        config=inference_config(options, str(root / "_logs" / "server"), executor.gpus_per_task),
        output_writer=LLMAttributeWriter(str(root), name, options.model, classifier.prompt_version),
        shared_context=partial(rollout_context, classifier, progress),
        checkpoints_local_dir=str(root / "_checkpoints"),
        records_per_chunk=options.records_per_chunk,
        metadata_key=RESULTS_KEY,
        # Rollouts turn request errors into null rows themselves; this only guards the rest.
        skip_bad_requests=True,
    )
    tasks = recorded_tasks(out / "_logs", tasks)
    pipeline = [make_reader(spec, progress=False, limit=limit), SplitRejects(str(root / "rejects"))]
    if options.gate:
        pipeline.append(GateDocuments(options.gate))
    pipeline.append(runner)
    started = time.perf_counter()
    run_pipeline(pipeline, executor, tasks, workers, out / "_logs", job_name=f"curate-tag-{name}")
    failed = failed_tasks(out / "_logs", tasks)
    if failed:
        raise RuntimeError(
            f"{len(failed)} of {tasks} LLM tagging tasks did not complete (ranks {failed[:10]}); "
            f"see {out / '_logs' / 'logs'}. Rerun the same command to resume from the checkpoints."
        )
    report_duplicate_ids(out)
    return summarize(out, time.perf_counter() - started)


def summarize(out: Path, seconds: float) -> LLMTagResult:
    import duckdb

    files = sorted(str(p) for p in out.glob("attributes_*.parquet"))
    result = LLMTagResult(tags_dir=out, rejects_dir=out / "rejects", classifier=out.name, seconds=seconds)
    if not files:
        return result
    row = duckdb.connect().sql(
        """SELECT count(*), count(*) FILTER (route = 'llm'), coalesce(sum(len(llm_answers)) FILTER (route = 'llm'), 0),
                  coalesce(sum(prompt_tokens), 0), coalesce(sum(completion_tokens), 0),
                  count(*) FILTER (error LIKE '%parse:%'), count(*) FILTER (error LIKE 'request:%')
           FROM read_parquet($files)""",
        params={"files": files},
    ).fetchall()[0]
    (result.documents, result.llm_documents, result.requests, result.prompt_tokens, result.completion_tokens,
     result.parse_failures, result.request_failures) = (int(v) for v in row)
    return result


def _check_llm_config(out: Path, config: dict) -> None:
    path = out / LLM_CONFIG
    if path.exists():
        existing = json.loads(path.read_text())
        if existing != config:
            raise LLMTagConfigError(
                f"{out} holds LLM tags made with another configuration:\n  there: {json.dumps(existing)}\n"
                f"  now:   {json.dumps(config)}\nPass another --output, or delete that directory to re-tag."
            )
        return
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(config, indent=2))
    tmp.replace(path)


# --------------------------------------------------------------------------------------------- #
# Gate evaluation
# --------------------------------------------------------------------------------------------- #
def evaluate_gate(spec: InputSpec, llm_tags: str | Path, gate: str = "cues", sample: int = 2000, seed: int = 0):
    """The gate's recall against LLM labels on a seeded sample of labelled documents, and the share
    of LLM requests it saves. Only rows the LLM actually labelled (route 'llm') count."""
    import duckdb

    from curate.classifiers import get_classifier
    from curate.classifiers.cascade import gate_report
    from curate.pipelines.query import parquet_files

    files = [f for f in parquet_files(llm_tags) if not Path(f).name.startswith("selection")]
    if not files:
        raise FileNotFoundError(f"no LLM attribute shards under {llm_tags}; run `curate tag-llm` first")
    connection = duckdb.connect()
    columns = {r[0] for r in connection.sql("DESCRIBE SELECT * FROM read_parquet($f, union_by_name=true)", params={"f": files}).fetchall()}
    route_filter = "WHERE route = 'llm'" if "route" in columns else ""
    rows = connection.sql(
        f"SELECT id, {', '.join(BEHAVIOR_NAMES)} FROM read_parquet($f, union_by_name=true) {route_filter} "
        f"USING SAMPLE reservoir({int(sample)} ROWS) REPEATABLE ({int(seed)})",
        params={"f": files},
    ).fetchall()
    labels = {r[0]: dict(zip(BEHAVIOR_NAMES, r[1:])) for r in rows}
    classifier = get_classifier(gate)
    pairs = []
    reader = make_reader(spec)
    batch_docs = []
    for document in reader.run(None):
        if document.id in labels:
            batch_docs.append(document)
        if len(batch_docs) == 64:
            pairs += zip(classifier.classify([d.text for d in batch_docs]), [labels.pop(d.id) for d in batch_docs])
            batch_docs = []
        if not labels and not batch_docs:
            break
    if batch_docs:
        pairs += zip(classifier.classify([d.text for d in batch_docs]), [labels.pop(d.id) for d in batch_docs])
    return gate_report(pairs), len(labels)

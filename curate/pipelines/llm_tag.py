"""LLM tagging on datatrove's InferenceRunner: corpus -> [cue gate] -> model server -> attribute shards.

The model runs on any backend of curate.pipelines.llm.server (vllm, endpoint, transformers). Shards go
to TAGS/<llm_v1|cascade_v1>/ with the same manifest and task bookkeeping as `run_tagging`, so `curate build --tags TAGS --classifier llm` selects from them.

Resume: finished chunks are final parquet files; documents of the unfinished chunk are replayed
from the local checkpoint, and requests already answered come from datatrove's request cache.

Scale: the pipeline runs on any executor of executors.py (local, Ray, Slurm), one model server per task.
"""

from __future__ import annotations

import asyncio
import time
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import pyarrow as pa
from datatrove.data import DocumentsPipeline
from datatrove.pipeline.base import PipelineStep
from datatrove.pipeline.inference.servers.base import ServerError
from datatrove.pipeline.inference.types import InferenceError
from datatrove.pipeline.writers.parquet import ParquetWriter

from curate.behaviors import BEHAVIOR_NAMES
from curate.classifiers import get_classifier
from curate.classifiers.cascade import GATED_OUT, ROUTE_LLM, CascadeClassifier, gate_passes
from curate.classifiers.llm import LLMClassifier, model_context_limit
from curate.classifiers.llm_spans import LLMSpansClassifier, SpanLabels
from curate.console import ProgressBar
from curate.pipelines.executors import LOCAL, ExecutorOptions
from curate.pipelines.llm.job import LLMJobFolder, claim_job, run_llm_job
from curate.pipelines.llm.options import ServerConfigError
from curate.pipelines.llm.server import inference_config
from curate.pipelines.llm.tag_options import LLMTagOptions
from curate.pipelines.readers import InputSpec, make_reader
from curate.pipelines.steps import AtomicOutput, SplitRejects, batched
from curate.pipelines.tag import TagResult, check_manifest, recorded_tasks, report_duplicate_ids
from curate.schema import ATTRIBUTE_SCHEMA, Evidence, Labels, attribute_row

GATE_KEY = "curate_gate"
RESULTS_KEY = "curate_llm"
LLM_CONFIG = "llm_config.json"

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
# A quoting version's rows also count the quotes of its answers that were not found in the document and were dropped
# (llm_spans_v1; null where nothing was asked). llm_v1's rows keep their schema.
LLM_SPANS_ATTRIBUTE_SCHEMA = pa.schema([*LLM_ATTRIBUTE_SCHEMA, ("unaligned_quotes", pa.int32())])


class LLMTagConfigError(ServerConfigError):
    pass


def context_budget(llm: LLMClassifier, options: LLMTagOptions) -> int:
    """The server context a tagging run needs: document + measured prompt + answer, checked against the model's
    own limit where its config is readable here."""
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
        self.started = time.perf_counter()
        self.requests = self.prompt_tokens = self.completion_tokens = self.parse_failures = self.documents = 0
        self.bar = ProgressBar("LLM tagging", enabled=progress)

    def add(self, requests: int, prompt_tokens: int, completion_tokens: int, parse_failed: bool) -> None:
        self.documents += 1
        self.requests += requests
        self.prompt_tokens += prompt_tokens
        self.completion_tokens += completion_tokens
        self.parse_failures += parse_failed
        seconds = max(time.perf_counter() - self.started, 1e-9)
        self.bar.status(
            f"{self.requests / seconds:.1f} req/s, prompt {self.prompt_tokens / seconds:,.0f} tok/s, "
            f"gen {self.completion_tokens / seconds:,.0f} tok/s, parse fail {100 * self.parse_failures / self.documents:.1f} %"
        )
        self.bar.advance()


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
    labels = _labels(llm, texts, failures, document.text)
    meter.add(len(requests), prompt_tokens, completion_tokens, bool(labels.error and "parse:" in labels.error))
    return {"route": ROUTE_LLM, "counts": labels.counts, "error": labels.error, "answers": answers, "truncated": truncated,
            "doc_tokens": doc_tokens, "prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "evidence": [{"behavior": e.behavior, "start": e.start, "end": e.end} for e in labels.evidence],
            "unaligned_quotes": len(labels.unaligned) if isinstance(labels, SpanLabels) else None}


def _labels(llm: LLMClassifier, texts: dict[str, str], failures: list[str], document: str) -> Labels:
    """The document's labels from the answers that came back; the requests that failed are named in its error."""
    labels = llm.read_answers(texts, document)
    if failures:
        labels.error = "; ".join(filter(None, ["request: " + "; ".join(failures), labels.error]))
    return labels


class LLMAttributeWriter(AtomicOutput, ParquetWriter):
    """Attribute rows plus audit columns, one parquet file per checkpoint chunk, each written as
    NAME.partial and renamed when its chunk closes (InferenceRunner closes chunks one by one)."""

    name = "📒 LLM attributes"

    def __init__(self, output_folder: str, classifier: str, model: str, prompt_version: str, quotes: bool = False):
        super().__init__(
            output_folder,
            output_filename="attributes_${rank}_${chunk_index}.parquet",
            adapter=self._row,
            schema=LLM_SPANS_ATTRIBUTE_SCHEMA if quotes else LLM_ATTRIBUTE_SCHEMA,
            use_content_defined_chunking=False,
            max_file_size=-1,  # one file per chunk: a file-id prefix would break the chunk-wise rename
        )
        self.classifier, self.model, self.prompt_version, self.quotes = classifier, model, prompt_version, quotes

    def _row(self, _writer, document) -> dict:
        result = document.metadata[RESULTS_KEY][0]
        # A result replayed from a checkpoint written before rows carried evidence has none.
        evidence = [Evidence(e["behavior"], e["start"], e["end"]) for e in result.get("evidence", [])]
        labels = Labels(counts=result["counts"], error=result["error"], evidence=evidence)
        row = attribute_row(document.id, len(document.text), labels, self.classifier, self.model, self.prompt_version,
                            source=document.metadata.get("source"))
        row.update(
            route=result["route"], truncated=result["truncated"], doc_tokens=result["doc_tokens"],
            prompt_tokens=result["prompt_tokens"], completion_tokens=result["completion_tokens"], llm_answers=result["answers"],
        )
        if self.quotes:
            row["unaligned_quotes"] = result.get("unaligned_quotes")
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
    overwrite: bool = False,
) -> LLMTagResult:
    """Tag on `executor` (default: this machine). Slurm raises JobSubmitted once the array is submitted;
    rerun the same call when it has finished to get the summary. Tags made there with another LLM configuration
    are refused, unless `overwrite`, which removes them and tags again."""
    executor = executor or LOCAL
    executor.validate()
    options.validate(executor.gpus_per_task)
    classifier = options.classifier()
    name = classifier.name
    llm = classifier.llm if options.gate else classifier
    out = Path(tags_root) / name
    # Ray workers start in their own working directory: every path a worker opens is absolute.
    root = out.resolve()
    claim_job(out / LLM_CONFIG, {
        "model": options.model, "mode": options.mode, "structured": options.structured,
        "max_doc_tokens": options.max_doc_tokens, "max_answer_tokens": llm.max_answer_tokens, "tokenizer": options.tokenizer or options.model,
        "prompt_version": classifier.prompt_version, "gate": classifier.gate_name if options.gate else None,
        # Recorded only when set, so that tags made before the option existed still match.
        **({"chat_template_kwargs": llm.chat_template_kwargs} if llm.chat_template_kwargs else {}),
    }, "LLM tags", f"delete {out} to tag again", overwrite=overwrite, run=[out])
    # The manifest has run_tagging's exact shape so that `curate build --classifier llm` reuses these shards.
    check_manifest(out, {"classifier": name, "classifier_argument": None, **spec.fingerprint(), "limit": limit})
    # Load the tokenizer now: a wrong model name fails here with a clear message, not in a worker.
    llm.truncator.tokenizer
    context = options.max_model_len or context_budget(llm, options)
    folder = LLMJobFolder(root)
    tasks = recorded_tasks(folder.logs, tasks)
    steps = [make_reader(spec, progress=False, limit=limit), SplitRejects(str(root / "rejects"))]
    if options.gate:
        steps.append(GateDocuments(options.gate))
    started = time.perf_counter()
    # Rollouts turn request errors into null rows themselves; skipping a malformed request only guards the rest.
    run_llm_job(folder, steps, rollout_fn=llm_rollout,
                config=inference_config(options, folder.server_logs, executor.gpus_per_task, context_tokens=context),
                writer=LLMAttributeWriter(str(root), name, options.model, classifier.prompt_version,
                                          quotes=isinstance(llm, LLMSpansClassifier)),
                shared_context=partial(rollout_context, classifier, progress),
                records_per_chunk=options.records_per_chunk, metadata_key=RESULTS_KEY, executor=executor, tasks=tasks,
                workers=workers, job_name=f"curate-tag-{name}", what="LLM tagging")
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

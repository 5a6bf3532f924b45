"""What the two LLM jobs of cpt (the rewrite, the is_solution judge) share: their options over whole documents, one
greedy request about one document, the writer of their rows, the job's run on the shared LLM-job wiring, and the
fingerprint of the pool that decides whether an earlier run still applies."""

from __future__ import annotations

import asyncio
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import duckdb
import pyarrow as pa
from datatrove.pipeline.inference.servers.base import ServerError
from datatrove.pipeline.inference.types import InferenceError
from datatrove.pipeline.writers.parquet import ParquetWriter

from curate.classifiers.llm import Truncator
from curate.console import ProgressBar
from curate.options import DEFAULT_MAX_DOC_TOKENS, DEFAULT_RECORDS_PER_CHUNK
from curate.pipelines.executor_options import ExecutorOptions
from curate.pipelines.llm.job import LLMJobFolder, run_llm_job
from curate.pipelines.llm.options import ServerOptions
from curate.pipelines.llm.server import inference_config
from curate.pipelines.readers import InputSpec, make_reader
from curate.pipelines.steps import AtomicOutput, SplitRejects


@dataclass(frozen=True)
class DocumentJobOptions(ServerOptions):
    """The server (ServerOptions) plus what every cpt LLM job over whole documents needs: the truncation of each
    document and the checkpoint size. A job adds its output budget and says how long one request may be."""

    # 1, not ServerOptions' None (the GPUs per task): the rewrite and judge checkpoints record these options whole,
    # and a run resumed after an upgrade must find its own (CPTJob gives the same default).
    tp: int | None = 1
    tokenizer: str | None = None  # the model's tokenizer, for truncation (default: the model)
    max_doc_tokens: int = DEFAULT_MAX_DOC_TOKENS
    records_per_chunk: int = DEFAULT_RECORDS_PER_CHUNK


@contextmanager
def _document_job_context(step: str, tokenizer: str, max_doc_tokens: int, progress: bool, arguments: dict):
    """What each rollout of a cpt LLM job receives besides the document: the job's own `arguments` (prompts,
    output budget), the truncator to the document budget and the job's one progress bar, closed when the job ends."""
    bar = ProgressBar(step, enabled=progress)
    try:
        yield {**arguments, "truncator": Truncator(tokenizer, max_doc_tokens), "bar": bar}
    finally:
        bar.close()


async def ask_about_document(document, generate, truncator, messages,
                             max_tokens: int) -> tuple[object, bool, str | None]:
    """One greedy request about one document cut to its token budget, for both LLM jobs of cpt: (the result,
    truncated, None), or (None, truncated, why) for a document the tokenizer cannot handle or a failed request:
    such a document becomes a row with its reason, never a crash. A dead server (ServerError) is raised: the task
    fails and a rerun resumes from the checkpoint."""
    try:
        text, truncated, _ = await asyncio.to_thread(truncator, document.text)
    except Exception as error:  # noqa: BLE001 - a document the tokenizer cannot handle is kept with its reason
        return None, False, f"tokenize: {type(error).__name__}: {error}"
    try:
        result = await generate({"messages": messages(text), "max_tokens": max_tokens, "temperature": 0.0})
    except ServerError:
        raise
    except Exception as error:  # noqa: BLE001
        # A failed request is a row with its reason; a dead server is re-raised above.
        message = error.error if isinstance(error, InferenceError) else error
        return None, truncated, f"request: {type(error).__name__}: {str(message)[:300]}"
    return result, truncated, None


class ChunkWriter(AtomicOutput, ParquetWriter):
    """The output of a cpt LLM job: one parquet file per checkpoint chunk (PREFIX_RANK_CHUNK.parquet), written as
    NAME.partial and renamed when the chunk closes, a row per document (its rollout's row under `metadata_key`, and
    its id)."""

    def __init__(self, output_folder: str, name: str, prefix: str, schema: pa.Schema, metadata_key: str):
        self.name = name  # before the step's stats are named after it
        self.metadata_key = metadata_key
        super().__init__(output_folder, output_filename=f"{prefix}_${{rank}}_${{chunk_index}}.parquet", schema=schema,
                         adapter=lambda _w, d: {**d.metadata[metadata_key][0], "id": d.id},
                         use_content_defined_chunking=False, max_file_size=-1)


def run_document_job(stage: Path, source: Path, options: DocumentJobOptions, executor: ExecutorOptions, *, step: str,
                     rollout_fn, writer: ChunkWriter, arguments: dict, progress: bool) -> None:
    """One LLM job of cpt (`step`: rewrite, is_solution) over the documents in `source`, into `stage`, on
    `executor` (its tasks, workers and GPUs per task): InferenceRunner on the shared server config, rejects split off,
    checkpoints and logs in the stage; each rollout gets `arguments` (see _document_job_context)."""
    folder = LLMJobFolder(stage, hidden=False)
    run_llm_job(
        folder, [make_reader(InputSpec(str(source.parent))), SplitRejects(str(stage / "rejects"))],
        rollout_fn=rollout_fn, writer=writer, metadata_key=writer.metadata_key,
        records_per_chunk=options.records_per_chunk,
        config=inference_config(options, folder.server_logs, executor.gpus_per_task,
                                context_tokens=options.context_tokens()),
        shared_context=partial(_document_job_context, step, options.tokenizer or options.model, options.max_doc_tokens,
                               progress, arguments),
        executor=executor, tasks=executor.tasks, workers=executor.workers,
        job_name=f"curate-cpt-{step.replace('_', '-')}", what=step)


def content_fingerprint(files: list[str]) -> list:
    """Rows and a digest of every (id, text) in the parquet `files`, in id order."""
    with duckdb.connect() as connection:
        return list(connection.sql(
            "SELECT count(*), md5(coalesce(string_agg(md5(id || chr(0) || text), '' ORDER BY id), '')) "
            "FROM read_parquet($f)", params={"f": files}).fetchall()[0])

"""`curate mcqa` and the mcqa flow: the job checked, its output claimed, its items read, converted in worker
processes and written with their rejects, reformulated by an LLM when asked, then the stats, the card and the
cleaning (`dedup`, `decontam`)."""

from __future__ import annotations

import hashlib
import json
import multiprocessing
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import asdict
from pathlib import Path

import pyarrow as pa

from curate.builders.base import Builder, BuildOutput, Decision, Keep
from curate.builders.jobs import McqaJob
from curate.builders.llm_writers import PROMPT_VERSION, LLMOptions
from curate.builders.mcqa.card import write_mcqa_card
from curate.builders.mcqa.convert import ITEM_SECONDS, convert_bounded
from curate.builders.mcqa.items import FORMATS, Converted, FormatError, MCItem, McqaResult, Rejected, rejection
from curate.builders.mcqa.readers import input_files, read_items
from curate.builders.mcqa.reformulate import REFORMULATION_COLUMNS, reformulation
from curate.errors import InputError, OptionError
from curate.files import write_text_atomic
from curate.pipelines.decontam import decontaminate_dataset, parse_against
from curate.pipelines.dedup import dedup_dataset
from curate.pipelines.state import files_signature, write_once

ROW_GROUP = 1000  # rows per parquet row group of the written split


def output_identity(job: McqaJob) -> tuple[dict, list]:
    """What decides the dataset `run_mcqa` writes (its parameters, and the size and mtime of each local input
    file; a hub input by name), as the CLI and the flow both claim the output folder with it."""
    inputs, reformulate, cleaning = list(job.inputs), job.llm, job.cleaning
    parameters = {"inputs": inputs, "format": job.format, "limit": job.limit, "dedup": cleaning.dedup,
                  "decontam": cleaning.decontam,
                  "benchmarks_dir": str(cleaning.benchmarks_dir) if cleaning.benchmarks_dir else None,
                  # every LLM field with its default, however it was given
                  "reformulate": asdict(LLMOptions(**reformulate)) if reformulate else None}
    signature = [i if i.startswith("hf:") else files_signature(input_files(i)) for i in inputs]
    return parameters, signature


class McqaBuilder(Builder):
    """Decides each item by its bounded conversion (in WORKERS processes when more than one); counts the answer
    types of the items it keeps."""

    def __init__(self, workers: int):
        self.workers = workers
        self.types: Counter = Counter()

    def decisions(self, items: Iterable[MCItem | Rejected]) -> Iterator[Decision]:
        for result in self._converted(items):
            if isinstance(result, Converted):
                self.types[result.answer_type] += 1
                yield Keep.row(result.row(), source=result.source)
            else:
                yield rejection(result.id, result.source, result.reason)

    def _converted(self, items: Iterable[MCItem | Rejected]) -> Iterator[Converted | Rejected]:
        if self.workers <= 1:
            yield from map(convert_bounded, items)
            return
        # Each worker's own main thread runs the bounded check, so its SIGALRM timer works there.
        with multiprocessing.get_context("spawn").Pool(self.workers) as pool:
            yield from pool.imap(convert_bounded, items, chunksize=16)


SCHEMA = pa.schema([
    ("id", pa.string()), ("question", pa.string()), ("answer", pa.string()), ("answer_type", pa.string()),
    ("source", pa.string()),
    ("original_options", pa.list_(pa.struct([("letter", pa.string()), ("text", pa.string())]))),
    ("gold_letter", pa.string()), ("data_source", pa.string()), ("ability", pa.string()),
])


def run_mcqa(job: McqaJob, progress: bool = True) -> McqaResult:
    """Converts the job's inputs into its output, whatever the output holds (`mcqa` claims it first); the job's
    cleaning (`dedup` / `decontam`, benchmarks as `curate decontam --against`) then cleans the result in place."""
    inputs, fmt, limit, reformulate = list(job.inputs), job.format, job.limit, job.llm
    dedup, decontam, benchmarks_dir = job.cleaning.dedup, job.cleaning.decontam, job.cleaning.benchmarks_dir
    output = Path(job.output)
    if reformulate:
        LLMOptions(**reformulate).validate()  # a wrong backend fails before the conversion, not after it
    if decontam:
        parse_against(decontam, benchmarks_dir)  # so does a wrong --decontam
    for sub in ("data", "rejects", ".curate"):
        (output / sub).mkdir(parents=True, exist_ok=True)
    seen: set[str] = set()

    def items() -> Iterator[MCItem | Rejected]:
        for path in inputs:
            for item in read_items(path, fmt, limit):
                if item.id in seen:
                    yield Rejected(item.id, item.source, "duplicate_id: an earlier record has this id")
                    continue
                seen.add(item.id)
                yield item

    builder = McqaBuilder(job.workers)
    # Both files appear once the conversion (and the reformulation) is done.
    with BuildOutput({"train": output / "data" / "train-00000.parquet"}, SCHEMA, output / "rejects" / "rejects.jsonl",
                     row_group=ROW_GROUP, progress=progress, label="mcqa") as out:
        builder.run(items(), out)
        if reformulate:
            out.revise("train", reformulation(reformulate, output, builder.types, progress), REFORMULATION_COLUMNS)
    types = builder.types
    for kind in [k for k, v in types.items() if v <= 0]:
        del types[kind]
    result = McqaResult(output, out.kept, out.rejected, {k: dict(v) for k, v in out.by_source.items()},
                        dict(out.by_reason.most_common()), dict(types.most_common()))
    parameters = {"inputs": inputs, "format": fmt, "limit": limit, "item_seconds": ITEM_SECONDS,
                  "fingerprint": hashlib.sha256(json.dumps([inputs, fmt, limit]).encode()).hexdigest()[:16]}
    if reformulate:
        parameters["reformulate"] = {**reformulate, "prompt_version": PROMPT_VERSION}
    stats = {"kept": result.kept, "rejected": result.rejected, "by_source": result.by_source,
             "by_reason": result.by_reason, "answer_types": result.answer_types}
    for name, content in (("parameters.json", parameters), ("stats.json", stats)):
        write_text_atomic(output / ".curate" / name, json.dumps(content, indent=2))
    write_mcqa_card(output, result, parameters, dedup, decontam, benchmarks_dir)
    # After the card: each adds its own report section to it. Only the stem is checked for contamination: the
    # answers are short LaTeX objects ("\frac{3}{4}") that lie inside many unrelated benchmark solutions.
    for side_file, wanted in (("duplicates.jsonl", dedup), ("contaminated.jsonl", decontam)):
        if not wanted:
            (output / "rejects" / side_file).unlink(missing_ok=True)  # from an earlier run with the option
    if dedup:
        dedup_dataset(output, text_key="question", progress=progress)
    if decontam:
        decontaminate_dataset(output, decontam, fields=["question"], benchmarks_dir=benchmarks_dir, progress=progress)
    return result


def check_mcqa(job: McqaJob) -> None:
    """What `curate mcqa` and the mcqa flow refuse before anything is claimed or read: a model without --reformulate
    (or the reverse), an unknown format, a wrong LLM backend, a local input that names no file."""
    if job.model and not job.reformulate:
        raise OptionError("--model applies to --reformulate only")
    if job.reformulate and not job.model:
        raise OptionError("--reformulate needs --model M (and --backend vllm|endpoint|transformers)")
    if job.format not in FORMATS:
        raise FormatError(f"unknown format {job.format!r}; choose one of {', '.join(FORMATS)}")
    if job.llm:
        LLMOptions(**job.llm).validate()
    for path in job.inputs:
        if not path.startswith("hf:"):
            try:
                input_files(path)
            except FileNotFoundError as error:  # a ValueError, so that a flow reports it as a parameter error
                raise InputError(str(error)) from None


def mcqa(job: McqaJob, progress: bool = True, refresh: bool = False) -> McqaResult | None:
    """Runs `curate mcqa` and the mcqa flow: claims the output for what decides the dataset (output_identity; a
    folder holding another dataset is refused unless `job.overwrite`), then converts. None when the output is up to
    date; `refresh` converts all the same (a flow whose cached result is stale)."""
    check_mcqa(job)
    what, inputs = output_identity(job)
    return write_once(job.output, "mcqa", what, lambda: run_mcqa(job, progress=progress), inputs=inputs,
                      overwrite=job.overwrite, refresh=refresh)

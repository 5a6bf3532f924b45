"""Pass-rate filter: sample k answers per prompt from the policy, score them with the row's reward, keep the
prompts it sometimes but not always solves (the only ones that give GRPO a learning signal).

Sampling runs on datatrove's InferenceRunner with the backends of `curate tag-llm` (vllm, endpoint,
transformers); the k samples of a prompt are the runner's `rollouts_per_document`, so a server with prefix
caching prefills each prompt once. Each sample is scored in a worker thread by the registered reward named by
the row's `data_source` (the same function verl and TRL call).

Output layout:
    OUT/rates/rates_<rank>_<chunk>.parquet  one row per prompt: key, id, split, data_source, k, scored, correct,
                                            pass_rate (null when no sample could be scored), every sample with its
                                            reward; written chunk by chunk, a rerun resumes
    OUT/data/<split>-NNNNN.parquet          the dataset's rows whose pass rate lies strictly inside the band, with
                                            `pass_rate` and `pass_samples` added
    OUT/rejects/prompts.jsonl               rows that could not become a prompt, with their reason
    OUT/rejects/passrate.jsonl              rows outside the band or never scored, with their reason and pass rate
    OUT/README.md, OUT/.curate/passrate.json

Selecting is cheap and separate from sampling: rerunning with another band (same model, k and sampling
parameters) reuses OUT/rates and sends no request.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from datatrove.data import Document, DocumentsPipeline
from datatrove.pipeline.base import PipelineStep
from datatrove.pipeline.inference.servers.base import ServerError
from datatrove.pipeline.inference.types import InferenceError
from datatrove.pipeline.writers.parquet import ParquetWriter

from curate.builders.priming import tinyzero_prompt
from curate.console import ProgressBar
from curate.data_cards.cards import (
    load_snippet,
    render_card,
    reproduce_command,
    save_card,
    schema_fields,
    size_category,
    split_configs,
)
from curate.files import atomic_open, atomic_path, write_text_atomic
from curate.handoff.export import Exporter, ExportError, RowRejected, input_files
from curate.handoff.jobs import PassRateJob
from curate.handoff.sampling import PassRateError, SamplingOptions
from curate.pipelines.executors import LOCAL, ExecutorOptions
from curate.pipelines.llm.job import LLMJobFolder, claim_job, run_llm_job
from curate.pipelines.state import STATE, folder_signature, write_once
from curate.pipelines.steps import AtomicOutput
from curate.rewards.registry import get_reward

RESULTS_KEY = "curate_samples"
SAMPLING_CONFIG = "sampling.json"

SAMPLE = pa.struct([("text", pa.string()), ("reward", pa.float64()), ("finish_reason", pa.string()), ("error", pa.string())])
RATES_SCHEMA = pa.schema([
    ("key", pa.string()),
    ("id", pa.string()),
    ("split", pa.string()),
    ("data_source", pa.string()),
    ("k", pa.int32()),
    ("scored", pa.int32()),
    ("correct", pa.int32()),
    ("pass_rate", pa.float64()),
    ("prompt_tokens", pa.int64()),
    ("completion_tokens", pa.int64()),
    ("samples", pa.list_(SAMPLE)),
])


# --------------------------------------------------------------------------------------------- #
# Steps
# --------------------------------------------------------------------------------------------- #
def row_key(file_number: int, position: int) -> str:
    """Stable identity of a dataset row (ids need not be unique): file number and position in it."""
    return f"{file_number}:{position}"


class PromptReader(PipelineStep):
    """Dataset rows → Documents carrying the chat prompt, ground truth and data_source, converted exactly as
    `curate export --to trl` converts them; rows that cannot be scored go to rejects with their reason."""

    name = "📝 Prompts"
    type = "📖 - READER"

    def __init__(self, dataset: str, rejects_folder: str, instruction: str | None, system: str | None,
                 limit: int = -1, batch_size: int = 1024, prompt_format: str = "chat"):
        super().__init__()
        self.dataset, self.rejects_folder = dataset, rejects_folder
        self.prompt_format = prompt_format
        self.instruction, self.system = instruction, system
        self.limit, self.batch_size = limit, batch_size

    def run(self, data: DocumentsPipeline = None, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        files = list(enumerate(input_files(Path(self.dataset))))[rank::world_size]
        rejects_path = Path(self.rejects_folder) / f"prompts_{rank:05d}.jsonl"
        rejects_path.parent.mkdir(parents=True, exist_ok=True)
        emitted = 0
        with atomic_open(rejects_path) as rejects:
            for number, (split, path) in files:
                source = pq.ParquetFile(path)
                exporter = Exporter("trl", source.schema_arrow, self.instruction, self.system)
                position = 0
                for batch in source.iter_batches(batch_size=self.batch_size):
                    if 0 <= self.limit <= emitted:
                        break
                    for row in batch.to_pylist():
                        key = row_key(number, position)
                        position += 1
                        if 0 <= self.limit <= emitted:
                            break
                        try:
                            prompt = exporter.convert(row, split, position - 1)
                        except RowRejected as reason:
                            self.stat_update("rejected")
                            rejects.write(json.dumps({"reason": str(reason), "key": key, "source": str(path),
                                                      "id": row.get("id")}, default=str, ensure_ascii=False) + "\n")
                            continue
                        emitted += 1
                        self.stat_update("prompts")
                        user = prompt["prompt"][-1]["content"]
                        # tinyzero: a dataset's own TinyZero prompt (priming's query) as it is, any other user turn
                        # inside the TinyZero template.
                        raw = None if self.prompt_format == "chat" else (
                            user if exporter.prompt_column == "query" else tinyzero_prompt(user))
                        yield Document(text=user, id=key, metadata={
                            "row_id": prompt["id"], "split": split, "data_source": prompt["data_source"],
                            "messages": prompt["prompt"], "raw_prompt": raw,
                            # Round-trip through JSON: the checkpoint stores metadata as JSON.
                            "ground_truth": json.loads(json.dumps(prompt["solution"], default=str)),
                        })


class SampleMeter:
    def __init__(self, progress: bool, k: int):
        self.bar = ProgressBar(f"sampling k={k}", enabled=progress, unit="sample")
        self.samples = self.correct = self.scored = 0

    def add(self, reward: float | None) -> None:
        self.samples += 1
        self.scored += reward is not None
        self.correct += reward == 1.0
        self.bar.status(f"solved {self.correct}/{self.scored} scored")
        self.bar.advance()


@contextmanager
def sampling_context(progress: bool, k: int):
    meter = SampleMeter(progress, k)
    try:
        yield {"meter": meter}
    finally:
        meter.bar.close()


async def sample_rollout(document: Document, generate, meter: SampleMeter) -> dict:
    """One sample of one prompt, scored by the row's reward. Never None: a failed request is a sample
    with reward None and its error, so every prompt is written."""
    try:
        raw = document.metadata.get("raw_prompt")
        result = await generate({"prompt": raw} if raw is not None else {"messages": document.metadata["messages"]})
    except InferenceError as error:
        meter.add(None)
        return {"text": None, "reward": None, "finish_reason": "error", "error": f"request: {str(error.error)[:300]}",
                "prompt_tokens": 0, "completion_tokens": 0}
    except ServerError:
        raise  # the server is gone: the task fails and a rerun resumes from the checkpoint
    reward, error = None, None
    try:
        # Threads: math-verify can take a while on odd answers, and the event loop keeps other requests moving.
        reward = await asyncio.to_thread(
            get_reward(document.metadata["data_source"]).score, result.text, document.metadata["ground_truth"])
    except Exception as failure:  # noqa: BLE001 - a reward that breaks on one answer must not lose the others
        error = f"reward: {type(failure).__name__}: {str(failure)[:300]}"
    meter.add(reward)
    return {"text": result.text, "reward": reward, "finish_reason": result.finish_reason, "error": error,
            "prompt_tokens": int(result.usage.get("prompt_tokens") or 0),
            "completion_tokens": int(result.usage.get("completion_tokens") or 0)}


def pass_counts(rewards: list[float | None]) -> tuple[int, int, float | None]:
    """(scored, correct, pass rate over the scored samples; None when none could be scored)."""
    scored = [r for r in rewards if r is not None]
    correct = sum(1 for r in scored if r == 1.0)
    return len(scored), correct, (correct / len(scored) if scored else None)


class RatesWriter(AtomicOutput, ParquetWriter):
    """One parquet file per checkpoint chunk, written as NAME.partial and renamed when the chunk closes."""

    name = "📒 Pass rates"

    def __init__(self, output_folder: str, k: int):
        super().__init__(output_folder, output_filename="rates_${rank}_${chunk_index}.parquet", adapter=self._row,
                         schema=RATES_SCHEMA, use_content_defined_chunking=False, max_file_size=-1)
        self.k = k

    def _row(self, _writer, document: Document) -> dict:
        samples = document.metadata[RESULTS_KEY]
        scored, correct, rate = pass_counts([s["reward"] for s in samples])
        return {
            "key": document.id, "id": document.metadata["row_id"], "split": document.metadata["split"],
            "data_source": document.metadata["data_source"], "k": self.k, "scored": scored, "correct": correct,
            "pass_rate": rate, "prompt_tokens": sum(s["prompt_tokens"] for s in samples),
            "completion_tokens": sum(s["completion_tokens"] for s in samples),
            "samples": [{k: s[k] for k in ("text", "reward", "finish_reason", "error")} for s in samples],
        }



# --------------------------------------------------------------------------------------------- #
# Sampling
# --------------------------------------------------------------------------------------------- #
@dataclass
class SamplingResult:
    rates_dir: Path
    seconds: float
    prompts: int = 0
    samples: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0


def run_sampling(dataset: str | Path, output: str | Path, options: SamplingOptions, limit: int = -1,
                 tasks: int = 1, workers: int = 1, progress: bool = True,
                 executor: ExecutorOptions | None = None, overwrite: bool = False) -> SamplingResult:
    """Samples k scored answers for every prompt of DATASET into OUTPUT/rates (resuming an earlier run with the same
    configuration; another is refused unless `overwrite`, which removes its samples), one model server per task,
    on `executor` (Slurm: raises JobSubmitted; rerun once the job is done)."""
    executor = executor or LOCAL
    options.validate(executor.gpus_per_task)
    # Absolute: Ray and Slurm workers need not share this process's working directory.
    output, dataset = Path(output).resolve(), Path(dataset).resolve()
    files = input_files(Path(dataset))  # fails now, with the export's message, when there is nothing to read
    first = pq.ParquetFile(files[0][1])
    Exporter("trl", first.schema_arrow, options.instruction, options.system)  # missing columns: a clear error here
    rates = output / "rates"
    folder = LLMJobFolder(output / STATE, hidden=False)
    claim_job(output / STATE / SAMPLING_CONFIG, {
        "dataset": str(Path(dataset).resolve()), "limit": limit, "tasks": tasks, **options.fingerprint()},
        "samples", "pass --overwrite to sample again", overwrite=overwrite,
        run=[rates, folder.checkpoints, folder.logs, output / "rejects" / "prompts"])
    reader = PromptReader(str(dataset), str(output / "rejects" / "prompts"), options.instruction, options.system,
                          limit=limit, prompt_format=options.prompt_format)
    started = time.perf_counter()
    run_llm_job(folder, [reader], rollout_fn=sample_rollout, writer=RatesWriter(str(rates), options.k),
                config=options.inference_config(folder.server_logs, executor.gpus_per_task),
                shared_context=partial(sampling_context, progress, options.k),
                records_per_chunk=options.records_per_chunk, metadata_key=RESULTS_KEY, executor=executor,
                tasks=tasks, workers=workers, job_name="curate-passrate", what="sampling")
    result = SamplingResult(rates_dir=rates, seconds=time.perf_counter() - started)
    import duckdb

    shards = sorted(str(p) for p in rates.glob("rates_*.parquet"))
    if shards:
        row = duckdb.connect().sql(
            "SELECT count(*), coalesce(sum(len(samples)), 0), coalesce(sum(prompt_tokens), 0), "
            "coalesce(sum(completion_tokens), 0) FROM read_parquet($f)", params={"f": shards}).fetchall()[0]
        result.prompts, result.samples, result.prompt_tokens, result.completion_tokens = (int(v) for v in row)
    return result




# --------------------------------------------------------------------------------------------- #
# Selection
# --------------------------------------------------------------------------------------------- #
def parse_band(text: str) -> tuple[float, float]:
    try:
        low, high = (float(x) for x in text.split(","))
    except ValueError:
        raise PassRateError(f"--band must be LOW,HIGH (e.g. 0,1), got {text!r}") from None
    if not 0 <= low < high <= 1:
        raise PassRateError(f"--band needs 0 ≤ LOW < HIGH ≤ 1, got {low},{high}")
    return low, high


def band_reason(rate: float | None, band: tuple[float, float]) -> str | None:
    """None when the prompt is kept: its pass rate lies strictly inside the band."""
    low, high = band
    if rate is None:
        return "unscorable: no sample could be scored"
    if rate == 0 and low == 0:
        return "never solved"
    if rate == 1 and high == 1:
        return "always solved"
    if rate <= low:
        return f"pass rate ≤ {low:g}"
    if rate >= high:
        return f"pass rate ≥ {high:g}"
    return None


@dataclass
class PassRateResult:
    output: Path
    band: tuple[float, float]
    k: int
    kept: Counter = field(default_factory=Counter)  # per split
    rejected: Counter = field(default_factory=Counter)  # per reason
    histogram: Counter = field(default_factory=Counter)  # correct samples -> prompts
    sampling: SamplingResult | None = None
    files: list[Path] = field(default_factory=list)


def select_by_pass_rate(dataset: str | Path, output: str | Path, band: tuple[float, float],
                        progress: bool = True) -> PassRateResult:
    """Writes the dataset's rows whose pass rate (from OUTPUT/rates) lies strictly inside `band`."""
    import duckdb
    from rich.progress import Progress

    output = Path(output)
    shards = sorted(str(p) for p in (output / "rates").glob("rates_*.parquet"))
    if not shards:
        raise PassRateError(f"no pass rates under {output / 'rates'}; sample first (run_sampling)")
    rates = {key: (rate, scored, correct, k) for key, rate, scored, correct, k in duckdb.connect().sql(
        "SELECT key, pass_rate, scored, correct, k FROM read_parquet($f)", params={"f": shards}).fetchall()}
    k = max(r[3] for r in rates.values())
    result = PassRateResult(output=output, band=band, k=k)
    for folder in ("data",):
        if (output / folder).is_dir():
            for old in (output / folder).iterdir():
                old.unlink()
    (output / "data").mkdir(parents=True, exist_ok=True)
    files = input_files(Path(dataset))
    rejects_path = output / "rejects" / "passrate.jsonl"
    rejects_path.parent.mkdir(parents=True, exist_ok=True)
    total = sum(pq.ParquetFile(f).metadata.num_rows for _, f in files)
    with atomic_open(rejects_path) as rejects, Progress(disable=not progress, transient=True) as bar:
        task = bar.add_task(f"pass rate in ({band[0]:g}, {band[1]:g})", total=total)
        split_files: Counter = Counter()  # shard names count within a split (train-00000 is the first train file)
        for number, (split, path) in enumerate(files):
            source = pq.ParquetFile(path)
            schema = source.schema_arrow.append(pa.field("pass_rate", pa.float64())).append(pa.field("pass_samples", pa.int32()))
            # A file is written only where some row is kept: which ones is known from the rates before a row is read.
            keeps = sum(1 for p in range(source.metadata.num_rows)
                        if (entry := rates.get(row_key(number, p))) and band_reason(entry[0], band) is None)
            position, kept = 0, 0
            with ExitStack() as files_open:
                if keeps:
                    destination = output / "data" / f"{split}-{split_files[split]:05d}.parquet"
                    split_files[split] += 1
                    # Closed before atomic_path renames it (the stack unwinds in reverse).
                    writer = files_open.enter_context(pq.ParquetWriter(files_open.enter_context(atomic_path(destination)),
                                                                       schema))
                for batch in source.iter_batches(batch_size=4096):
                    rows = []
                    for row in batch.to_pylist():
                        key = row_key(number, position)
                        position += 1
                        if key not in rates:
                            continue  # not sampled: rejected as a prompt (rejects/prompts) or beyond --limit
                        rate, scored, correct, k_row = rates[key]
                        if rate is not None:
                            result.histogram[correct] += 1
                        reason = band_reason(rate, band)
                        if reason:
                            result.rejected[reason] += 1
                            rejects.write(json.dumps({"reason": reason, "key": key, "id": row.get("id"), "split": split,
                                                      "pass_rate": rate, "correct": correct, "scored": scored, "k": k_row},
                                                     ensure_ascii=False) + "\n")
                            continue
                        rows.append({**row, "pass_rate": rate, "pass_samples": scored})
                    if rows:
                        writer.write_table(pa.Table.from_pylist(rows, schema=schema))
                        kept += len(rows)
                    bar.advance(task, batch.num_rows)
            if keeps:
                result.files.append(destination)
            result.kept[split] += kept
    prompt_rejects = sorted((output / "rejects" / "prompts").glob("prompts_*.jsonl"))
    for line in (l for p in prompt_rejects for l in p.read_text().splitlines() if l.strip()):
        result.rejected[f"not a prompt: {json.loads(line)['reason'].split(' (')[0]}"] += 1
    return result


def run_passrate_filter(dataset: str | Path, output: str | Path, options: SamplingOptions,
                        band: tuple[float, float] = (0.0, 1.0), limit: int = -1, tasks: int = 1, workers: int = 1,
                        progress: bool = True, executor: ExecutorOptions | None = None) -> PassRateResult:
    """Samples (or reuses the samples of an earlier run with the same configuration), then selects."""
    if Path(output).resolve() == Path(dataset).resolve():
        raise PassRateError("the output must not be the dataset itself")
    try:
        sampling = run_sampling(dataset, output, options, limit=limit, tasks=tasks, workers=workers, progress=progress,
                                executor=executor)
    except ExportError as error:
        raise PassRateError(str(error)) from None
    result = select_by_pass_rate(dataset, output, band, progress=progress)
    result.sampling = sampling
    _write_bookkeeping(result, Path(dataset), options, limit)
    return result


def claim_record(job: PassRateJob) -> dict:
    """The parameters of the output claim. The samples depend on the dataset and the sampling options; --band only
    selects among them. So the dataset's files are a parameter (a changed dataset is another dataset: refused, or
    --overwrite drops the stale samples) and the band is the input: another band reselects, keeping the samples."""
    server = job.server
    # --server-arg as it was typed (a list, or None), so that folders claimed before the server group still match.
    server_arg = [key if value is True else f"{key}={value}" for key, value in server.server_args.items()] or None
    return {"dataset": str(Path(job.dataset).resolve()), "dataset_contents": folder_signature(job.dataset),
            "model": job.model, "k": job.k, "backend": server.backend, "endpoint_url": server.endpoint_url,
            "temperature": server.temperature, "top_p": server.top_p, "max_tokens": server.max_tokens,
            "instruction": job.instruction, "system": server.system, "server_arg": server_arg, "limit": job.limit}


def filter_by_pass_rate(job: PassRateJob, progress: bool = True) -> PassRateResult | None:
    """Runs `curate filter-passrate` under the output's claim (None when it is up to date); another --band reuses
    the samples (rates/, .curate/, rejects/prompts)."""
    band = parse_band(job.band)
    return write_once(job.output, "filter-passrate", claim_record(job), lambda: run_passrate_filter(
        job.dataset, job.output, job.server, band=band, limit=job.limit, tasks=job.executor.tasks,
        workers=job.executor.workers, progress=progress, executor=job.executor), inputs={"band": job.band}, overwrite=job.overwrite,
        keep=("rates", ".curate", "rejects"))


def _write_bookkeeping(result: PassRateResult, dataset: Path, options: SamplingOptions, limit: int) -> None:
    sampling = result.sampling
    record = {"dataset": str(dataset.resolve()), "band": list(result.band), **options.fingerprint(),
              "backend": options.backend, "kept": dict(result.kept), "rejected": dict(result.rejected),
              "histogram_correct_of_k": {str(c): n for c, n in sorted(result.histogram.items())},
              "samples": sampling.samples if sampling else None,
              "completion_tokens": sampling.completion_tokens if sampling else None}
    write_text_atomic(result.output / STATE / "passrate.json", json.dumps(record, indent=2))
    write_passrate_card(result, dataset, options, limit)


def passrate_command(result: PassRateResult, dataset: Path, options: SamplingOptions, limit: int) -> str:
    low, high = result.band
    return reproduce_command("filter-passrate", options=[
        ("--dataset", dataset), ("--model", options.model), ("--output", result.output), ("--k", options.k),
        ("--band", f"{low:g},{high:g}"), ("--backend", options.backend), ("--temperature", options.temperature),
        ("--top-p", options.top_p), ("--max-tokens", options.max_tokens), ("--limit", limit),
        ("--endpoint-url", options.endpoint_url or None), ("--instruction", options.instruction),
        ("--system", options.system),
    ])


def write_passrate_card(result: PassRateResult, dataset: Path, options: SamplingOptions, limit: int) -> None:
    """The family card; license, language and task are the source dataset's: the rows are its rows."""
    from huggingface_hub import DatasetCard, DatasetCardData


    source = DatasetCard.load(dataset / "README.md").data if (dataset / "README.md").is_file() else None
    sampling = result.sampling
    splits = sorted(s for s in result.kept if result.kept[s])
    kept = sum(result.kept.values())
    scored = sum(result.histogram.values())
    low, high = result.band
    card_data = DatasetCardData(
        license=(source.license if source else None) or "other",
        language=(source.language if source else None) or ["en"],
        task_categories=(source.task_categories if source else None) or ["question-answering", "text-generation"],
        size_categories=[size_category(kept)],
        pretty_name=f"{dataset.name}: pass-rate filtered for {options.model}",
        tags=list(dict.fromkeys(["curate", "rl", "pass-rate", *((source.tags or []) if source else [])])),
        configs=split_configs(splits),
    )
    histogram = "\n".join(f"| {c}/{result.k} | {n:,} | {100 * n / scored:.1f} % |" for c, n in sorted(result.histogram.items()))
    rejected = "\n".join(f"| {reason} | {n:,} |" for reason, n in result.rejected.most_common()) or "| (none) | 0 |"
    samples = (f"{sampling.samples:,} samples on {sampling.prompts:,} prompts, {sampling.completion_tokens:,} completion "
               f"tokens, {sampling.seconds:,.0f} s. " if sampling else "")
    meanings = {"pass_rate": "correct / scored samples of the policy", "pass_samples": "samples scored"}
    card = render_card(
        card_data,
        summary=f"{kept:,} prompts of `{dataset.name}` that the policy `{options.model}` solves sometimes but not always: "
                f"pass rate strictly inside ({low:g}, {high:g}).",
        method=f"{options.k} samples per prompt of `{dataset.resolve()}` (temperature {options.temperature}, top-p "
               f"{options.top_p}, at most {options.max_tokens} tokens, backend {options.backend}), each scored by the "
               "reward its `data_source` names. Prompts always or never solved give GRPO no signal: every sample of a "
               "group gets the same reward.",
        parameters=[("dataset", dataset.resolve()), ("band", f"{low:g},{high:g}"), ("limit", limit),
                    *((k.replace("_", " "), v) for k, v in options.fingerprint().items()), ("backend", options.backend)],
        command=passrate_command(result, dataset, options, limit),
        sections=[
            ("Rows per split", "| split | kept |\n|---|---|\n" + "\n".join(f"| {s} | {result.kept[s]:,} |" for s in splits)),
            ("Correct samples per prompt", "Prompts with at least one scored sample.\n\n| correct | prompts | share |\n"
             "|---|---|---|\n" + (histogram or "| - | 0 | - |")),
            ("Dropped", "Each row in `rejects/` with its reason.\n\n| reason | rows |\n|---|---|\n" + rejected),
            ("Samples", f"{samples}Every sample, with its reward, is in `rates/`."),
        ],
        fields=schema_fields(pq.read_schema(result.files[0]), meanings, "as in the source dataset") if result.files else [],
        load=load_snippet(splits),
        limitations="A pass rate from k samples is an estimate: with small k a prompt the policy solves 10 % of the time "
                    "is often seen as never solved, and dropped. It holds for this policy at these sampling settings; "
                    "after some training it drifts." + (" The rows keep the source dataset's limitations; see its "
                                                        "README.md." if source else ""),
    )
    save_card(card, result.output)

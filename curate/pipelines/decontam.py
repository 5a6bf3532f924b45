"""Benchmark decontamination by n-gram overlap.

Benchmark items (questions and answers/solutions, from local files or HF datasets) are normalized (case,
whitespace, LaTeX spacing commands, punctuation, every number -> 0; datatrove's `simplify_text`) and cut into
word n-grams (13 by default, as in datatrove's `NGramsDecontConfig`). A training row is removed when any n-gram of
its checked fields is in the index; the removal records the benchmark, the item id, the item's field and the
n-gram. A field shorter than n words is matched when its whole normalized text occurs inside a benchmark item
(short MCQA questions such as "What is 60% of 30% of 1400 grams?" have no 13-gram at all).

datatrove's `NGramsDecontIndexer` needs lighteval tasks and its index maps an n-gram to a task name only, so the
index is built here (sorted uint64 hashes -> item) and the filter is a datatrove `BaseFilter` that writes what it
removes through an exclusion writer. The filter runs on any executor (executors.py); the index is built once in
the submitting process, in the working folder that a rerun with the same inputs and parameters resumes.
"""

from __future__ import annotations

import bisect
import csv
import json
import os
import re
import shutil
from dataclasses import dataclass, field, replace
from pathlib import Path

import duckdb
import numpy as np
from datatrove.data import Document
from datatrove.pipeline.decont.n_grams import NGramsDecontConfig
from datatrove.pipeline.filters.base_filter import BaseFilter
from datatrove.utils.hashes.xxhash import xxhash64
from datatrove.utils.text import simplify_text

from curate.data_cards.cards import reproduce_command
from curate.errors import CurateError, OptionError
from curate.files import write_text_atomic
from curate.pipelines.dedup import (
    ROW,
    STATE,
    RemovedWriter,
    RowReader,
    RowWriter,
    first_record_keys,
    jsonl_glob,
    publish_stage,
    resolve_input,
    write_jsonl_query,
    write_report,
)
from curate.pipelines.executors import ExecutorOptions, Stage, input_signature, resumable_stage, run_stages
from curate.pipelines.jobs import DecontamJob
from curate.pipelines.state import clean_once
from curate.pipelines.steps import SplitRejects

BENCHMARKS_DIR_ENV = "CURATE_BENCHMARKS_DIR"
CONTAMINATION = "curate_contamination"


@dataclass(frozen=True)
class Builtin:
    path: str  # relative to the benchmarks directory
    fields: tuple[str, ...]
    id_field: str | None = None


# Local copies only: nothing is downloaded at run time. Paths follow the layout of the project's shared data.
BUILTIN = {
    "gsm8k": Builtin("gsm8k/test.jsonl", ("question", "answer")),
    "math500": Builtin("math500/test.jsonl", ("problem", "solution"), "unique_id"),
    "aqua": Builtin("aqua/test.json", ("question", "rationale")),
    "mathqa": Builtin("llm_adapters/mathqa_test.json", ("instruction",)),
    "mmlu_stem": Builtin("mmlu_stem_qwen/test.jsonl", ("question",)),
    "arc_challenge": Builtin("llm_adapters/arc_challenge_test.json", ("instruction",)),
    "aime24": Builtin("aime24/test.jsonl", ("problem", "solution"), "id"),
    "amc23": Builtin("amc23/test.jsonl", ("question", "answer"), "id"),
}


class BenchmarkError(CurateError, ValueError):
    pass


@dataclass(frozen=True)
class BenchmarkSource:
    name: str
    location: str  # a file, or hf:ORG/NAME[@split]
    fields: tuple[str, ...] | None  # None: every string field
    id_field: str | None = None


def parse_against(against: str, benchmarks_dir: str | Path | None = None) -> list[BenchmarkSource]:
    """`gsm8k,math500=problem,data/mine.jsonl=question+answer,hf:openai/gsm8k@test=question`.

    Items are comma-separated; `=FIELD+FIELD` chooses the text fields of one source. A bare name is a built-in
    benchmark read from BENCHMARKS_DIR (or $CURATE_BENCHMARKS_DIR)."""
    sources = []
    for item in filter(None, (part.strip() for part in against.split(","))):
        location, _, fields_text = item.partition("=")
        fields = tuple(f for f in fields_text.split("+") if f) or None
        if location in BUILTIN:
            builtin = BUILTIN[location]
            root = benchmarks_dir or os.environ.get(BENCHMARKS_DIR_ENV)
            if not root:
                raise BenchmarkError(
                    f"built-in benchmark {location!r} is read from a local copy: pass --benchmarks-dir or set "
                    f"${BENCHMARKS_DIR_ENV} (expects {builtin.path} under it)"
                )
            path = Path(root).expanduser() / builtin.path
            if not path.exists():
                raise BenchmarkError(f"built-in benchmark {location!r}: no local copy at {path}")
            sources.append(BenchmarkSource(location, str(path), fields or builtin.fields, builtin.id_field))
        elif location.startswith("hf:"):
            sources.append(BenchmarkSource(location.removeprefix("hf:"), location, fields))
        else:
            path = Path(location).expanduser()
            if not path.is_file():
                known = ", ".join(BUILTIN)
                raise BenchmarkError(f"benchmark {location!r} is neither a file nor a built-in name ({known})")
            sources.append(BenchmarkSource(f"{path.parent.name}/{path.stem}", str(path), fields))
    if not sources:
        raise BenchmarkError("--against names no benchmark")
    return sources


def _records(source: BenchmarkSource):
    """The benchmark's records, as dicts, from JSON lines, a JSON list, parquet, CSV or a HF dataset."""
    location = source.location
    if location.startswith("hf:"):
        import datasets

        name, _, split = location.removeprefix("hf:").partition("@")
        yield from datasets.load_dataset(name, split=split or "test")
        return
    lower = location.lower()
    if lower.endswith(".parquet"):
        import pyarrow.parquet as pq

        for batch in pq.ParquetFile(location).iter_batches(batch_size=1000):
            yield from batch.to_pylist()
        return
    if lower.endswith(".csv"):
        with open(location, newline="") as f:
            # hendrycks CSVs have no header: column 0 is the question, the rest options and answer.
            for row in csv.reader(f):
                yield {f"column{i}": value for i, value in enumerate(row)}
        return
    with open(location, encoding="utf-8") as f:
        head = f.read(1)
        while head and head.isspace():
            head = f.read(1)
        f.seek(0)
        if head == "[":
            yield from json.load(f)
            return
        for number, line in enumerate(f, 1):
            if line.strip():
                try:
                    yield json.loads(line)
                except json.JSONDecodeError as error:
                    raise BenchmarkError(f"{location} line {number}: not JSON ({error})") from error


# LaTeX spacing and sizing commands carry no content: `\frac{1}{2}\,dx` and `\dfrac12 dx` should meet.
LATEX_NOISE = re.compile(r"\\(?:[,;:! ]|quad|qquad|left|right|displaystyle|big|Big|bigg|Bigg)(?![a-zA-Z])|\$+|~")
LATEX_SYNONYMS = re.compile(r"\\[dt]frac(?![a-zA-Z])")


def normalize(text: str, config: NGramsDecontConfig, keep_numbers: bool = False) -> list[str]:
    text = LATEX_SYNONYMS.sub(r"\\frac", LATEX_NOISE.sub(" ", text))
    norm = replace(config.norm_config, norm_numbers=False) if keep_numbers else config.norm_config
    tokens = simplify_text(text, norm).split()
    if keep_numbers:
        return tokens
    # A run of numbers ("48/2 = <<48/2=24>>24" -> 0 0 0 0 0 0) is one placeholder: otherwise number-dense
    # arithmetic makes n-grams that any two worked solutions share.
    return [t for i, t in enumerate(tokens) if t != "0" or i == 0 or tokens[i - 1] != "0"]


def _ngram_hashes(tokens: list[str], n: int) -> np.ndarray:
    return np.fromiter((xxhash64(" ".join(tokens[i:i + n]).encode()) for i in range(len(tokens) - n + 1)),
                       dtype=np.uint64, count=max(len(tokens) - n + 1, 0))


@dataclass
class IndexSummary:
    benchmarks: dict[str, dict] = field(default_factory=dict)  # name -> items, ngrams, short items


def build_index(sources: list[BenchmarkSource], folder: Path, config: NGramsDecontConfig) -> IndexSummary:
    """Writes hashes.npy (sorted), refs.npy (row in items.jsonl per hash), texts.jsonl (for short fields) and,
    last, summary.json: an index with a summary is whole and is reused as it is."""
    summary_path = folder / "summary.json"
    if summary_path.exists():
        return IndexSummary(json.loads(summary_path.read_text()))
    folder.mkdir(parents=True, exist_ok=True)
    hashes, refs, items = [], [], []
    summary = IndexSummary()
    with (folder / "texts.jsonl").open("w") as texts:
        for source in sources:
            n_items = n_ngrams = 0
            for position, record in enumerate(_records(source)):
                if not isinstance(record, dict):
                    raise BenchmarkError(f"{source.location}: record {position} is not an object")
                item_id = str(record.get(source.id_field, position)) if source.id_field else str(position)
                fields = source.fields or tuple(k for k, v in record.items() if isinstance(v, str))
                missing = [f for f in fields if f not in record]
                if missing:
                    raise BenchmarkError(
                        f"{source.location}: no field {missing[0]!r} (fields: {', '.join(record)}); "
                        f"choose with {source.location}=FIELD+FIELD"
                    )
                n_items += 1
                for name in fields:
                    value = record[name]
                    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
                    tokens = normalize(text, config)
                    ref = len(items)
                    items.append({"benchmark": source.name, "item": item_id, "field": name})
                    texts.write(json.dumps({"ref": ref, "text": " ".join(tokens),
                                            "exact": " ".join(normalize(text, config, keep_numbers=True))}) + "\n")
                    found = _ngram_hashes(tokens, config.n_grams)
                    hashes.append(found)
                    refs.append(np.full(len(found), ref, dtype=np.int32))
                    n_ngrams += len(found)
            summary.benchmarks[source.name] = {"location": source.location, "items": n_items, "ngrams": n_ngrams,
                                               "fields": list(source.fields or ["(all text fields)"])}
    all_hashes = np.concatenate(hashes) if hashes else np.empty(0, np.uint64)
    all_refs = np.concatenate(refs) if refs else np.empty(0, np.int32)
    order = np.argsort(all_hashes, kind="stable")
    np.save(folder / "hashes.npy", all_hashes[order])
    np.save(folder / "refs.npy", all_refs[order])
    (folder / "items.json").write_text(json.dumps(items))
    write_text_atomic(summary_path, json.dumps(summary.benchmarks))
    return summary


def _benchmark_signature(source: BenchmarkSource) -> list:
    if source.location.startswith("hf:"):
        return [source.location]
    stat = Path(source.location).stat()
    return [str(Path(source.location).resolve()), stat.st_size, stat.st_mtime_ns]


class BenchmarkNGramFilter(BaseFilter):
    """Removes a row when an n-gram of a checked field is a benchmark n-gram (or a short field lies inside an item)."""

    name = "🦠 Benchmark n-grams"
    type = "🦠 - DECONT"

    def __init__(self, index_folder: str, fields: list[str], config: NGramsDecontConfig, short_min_tokens: int = 4,
                 exclusion_writer=None):
        super().__init__(exclusion_writer)
        self.index_folder = index_folder
        self.fields = fields
        self.config = config
        self.short_min_tokens = short_min_tokens
        self._index = None

    def _load(self):
        folder = Path(self.index_folder)
        items = json.loads((folder / "items.json").read_text())
        joined = {}
        for key in ("text", "exact"):
            offsets, parts, position = [], [], 0
            with (folder / "texts.jsonl").open() as f:
                for line in f:
                    piece = " " + json.loads(line)[key] + " \n"
                    offsets.append(position)
                    parts.append(piece)
                    position += len(piece)
            joined[key] = (offsets, "".join(parts))
        self._index = (np.load(folder / "hashes.npy"), np.load(folder / "refs.npy"), items, joined)

    def _texts(self, document: Document):
        row = document.metadata.get(ROW) or {}
        for name in self.fields:
            value = row.get(name, document.text if not row else None)
            if isinstance(value, str) and value:
                yield name, value

    def _whole_field(self, tokens: list[str], joined: tuple[list[int], str], how: str):
        if len(tokens) < self.short_min_tokens:
            return None
        offsets, text = joined
        at = text.find(" " + " ".join(tokens) + " ")
        if at < 0:
            return None
        return bisect.bisect_right(offsets, at) - 1, " ".join(tokens), f"whole field, {len(tokens)} words, {how}"

    def filter(self, document: Document) -> bool | tuple[bool, str]:
        if self._index is None:
            self._load()
        hashes, refs, items, joined = self._index
        n = self.config.n_grams
        for name, text in self._texts(document):
            tokens = normalize(text, self.config)
            if len(tokens) >= n:
                grams = _ngram_hashes(tokens, n)
                where = np.searchsorted(hashes, grams).clip(max=max(len(hashes) - 1, 0))
                hit = (hashes[where] == grams) if len(hashes) else np.zeros(len(grams), bool)
                if hit.any():
                    first = int(np.argmax(hit))
                    match = items[int(refs[where[first]])]
                    ngram, how, count = " ".join(tokens[first:first + n]), f"{n}-gram", int(hit.sum())
                else:
                    continue
            elif self.short_min_tokens:
                found = self._whole_field(tokens, joined["text"], "numbers as 0")
                # Bare arithmetic ("Find 25/12*5") says nothing once numbers are 0: compare it with its numbers.
                found = found or self._whole_field(normalize(text, self.config, keep_numbers=True), joined["exact"],
                                                   "numbers kept")
                if not found:
                    continue
                match, ngram, how = found
                match, count = items[match], 1
            else:
                continue
            document.metadata[CONTAMINATION] = {
                "benchmark": match["benchmark"], "benchmark_item": match["item"], "benchmark_field": match["field"],
                "field": name, "ngram": ngram, "match": how, "matched_ngrams": count,
            }
            self.stat_update(f"contaminated: {match['benchmark']}")
            return False, f"contaminated: {match['benchmark']}"
        return True


@dataclass
class DecontamResult:
    output: Path
    read: int
    kept: int
    removed: int
    unreadable: int
    hits: dict[str, int]
    index: IndexSummary
    parameters: dict


def decontaminate(
    input: str | Path,
    output: str | Path,
    against: str | list[BenchmarkSource],
    fields: list[str] | None = None,
    id_key: str = "id",
    n_grams: int = 13,
    short_min_tokens: int = 4,
    benchmarks_dir: str | Path | None = None,
    tasks: int = 1,
    workers: int = 1,
    progress: bool = True,
    executor: ExecutorOptions | None = None,
) -> DecontamResult:
    """Removes rows that overlap the benchmarks; writes OUTPUT/data, rejects/contaminated.jsonl and a card section.

    `fields`: the row fields checked (default: question and answer where the rows have them, else text).
    On Slurm the filter is submitted as a job array and JobSubmitted is raised; rerun once it has finished."""
    output = Path(output)
    sources = parse_against(against, benchmarks_dir) if isinstance(against, str) else against
    spec, schema = resolve_input(input, fields[0] if fields else None, id_key)
    if not fields:
        names = schema.names if schema is not None else first_record_keys(Path(str(input)).expanduser())
        fields = [f for f in ("question", "answer") if f in names] or [spec.text_key]
    if n_grams < 2:
        raise OptionError("--ngrams must be at least 2")
    config = NGramsDecontConfig(n_grams=n_grams)
    # Absolute: Ray and Slurm workers need not share this process's working directory.
    stage = output.resolve() / STATE / "decontam"
    resumable_stage(stage, {"input": input_signature(spec), "fields": fields, "id_key": id_key, "n_grams": n_grams,
                            "short_min_tokens": short_min_tokens, "tasks": tasks,
                            "against": [[s.name, *_benchmark_signature(s), s.fields, s.id_field] for s in sources]})
    summary = build_index(sources, stage / "index", config)
    removed = RemovedWriter(
        str(stage / "removed"), "contaminated",
        lambda d: {"reason": f"contaminated: {d.metadata[CONTAMINATION]['benchmark']}", **d.metadata[CONTAMINATION]},
    )
    pipeline = [
        RowReader(spec, progress=progress),
        SplitRejects(str(stage / "rejects")),
        BenchmarkNGramFilter(str(stage / "index"), fields, config, short_min_tokens, exclusion_writer=removed),
        RowWriter(str(stage / "data"), schema=schema),
    ]
    run_stages([Stage("curate-decontam", pipeline, tasks, stage / "logs")], executor, workers)
    # The removed rows are read from the stage before publish_stage closes it and moves its data away.
    hits = _write_contaminated(stage, output)
    unreadable, kept = publish_stage(stage, output, "decontam")
    parameters = {"input": str(input), "fields": fields, "n_grams": n_grams, "short_min_tokens": short_min_tokens,
                  "against": [s.location for s in sources]}
    result = DecontamResult(output=output, read=kept + sum(hits.values()), kept=kept, removed=sum(hits.values()),
                            unreadable=unreadable, hits=hits, index=summary, parameters=parameters)
    write_text_atomic(output / STATE / "decontam.json", json.dumps(
        {**parameters, "read": result.read, "kept": kept, "removed": result.removed, "hits": hits,
         "benchmarks": summary.benchmarks}, indent=2))
    root = benchmarks_dir or os.environ.get(BENCHMARKS_DIR_ENV)
    command = reproduce_command("decontam", input, options=[
        ("--against", against_option(against)), ("--output", output), ("--fields", ",".join(fields)),
        ("--ngrams", n_grams), ("--short-min-words", short_min_tokens), ("--id-key", id_key),
        ("--benchmarks-dir", root if root and isinstance(against, str) else None),
    ])
    write_report(input, output, "decontam", decontam_card_section(result), {
        "step": "decontamination", "parameters": list(parameters.items()), "command": command,
        "method": "Rows sharing a word n-gram with a benchmark item were removed; every other row is written back as "
                  "it was read.",
        "limitations": "Only verbatim overlap (after normalization) is found: a paraphrased or translated benchmark "
                       "item passes.",
    })
    shutil.rmtree(stage / "index", ignore_errors=True)
    return result


def against_option(against: str | list[BenchmarkSource]) -> str:
    """--against as given, or rebuilt from parsed sources (then every source is a file or hub location)."""
    if isinstance(against, str):
        return against
    return ",".join(s.location + (f"={'+'.join(s.fields)}" if s.fields else "") for s in against)


def decontaminate_dataset(directory: str | Path, against: str | list[BenchmarkSource], **options) -> DecontamResult:
    """Decontaminates a built dataset in place (DIR/data), for builders' --decontam option."""
    return decontaminate(directory, directory, against, **options)


def _write_contaminated(stage: Path, output: Path) -> dict[str, int]:
    destination = output / "rejects" / "contaminated.jsonl"
    destination.parent.mkdir(parents=True, exist_ok=True)
    if not list((stage / "removed").glob("*.jsonl")):
        destination.unlink(missing_ok=True)
        return {}
    query = f"SELECT * FROM read_json_auto('{jsonl_glob(stage / 'removed')}', format='newline_delimited')"
    with duckdb.connect() as connection:
        write_jsonl_query(connection, query + " ORDER BY benchmark, benchmark_item, id", destination)
        hits = connection.sql(f"SELECT benchmark, count(*) FROM ({query}) GROUP BY benchmark ORDER BY 1").fetchall()
    return dict(hits)


def decontam_card_section(result: DecontamResult) -> str:
    p = result.parameters
    lines = [
        "## Benchmark decontamination\n",
        (f"Rows whose {', '.join(f'`{f}`' for f in p['fields'])} share a word {p['n_grams']}-gram with a benchmark item "
         "(after lowercasing, LaTeX spacing and punctuation removal, numbers -> 0), or a field shorter than that lying "
         f"whole inside an item (at least {p['short_min_tokens']} words), were removed.\n"),
        "| benchmark | items | rows removed |", "|---|---|---|",
    ]
    for name, info in result.index.benchmarks.items():
        lines.append(f"| {name} | {info['items']:,} | {result.hits.get(name, 0):,} |")
    lines += ["", (f"{result.removed:,} of {result.read:,} rows removed; {result.kept:,} kept. Removed rows are in "
                   "`rejects/contaminated.jsonl` with the benchmark item and the n-gram they matched.")]
    return "\n".join(lines)


def decontam_job(job: DecontamJob, progress: bool = True) -> DecontamResult | None:
    """Runs `curate decontam`: into a new OUTPUT under its claim (None when up to date), or in place (no claim)."""
    return clean_once(job.input, job.output, "decontam", job.record(), lambda: decontaminate(
        job.input, job.output, job.against, fields=job.field_list, id_key=job.id_key, n_grams=job.ngrams,
        short_min_tokens=job.short_min_words, benchmarks_dir=job.benchmarks_dir, tasks=job.executor.tasks,
        workers=job.executor.workers, progress=progress, executor=job.executor), overwrite=job.overwrite)

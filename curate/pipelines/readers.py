"""Reading a corpus without losing anything.

datatrove's own readers skip a malformed line with a log warning. Here every record that cannot
become a document (bad JSON, invalid UTF-8, no text field, empty text, an unreadable file, a
parquet file without the text column, an id this task has already read) becomes a *reject*: a
Document flagged in its metadata with the reason and the raw record, which `SplitRejects` writes to
the rejects file.
"""

from __future__ import annotations

import glob as globlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import orjson
from datatrove.data import Document, DocumentsPipeline
from datatrove.pipeline.readers.base import BaseDiskReader
from datatrove.pipeline.readers.huggingface import HuggingFaceDatasetReader

from curate.errors import CurateError
from curate.options import InputFields
from curate.pipelines.installed import InstalledWithCurate

REJECT_REASON = "reject_reason"
JSONL_SUFFIXES = (".jsonl", ".json", ".ndjson", ".jsonl.gz", ".json.gz", ".jsonl.zst", ".json.zst", ".jsonl.bz2")
PARQUET_SUFFIXES = (".parquet",)
BOM = "\ufeff"


class NoInputFilesError(CurateError, FileNotFoundError):
    """An input folder or glob that matches no file: a run over it would read nothing and look successful."""


def is_reject(document: Document) -> bool:
    return REJECT_REASON in document.metadata


def make_reject(reason: str, source: str, position: int | None, raw: str = "", doc_id: str | None = None) -> Document:
    where = source if position is None else f"{source}/{position}"
    return Document(
        text=raw,
        id=doc_id or where,
        metadata={REJECT_REASON: reason, "source": source, "position": position},
    )


class FirstCopyOfEachId(InstalledWithCurate):
    """Reader mixin: a document whose id this task has already read is rejected as `duplicate_id`, so a task tags
    the first copy in (file, position) order. Copies read by different tasks are settled when the shards are
    queried (query.py); ids made from source and position are unique already.

    One set per task: about 100 bytes per id, so 10M ids in one task take about 1 GB."""

    def run(self, data: DocumentsPipeline = None, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        self._seen_ids: set[str] = set()
        yield from super().run(data, rank, world_size)

    def _first_copy(self, document: Document, source: str, position: int | None, raw: str, record: dict) -> Document:
        if document.id in self._seen_ids:
            self.stat_update("duplicate_ids")
            # Parquet and hub records arrive without a raw form (raw is ""): the rejected copy keeps the record as JSON.
            return make_reject("duplicate_id: an earlier record read by this task has this id", source, position,
                               raw or json.dumps(record, default=str), doc_id=document.id)
        self._seen_ids.add(document.id)
        return document


@dataclass(frozen=True)
class InputSpec(InputFields):
    """Where a corpus lives and how to read it (InputFields: the "Input" options). `path` is a file, a directory, a
    glob, or `hf:NAME`; `config`, a hub dataset's configuration."""

    config: str | None = None

    @property
    def is_hub(self) -> bool:
        return self.path.startswith("hf:")

    def fingerprint(self) -> dict:
        """What identifies the documents and their ids: written in tag manifests."""
        described = {"text_key": self.text_key, "id_key": self.id_key}
        if self.is_hub:
            return {"input": self.path, "split": self.split, "config": self.config, **described}
        return {"input": str(Path(self.path).expanduser().resolve()) if not globlib.has_magic(self.path) else self.path, **described}

    def list_files(self) -> list[str]:
        """The one input finder: every file the corpus readers read, relative to `folder_and_pattern()[0]`, sorted
        as datatrove deals them to ranks. Raises NoInputFilesError, naming the pattern, when nothing matches."""
        folder, pattern = self.folder_and_pattern()
        root = Path(folder)
        if pattern is None:
            paths = [p for p in root.rglob("*") if p.is_file()]
        else:
            paths = [Path(p) for p in globlib.glob(str(root / pattern), recursive=True) if Path(p).is_file()]
        if not paths:
            where = f"{pattern!r} in {folder}" if pattern else f"the folder {folder} (it is empty)"
            raise NoInputFilesError(f"No files found: nothing matches {where}. Check --input (quote globs: 'corpus/*.jsonl').")
        return sorted(str(p.relative_to(root)) for p in paths)

    def folder_and_pattern(self) -> tuple[str, str | None]:
        path = str(Path(self.path).expanduser())
        if globlib.has_magic(path):
            parts = Path(path).parts
            first_magic = next(i for i, part in enumerate(parts) if globlib.has_magic(part))
            folder = str(Path(*parts[:first_magic])) if first_magic else "."
            return folder, str(Path(*parts[first_magic:]))
        p = Path(path)
        if p.is_dir():
            return str(p), None
        if p.exists():
            return str(p.parent), p.name
        raise FileNotFoundError(
            f"input {self.path!r} does not exist. Give a file, a directory, a glob such as 'corpus/*.jsonl', "
            "or a Hugging Face dataset as 'hf:ORG/NAME'."
        )


class CorpusReader(FirstCopyOfEachId, BaseDiskReader):
    """JSON lines (optionally compressed) and parquet, chosen per file by its extension."""

    name = "📖 Corpus (jsonl/parquet, rejects kept)"
    _requires_dependencies = ["orjson", "pyarrow"]

    def __init__(self, spec: InputSpec, progress: bool = False, limit: int = -1, paths_file: str | None = None,
                 skip_files: tuple[str, ...] = ()):
        """`paths_file`: read exactly the files it lists (one relative path a line), dealt to ranks by their line,
        so a tags directory keeps its sharding while files are added to the input. `skip_files`: files of that
        list a later run re-tagged (they changed), read as if empty so the rank assignment stays the same."""
        folder, pattern = spec.folder_and_pattern()
        super().__init__(
            data_folder=folder,
            paths_file=paths_file,
            glob_pattern=pattern,
            text_key=spec.text_key,
            id_key=spec.id_key,
            doc_progress=progress,
            limit=limit,
            recursive=True,
        )
        self.skip_files = frozenset(skip_files)

    def _document(self, record: object, source: str, position: int, raw: str) -> Document:
        if not isinstance(record, dict):
            return make_reject(f"not_an_object: a JSON {type(record).__name__}", source, position, raw)
        if self.text_key not in record:
            keys = ", ".join(sorted(map(str, record))[:20])
            return make_reject(
                f"missing_text_field: no field {self.text_key!r} (fields: {keys}); pass --text-key", source, position, raw
            )
        text = record[self.text_key]
        if not isinstance(text, str):
            return make_reject(f"text_not_string: field {self.text_key!r} is {type(text).__name__}", source, position, raw)
        if not text.strip():
            return make_reject("empty_text: nothing but whitespace", source, position, raw)
        doc_id = record.get(self.id_key)
        if doc_id is None or (isinstance(doc_id, str) and not doc_id.strip()):
            doc_id = f"{source}/{position}"
        metadata = {k: v for k, v in record.items() if k not in (self.text_key, self.id_key)}
        metadata["source"] = source
        return self._first_copy(Document(text=text, id=str(doc_id), metadata=metadata), source, position, raw, record)

    def read_file(self, filepath: str) -> DocumentsPipeline:
        if filepath in self.skip_files:
            self.stat_update("superseded_files")
            return
        lower = filepath.lower()
        if lower.endswith(PARQUET_SUFFIXES):
            reading = self._read_parquet(filepath)
        elif lower.endswith(JSONL_SUFFIXES):
            reading = self._read_jsonl(filepath)
        else:
            self.stat_update("rejected_files")
            yield make_reject("unsupported_file_type: expected .jsonl[.gz|.zst] or .parquet "
                              "(a compressed JSON lines file must be named NAME.jsonl.gz)", filepath, None)
            return
        position = -1
        try:
            for position, document in reading:
                yield document
        except Exception as error:  # an unreadable or truncated file: keep what was read, record the rest
            self.stat_update("rejected_files")
            where = "before the first record" if position < 0 else f"after record {position}"
            yield make_reject(f"unreadable_file: {where}: {type(error).__name__}: {error}", filepath, None)

    def _read_jsonl(self, filepath: str) -> Iterator[tuple[int, Document]]:
        with self.data_folder.open(filepath, "rb", compression="infer") as f:
            for position, line in enumerate(f):
                if not line.strip():
                    continue
                with self.track_time():
                    try:
                        raw = line.decode("utf-8")
                        if position == 0:
                            raw = raw.removeprefix(BOM)  # editors on Windows start UTF-8 files with one
                    except UnicodeDecodeError as error:
                        yield position, make_reject(
                            f"invalid_utf8: bad byte at offset {error.start}", filepath, position,
                            line.decode("utf-8", errors="backslashreplace").rstrip("\n"),
                        )
                        continue
                    try:
                        record = orjson.loads(raw)
                    except orjson.JSONDecodeError as error:
                        yield position, make_reject(f"malformed_json: {error}", filepath, position, raw.rstrip("\n"))
                        continue
                    yield position, self._document(record, filepath, position, raw.rstrip("\n"))

    def _read_parquet(self, filepath: str) -> Iterator[tuple[int, Document]]:
        import pyarrow.parquet as pq

        with self.data_folder.open(filepath, "rb") as f, pq.ParquetFile(f) as parquet:
            columns = parquet.schema_arrow.names
            if self.text_key not in columns:
                yield -1, make_reject(
                    f"missing_text_column: no column {self.text_key!r} (columns: {', '.join(columns[:20])}); pass --text-key",
                    filepath, None,
                )
                return
            position = 0
            for batch in parquet.iter_batches(batch_size=1000):
                for record in batch.to_pylist():
                    with self.track_time():
                        raw = "" if isinstance(record.get(self.text_key), str) else json.dumps(record, default=str)
                        yield position, self._document(record, filepath, position, raw)
                    position += 1


class HubReader(FirstCopyOfEachId, HuggingFaceDatasetReader):
    """A Hugging Face dataset (hub name or local dataset script/folder), streamed when asked."""

    def __init__(self, spec: InputSpec, progress: bool = False, limit: int = -1):
        options = {"split": spec.split}
        if spec.config:
            options["name"] = spec.config
        super().__init__(
            dataset=spec.path.removeprefix("hf:"),
            dataset_options=options,
            streaming=spec.streaming,
            text_key=spec.text_key,
            id_key=spec.id_key,
            doc_progress=progress,
            limit=limit,
        )

    def get_document_from_dict(self, data: dict, source_file: str, id_in_file: int | str):
        text = data.get(self.text_key)
        if not isinstance(text, str) or not text.strip():
            reason = f"missing_text_field: no field {self.text_key!r}" if text is None else "empty_text: no text"
            return make_reject(reason, f"{source_file}/{id_in_file}", None, json.dumps(data, default=str))
        doc_id = data.get(self.id_key)
        metadata = {k: v for k, v in data.items() if k not in (self.text_key, self.id_key)}
        metadata["source"] = source_file
        document = Document(text=text, id=str(doc_id) if doc_id is not None else f"{source_file}/{id_in_file}", metadata=metadata)
        return self._first_copy(document, f"{source_file}/{id_in_file}", None, "", data)


def make_reader(spec: InputSpec, progress: bool = False, limit: int = -1, paths_file: str | None = None,
                skip_files: tuple[str, ...] = ()):
    if spec.is_hub:
        return HubReader(spec, progress, limit)
    return CorpusReader(spec, progress, limit, paths_file=paths_file, skip_files=skip_files)

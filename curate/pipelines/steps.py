"""datatrove steps: route rejects, tag documents, keep a selection, and write files whole or not at all."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import islice

import pyarrow as pa
from datatrove.data import Document, DocumentsPipeline
from datatrove.pipeline.base import PipelineStep
from datatrove.pipeline.writers.jsonl import JsonlWriter
from datatrove.pipeline.writers.parquet import ParquetWriter

from curate.behaviors import BEHAVIOR_NAMES
from curate.classifiers import get_classifier, resolve_name
from curate.errors import CurateError
from curate.files import PARTIAL
from curate.pipelines.installed import InstalledWithCurate
from curate.pipelines.query import KEPT_ELSEWHERE
from curate.pipelines.readers import REJECT_REASON, is_reject, make_reader, make_reject
from curate.schema import ATTRIBUTE_SCHEMA, EVIDENCE_TYPE, SCORES_TYPE, Labels, attribute_row

ATTRIBUTES = "curate_attributes"


class AtomicOutput(InstalledWithCurate):
    """Mixin for datatrove writers: write `NAME.partial`, rename to `NAME` once the file is closed,
    so a reader never sees half a shard and a crashed task leaves nothing that looks finished.

    Files are published both when a writer closes one mid-run (size rotation, InferenceRunner's
    per-chunk outputs) and when the writer itself closes. A writer left by an exception (Ctrl-C, SIGTERM,
    a failing step; GeneratorExit when a step after it stopped) closes its open files under their
    `.partial` names: a shard cut short must not look finished to `stats`, `build` or a rerun."""

    def __exit__(self, exc_type, exc_val, exc_tb):
        if exc_type is None:
            return super().__exit__(exc_type, exc_val, exc_tb)
        self.output_mg.close()  # the files stay NAME.partial; the rerun of this rank rewrites them
        return False

    def _get_output_filename(self, document, rank=0, **kwargs):
        return super()._get_output_filename(document, rank, **kwargs) + PARTIAL

    def close_file(self, filename):
        super().close_file(filename)
        self._publish(filename)

    def close(self):
        still_open = list(self.output_mg.get_open_files())
        super().close()
        for name in still_open:
            self._publish(name)

    def _publish(self, name: str) -> None:
        if name.endswith(PARTIAL) and self.output_folder.exists(name):
            self.output_folder.mv(name, name.removesuffix(PARTIAL))


class RejectsWriter(AtomicOutput, JsonlWriter):
    name = "🗑 Rejects"

    def __init__(self, output_folder: str, prefix: str = ""):
        super().__init__(output_folder, output_filename=f"rejects_{prefix}${{rank}}.jsonl", compression=None,
                         adapter=_reject_row)


def _reject_row(_writer, document: Document) -> dict:
    return {
        "reason": document.metadata[REJECT_REASON],
        "source": document.metadata.get("source"),
        "position": document.metadata.get("position"),
        "id": document.id,
        "raw": document.text,
    }


class SplitRejects(PipelineStep):
    """Writes rejected records (with their reason) to the rejects folder and passes the rest on."""

    name = "🗑 Split rejects"
    type = "🔀 - ROUTER"

    def __init__(self, rejects_folder: str, prefix: str = ""):
        super().__init__()
        self.rejects_folder = rejects_folder
        self.prefix = prefix  # a later run over the same folder (a tags update) names its files apart

    def run(self, data: DocumentsPipeline, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        with RejectsWriter(self.rejects_folder, self.prefix) as writer:
            for document in data:
                if is_reject(document):
                    writer.write(document, rank)
                    self.stat_update("rejected", f"rejected: {document.metadata[REJECT_REASON].split(':')[0][:60]}")
                    continue
                self.stat_update("read")
                yield document


def batched(items: Iterable, size: int) -> Iterator[list]:
    iterator = iter(items)
    while batch := list(islice(iterator, size)):
        yield batch


class TagDocuments(PipelineStep):
    """Runs a registered behavior classifier over batches of documents and attaches one attribute row each."""

    name = "🏷 Tag behaviors"
    type = "🏷 - TAGGER"

    def __init__(self, classifier: str, batch_size: int = 64, classifier_options: dict | None = None):
        super().__init__()
        self.classifier_name, _ = resolve_name(classifier)  # fails now, listing known names, if unknown
        self.classifier_spec = classifier
        self.classifier_options = classifier_options or {}
        self.batch_size = batch_size

    def run(self, data: DocumentsPipeline, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        # Built inside the worker: spaCy pipelines and model clients do not travel between processes.
        classifier = get_classifier(self.classifier_spec, **self.classifier_options)
        for batch in batched(data, self.batch_size):
            with self.track_time(unit="batch"):
                labels = self._classify(classifier, [d.text for d in batch])
            for document, label in zip(batch, labels, strict=True):
                row = attribute_row(
                    document.id, len(document.text), label, classifier.name, classifier.model, classifier.prompt_version,
                    source=document.metadata.get("source"),
                )
                document.metadata[ATTRIBUTES] = row
                if label.error:
                    self.stat_update("tag_errors")
                else:
                    self.stat_update("tagged")
                    for behavior in BEHAVIOR_NAMES:
                        if label.counts.get(behavior):
                            self.stat_update(f"has {behavior}")
                yield document

    @staticmethod
    def _classify(classifier, texts: list[str]) -> list[Labels]:
        try:
            labels = classifier.classify(texts)
            if len(labels) != len(texts):
                raise RuntimeError(f"classifier returned {len(labels)} labels for {len(texts)} texts")
            return labels
        except Exception:
            # One bad document must not cost the batch: retry each alone and record what fails.
            results = []
            for text in texts:
                try:
                    results.append(classifier.classify([text])[0])
                except Exception as error:
                    results.append(Labels.failed(f"classifier: {type(error).__name__}: {error}"))
            return results


class AttributeWriter(AtomicOutput, ParquetWriter):
    """Writes one attribute row per document (the attribute schema); no source text."""

    name = "📒 Attributes"

    def __init__(self, output_folder: str, prefix: str = ""):
        super().__init__(
            output_folder,
            output_filename=f"attributes_{prefix}${{rank}}.parquet",
            adapter=lambda _writer, document: document.metadata[ATTRIBUTES],
            schema=ATTRIBUTE_SCHEMA,
            use_content_defined_chunking=False,
        )


DATASET_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("text", pa.string()),
        *[(name, pa.int32()) for name in BEHAVIOR_NAMES],
        ("evidence", EVIDENCE_TYPE),
        ("scores", SCORES_TYPE),
        ("classifier", pa.string()),
        ("n_chars", pa.int64()),
        ("source", pa.string()),
    ]
)


def _dataset_row(writer, document: Document) -> dict:
    attributes = document.metadata[ATTRIBUTES]
    return {
        **{name: document.metadata.get(name) for name in writer.keep_columns},  # source columns asked to travel
        "id": document.id,
        "text": document.text,
        **{b: attributes[b] for b in BEHAVIOR_NAMES},
        "evidence": attributes["evidence"],
        "scores": attributes.get("scores"),  # absent in shards written before the column existed
        "classifier": attributes["classifier"],
        "n_chars": attributes["n_chars"],
        "source": str(document.metadata.get("source", "")),
    }


class DatasetWriter(AtomicOutput, ParquetWriter):
    """Selected documents with their text and attributes, loadable by `datasets.load_dataset('parquet')`, and the
    source columns of `kept` (fields, typed by kept_column_fields) after the attributes."""

    name = "📒 Dataset"

    def __init__(self, output_folder: str, kept: list[pa.Field] | None = None):
        kept = list(kept or [])
        self.keep_columns = [f.name for f in kept]
        super().__init__(
            output_folder,
            output_filename="train-${rank}.parquet",
            adapter=_dataset_row,
            schema=pa.schema([*DATASET_SCHEMA, *kept]),
            max_file_size=-1,  # one file per task keeps the `train-*.parquet` split naming (no "000_" prefix)
        )


class KeepColumnsError(CurateError, ValueError):
    """--keep-columns names a column the records do not have, or one the dataset already writes."""


def kept_column_fields(spec, columns: list[str], sample: int = 1000) -> list[pa.Field]:
    """The arrow type of each source column to keep, from the first `sample` records (a parquet input's own types;
    a jsonl column that is null in all of them is kept as string). `id` and the text always stay and are skipped."""
    wanted = [c for c in dict.fromkeys(columns) if c not in ("id", "text", spec.id_key, spec.text_key)]
    taken = [c for c in wanted if c in DATASET_SCHEMA.names]
    if taken:
        raise KeepColumnsError(f"--keep-columns {', '.join(taken)}: the dataset already has a column of that name "
                               "(behavior counts and bookkeeping); rename the field in the source")
    if not wanted:
        return []
    values: dict[str, list] = {c: [] for c in wanted}
    seen: set[str] = set()
    for document in islice((d for d in make_reader(spec, limit=sample).run() if not is_reject(d)), sample):
        seen.update(document.metadata)
        for column in wanted:
            values[column].append(document.metadata.get(column))
    missing = [c for c in wanted if c not in seen]
    if missing:
        fields = ", ".join(sorted(seen - {"source"})) or "none"
        raise KeepColumnsError(f"--keep-columns {', '.join(missing)}: no record of the first {sample:,} has that field "
                               f"(fields: {fields})")
    found = []
    for column in wanted:
        kind = pa.array(values[column]).type
        found.append(pa.field(column, pa.string() if pa.types.is_null(kind) else kind))
    return found


class KeepFirstCopy(PipelineStep):
    """Turns every copy of a repeated id but the one the tags kept (query.py's rule; the table comes from
    query.write_kept_copies) into a `duplicate_id` reject: a pass over the corpus with any number of tasks then
    drops the copies the tag run dropped. Goes between the reader and SplitRejects."""

    name = "🪞 Keep the first copy of each id"
    type = "🔻 - FILTER"

    def __init__(self, kept_copies_path: str):
        super().__init__()
        self.kept_copies_path = kept_copies_path

    def run(self, data: DocumentsPipeline, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        import pyarrow.parquet as pq

        table = pq.read_table(self.kept_copies_path, columns=["id", "source"]).to_pydict()
        kept = dict(zip(table["id"], table["source"], strict=True))
        for document in data:
            source = document.metadata.get("source")
            kept_source = None if is_reject(document) else kept.get(document.id)
            if kept_source is not None and kept_source != source:
                self.stat_update("duplicate_ids")
                document = make_reject(KEPT_ELSEWHERE.format(kept_source), source, None, document.text, doc_id=document.id)
            yield document


class KeepSelected(PipelineStep):
    """Keeps the documents whose id is in a selection parquet (id + attribute columns), attaching their attributes."""

    name = "🎯 Keep selected"
    type = "🔻 - FILTER"

    def __init__(self, selection_path: str):
        super().__init__()
        self.selection_path = selection_path

    def run(self, data: DocumentsPipeline, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        import pyarrow.parquet as pq

        selection = {row["id"]: row for row in pq.read_table(self.selection_path).to_pylist()}
        for document in data:
            row = selection.pop(document.id, None)  # pop: a duplicated id in the corpus is written once
            if row is None:
                self.stat_update("not selected")
                continue
            document.metadata[ATTRIBUTES] = row
            self.stat_update("selected")
            yield document

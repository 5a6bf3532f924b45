"""The one dataset-file finder (curate.dataset_files) and the rule each reader keeps on top of it: export reads a
loose folder's top level only, mcqa reads its source folders as they are, the cards read data/ only, dedup takes a
built dataset's data/ folder, and each says in its own words when there is nothing to read. Which split a file holds
is one rule (split_of) for export, the cards and dedup."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from curate.builders.mcqa import input_files as mcqa_files
from curate.data_cards.cards import data_files, data_splits
from curate.dataset_files import dataset_files, files_under, split_of
from curate.handoff.export import ExportError
from curate.handoff.export import input_files as export_files
from curate.pipelines.dedup import SPLIT, RowReader, resolve_input
from curate.pipelines.query import parquet_files
from curate.pipelines.readers import InputSpec


def parquet(path: Path, **columns) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(columns or {"question": ["q"], "answer": ["1"]}), path)
    return path


@pytest.fixture
def built(tmp_path: Path) -> Path:
    """A dataset as a builder leaves it: two splits in data/, with rejects, bookkeeping, a card and a shard still
    being written beside them."""
    root = tmp_path / "built"
    parquet(root / "data" / "train-00000.parquet")
    parquet(root / "data" / "test-00000.parquet")
    (root / "data" / "train-00001.parquet.partial").write_bytes(b"half a shard")
    parquet(root / "rejects" / "rejected.parquet")
    parquet(root / ".curate" / "state.parquet")
    parquet(root / "data" / "_logs" / "stats.parquet")
    (root / "README.md").write_text("# card\n")
    return root


def names(files) -> list[str]:
    return [Path(f).name for f in files]


def test_a_built_dataset_is_its_data_folder(built: Path):
    assert names(dataset_files(built)) == ["test-00000.parquet", "train-00000.parquet"]
    assert dataset_files(built, nested=False) == dataset_files(built)  # data/ is read whole either way
    assert names(data_files(built)) == ["test-00000.parquet", "train-00000.parquet"]
    assert data_splits(built) == ["test", "train"]
    assert [split for split, _ in export_files(built)] == ["test", "train"]


def test_a_loose_folder_skips_rejects_bookkeeping_and_unfinished_shards(tmp_path: Path):
    parquet(tmp_path / "part-0.parquet")
    parquet(tmp_path / "nested" / "part-1.parquet")
    parquet(tmp_path / "rejects" / "bad.parquet")
    parquet(tmp_path / "_tmp" / "x.parquet")
    (tmp_path / "part-2.parquet.partial").write_bytes(b"")
    assert names(dataset_files(tmp_path)) == ["part-1.parquet", "part-0.parquet"]  # sorted by path: nested/ < part-0
    assert names(dataset_files(tmp_path, nested=False)) == ["part-0.parquet"]
    assert names(parquet_files(tmp_path)) == names(files_under(tmp_path)) == ["part-1.parquet", "part-0.parquet"]


def test_a_file_is_itself_and_a_glob_its_matches(tmp_path: Path):
    single = parquet(tmp_path / "rows.parquet")
    notes = tmp_path / "notes.txt"
    notes.write_text("x")
    assert dataset_files(single) == [single]
    assert dataset_files(notes) == [notes]  # a file named outright is read whatever its name
    assert dataset_files(str(tmp_path / "*.parquet")) == [single]
    assert dataset_files(tmp_path / "absent") == []
    assert parquet_files(single) == [str(single)]


def test_export_reads_a_loose_folders_top_level_only_and_says_when_there_is_nothing(tmp_path: Path):
    parquet(tmp_path / "flat" / "train-00000.parquet")
    parquet(tmp_path / "flat" / "sub" / "test-00000.parquet")
    parquet(tmp_path / "deep" / "sub" / "test-00000.parquet")
    parquet(tmp_path / "flat" / "rows.parquet")
    assert [(split, f.name) for split, f in export_files(tmp_path / "flat")] == [
        ("train", "rows.parquet"), ("train", "train-00000.parquet")]  # a name without '-SPLIT' is train
    with pytest.raises(ExportError, match=r"no parquet files in .*deep \(expected .*deep/data/<split>-\*\.parquet\)"):
        export_files(tmp_path / "deep")
    with pytest.raises(ExportError, match=r"absent does not exist"):
        export_files(tmp_path / "absent")


def test_mcqa_reads_a_source_folder_as_it_is(tmp_path: Path):
    source = tmp_path / "mmlu"
    (source / "data").mkdir(parents=True)
    (source / "data" / "test.jsonl").write_text("{}\n")
    (source / "dev" / "rejects").mkdir(parents=True)
    (source / "dev" / "rejects" / "a.csv").write_text("q,a\n")
    (source / "_extra").mkdir()
    (source / "_extra" / "b.json").write_text("[]")
    (source / "notes.md").write_text("not an input")
    # Not a built dataset: every source file counts, whatever folder it sits in.
    assert names(mcqa_files(str(source))) == ["b.json", "test.jsonl", "a.csv"]
    assert names(mcqa_files(str(source / "**" / "*.csv"))) == ["a.csv"]
    with pytest.raises(FileNotFoundError, match="does not exist"):
        mcqa_files(str(tmp_path / "absent"))
    with pytest.raises(FileNotFoundError, match=r"no \.json/\.jsonl/\.csv/\.parquet files under"):
        mcqa_files(str(tmp_path / "*.csv"))


def test_the_card_reads_data_only(tmp_path: Path):
    parquet(tmp_path / "out" / "train-00000.parquet")  # not in data/: a card does not describe it
    assert data_files(tmp_path / "out") == []


def test_dedup_takes_a_built_datasets_data_folder_and_a_parquet_globs_schema(built: Path, tmp_path: Path):
    spec, schema = resolve_input(built, text_key=None)
    assert spec.path == str(built / "data") and spec.text_key == "question"
    assert schema.names == ["question", "answer"]
    parquet(tmp_path / "loose" / "a.parquet", text=["t"], id=["1"])
    spec, schema = resolve_input(str(tmp_path / "loose" / "*.parquet"), text_key=None)
    assert spec.path == str(tmp_path / "loose" / "*.parquet") and schema.names == ["text", "id"]


@pytest.mark.parametrize(("name", "split"), [
    ("train-00000.parquet", "train"),  # curate's layout
    ("validation.hard-00003.parquet", "validation.hard"),
    ("test-00000-of-00004.parquet", "test"),  # the hub's
    ("000_train-00002.parquet", "train"),  # behind datatrove's roll-over counter
    ("train_v2-00000.parquet", "train_v2"),
    ("corpus.parquet", "train"),  # a loose file names no split
    ("gsm8k-test.parquet", "train"),
    ("part-0.parquet", "train"),
])
def test_one_split_rule_for_export_the_cards_and_dedup(tmp_path: Path, name: str, split: str):
    assert split_of(name) == split
    parquet(tmp_path / "dataset" / "data" / name)
    assert data_splits(tmp_path / "dataset") == [split]
    assert [s for s, _ in export_files(tmp_path / "dataset")] == [split]
    reader = RowReader(InputSpec(str(tmp_path / "dataset" / "data"), text_key="question"))
    assert [document.metadata[SPLIT] for document in reader.run()] == [split]

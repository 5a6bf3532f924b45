"""The one atomic write for single files (curate.files.atomic_path): whole or not at all."""

import pytest

from curate.files import (
    PARTIAL,
    REPLACED,
    atomic_folder,
    atomic_open,
    atomic_open_kept,
    atomic_path,
    replace_folder,
    write_text_atomic,
)


def test_a_finished_write_replaces_the_file_and_leaves_no_partial(tmp_path):
    path = tmp_path / "deep" / "report.json"
    write_text_atomic(path, "old")
    with atomic_path(path) as partial:
        partial.write_text("new")
        assert path.read_text() == "old"  # readers see the old file until the write is whole
    assert path.read_text() == "new"
    assert list(path.parent.iterdir()) == [path]


def test_a_failed_write_keeps_the_old_file_and_removes_the_partial(tmp_path):
    path = tmp_path / "report.json"
    write_text_atomic(path, "old")
    with pytest.raises(RuntimeError), atomic_path(path) as partial:
        partial.write_text("half")
        raise RuntimeError("crash mid-write")
    assert path.read_text() == "old"
    assert not path.with_name(path.name + PARTIAL).exists()


def test_atomic_open_writes_text_as_utf8_and_removes_the_partial_on_failure(tmp_path):
    path = tmp_path / "rejects" / "rows.jsonl"
    with atomic_open(path) as out:
        out.write("ünïcode\n")
        assert not path.exists()
        assert out.name == str(path.with_name(path.name + PARTIAL))
    assert path.read_bytes() == "ünïcode\n".encode()
    with pytest.raises(ValueError), atomic_open(path, "wb") as out:
        out.write(b"half")
        raise ValueError("crash mid-write")
    assert path.read_bytes() == "ünïcode\n".encode()
    assert sorted(p.name for p in path.parent.iterdir()) == ["rows.jsonl"]


def test_atomic_open_kept_puts_what_was_written_in_place_even_when_the_block_raises(tmp_path):
    path = tmp_path / "rejects" / "rejects.jsonl"
    write_text_atomic(path, "an earlier run's\n")
    with pytest.raises(RuntimeError), atomic_open_kept(path) as out:
        out.write('{"reason": "ünwanted"}\n')
        assert path.read_text() == "an earlier run's\n"  # readers see the old file while this one is written
        raise RuntimeError("the build gave up")
    assert path.read_text(encoding="utf-8") == '{"reason": "ünwanted"}\n'
    assert sorted(p.name for p in path.parent.iterdir()) == ["rejects.jsonl"]
    with atomic_open_kept(path, "wb") as out:
        out.write(b"whole")
    assert path.read_bytes() == b"whole"


def test_atomic_folder_swaps_the_whole_folder_in_or_leaves_the_old_one(tmp_path):
    final = tmp_path / "data"
    final.mkdir()
    (final / "old-00000.parquet").write_text("old")
    with pytest.raises(RuntimeError), atomic_folder(final) as staged:
        (staged / "train-00000.parquet").write_text("half")
        raise RuntimeError("crash mid-export")
    assert [p.name for p in final.iterdir()] == ["old-00000.parquet"]
    with atomic_folder(final) as staged:
        (staged / "train-00000.parquet").write_text("new")
        assert [p.name for p in final.iterdir()] == ["old-00000.parquet"]  # readers see the old folder meanwhile
    assert [p.name for p in final.iterdir()] == ["train-00000.parquet"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data"]


def test_replace_folder_recovers_from_a_swap_cut_short_and_fills_a_missing_place(tmp_path):
    final, new = tmp_path / "out" / "data", tmp_path / "stage" / "data"
    new.mkdir(parents=True)
    (new / "a.parquet").write_text("a")
    final.parent.mkdir()
    (final.parent / ("data" + REPLACED)).mkdir()  # an earlier swap stopped between its renames
    replace_folder(new, final)
    assert [p.name for p in final.iterdir()] == ["a.parquet"]
    assert not new.exists()
    assert [p.name for p in final.parent.iterdir()] == ["data"]


def test_replace_folder_without_a_new_folder_leaves_the_old_one(tmp_path):
    final = tmp_path / "data"
    final.mkdir()
    (final / "kept.parquet").write_text("old")
    with pytest.raises(FileNotFoundError):
        replace_folder(tmp_path / "missing", final)
    assert [p.name for p in final.iterdir()] == ["kept.parquet"]

"""The one atomic write for single files (curate.files.atomic_path): whole or not at all."""

import pytest

from curate.files import PARTIAL, atomic_path, write_text_atomic


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

"""A generated corrupted corpus through `curate tag` and `curate build`: no crash, every reject kept with
a reason, every valid document kept, a duplicate id written once in the dataset (its first copy) and its other
copies rejected. The full-size case (a 50 MB document, 100,000 tiny documents) runs by default, most of its time the
50 MB document. It held a million tiny documents (210 s), then 300,000 (138-173 s), each time the suite neared CI's
25 minutes; the per-document paths it exercises are the same at 100,000."""

from __future__ import annotations

import json
import re

import duckdb
import pytest
from typer.testing import CliRunner

from curate.cli import app
from curate.pipelines.query import behavior_stats
from tests.support.corrupt_corpus import write_corrupt_corpus

# The pipeline is under test, not the classifier: cues_v1, the cheapest cue version, tags the big document's repeated
# sentence in about 2/3 of the default's CPU (whose Countdown cues check every "= a op b"), which keeps this case short.
CUES = "cues_v1"

runner = CliRunner()


def rejects(folder) -> list[dict]:
    # Split on newlines only: a reject's raw bytes can hold U+2028 or U+0085, which str.splitlines also splits on.
    return [json.loads(line) for p in sorted(folder.glob("*.jsonl")) for line in p.read_text().split("\n") if line]


def check(tmp_path, big_mb: float, tiny: int) -> None:
    corpus = write_corrupt_corpus(tmp_path / "corpus", big_mb=big_mb, tiny=tiny)
    tags = tmp_path / "tags"
    tagged = runner.invoke(app, ["tag", "--input", str(corpus.folder), "--output", str(tags), "--tasks", "3",
                                 "--workers", "2", "--classifier", CUES], catch_exceptions=False)
    assert tagged.exit_code == 0, tagged.output
    shards = str(tags / CUES / "*attributes_*.parquet")
    ids = [r[0] for r in duckdb.connect().sql(f"SELECT id FROM read_parquet('{shards}')").fetchall()]
    assert set(ids) == corpus.valid_ids
    # A task tags the first copy it reads; good-0's second copy is in another task's file, so the shards hold
    # it too, and every query counts one.
    assert len(ids) == len(corpus.valid_ids) + 1
    assert behavior_stats(tags / CUES)[0].documents == len(corpus.valid_ids)
    big = duckdb.connect().sql(f"SELECT n_chars, error FROM read_parquet('{shards}') WHERE id = 'big'").fetchall()
    assert big == [(int(big_mb * 1024 * 1024), None)]  # tagged whole, no error
    kept = rejects(tags / CUES / "rejects")
    assert len(kept) == corpus.rejects
    assert all(r["reason"] and r["source"] for r in kept)
    reasons = {r["reason"].split(":")[0] for r in kept}
    assert {"malformed_json", "invalid_utf8", "missing_text_field", "text_not_string", "empty_text",
            "missing_text_column", "unreadable_file", "duplicate_id"} <= reasons
    assert sorted(r["id"] for r in kept if r["reason"].startswith("duplicate_id")) == sorted(corpus.duplicate_ids)

    built = runner.invoke(app, ["build", "--behaviors", "none", "--input", str(corpus.folder), "--output",
                                str(tmp_path / "out"), "--tags", str(tags), "--tasks", "3", "--classifier", CUES], catch_exceptions=False)
    assert built.exit_code == 0, built.output
    assert re.search(r"duplicate ids dropped across files\W+1\b", built.output), built.output
    data = str(tmp_path / "out" / "data" / "*.parquet")
    rows = duckdb.connect().sql(f"SELECT id, text FROM read_parquet('{data}')").fetchall()
    dataset_ids = [r[0] for r in rows]
    assert len(dataset_ids) == len(set(dataset_ids)), "a duplicated id was written twice"
    assert set(dataset_ids) <= corpus.valid_ids
    assert all(corpus.first_copies[i] == text for i, text in rows if i in corpus.duplicate_ids), "not the first copy"
    assert len(rejects(tmp_path / "out" / "rejects")) == corpus.rejects
    assert f"| duplicate_id | {len(corpus.duplicate_ids)} |" in (tmp_path / "out" / "README.md").read_text()


def test_corrupt_corpus_through_tag_and_build(tmp_path):
    check(tmp_path, big_mb=2, tiny=2000)


@pytest.mark.slow
def test_corrupt_corpus_full_size(tmp_path):
    check(tmp_path, big_mb=50, tiny=100_000)

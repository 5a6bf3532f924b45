"""Bad input: the run completes, every rejected record is kept with its reason, no valid document is lost."""

import gzip
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from curate.cli import app

# The pipeline is under test, not the classifier: cues_v1, the cheapest cue version, tags the big document's repeated
# sentence in about 2/3 of the default's CPU (whose Countdown cues check every "= a op b"), which keeps this case short.
CUES = "cues_v1"

runner = CliRunner()
# Big enough to cross every buffer and batch boundary; the 50 MB document is test_bad_corpus_suite's full-size case,
# so this one stays small enough not to double that cost.
BIG_CHARS = 4 * 1024 * 1024
SENTENCE = "Check: 2 + 2 = 4, which matches. "


@pytest.fixture(scope="module")
def messy_corpus(tmp_path_factory) -> tuple[Path, set[str]]:
    folder = tmp_path_factory.mktemp("messy")
    valid: set[str] = set()
    lines = [
        json.dumps({"id": "ok-1", "text": "Wait, that's wrong. Let me redo it."}).encode(),
        b'{"id": "broken", "text": "unterminated',
        json.dumps({"id": "ok-2", "text": "First, we find x."}).encode(),
        b'{"id": "latin1", "text": "caf\xe9 au lait"}',
        json.dumps({"id": "no-text", "body": "the text is under another key"}).encode(),
        json.dumps({"id": "empty", "text": "   \n "}).encode(),
        json.dumps({"id": "not-str", "text": 42}).encode(),
        json.dumps(["a", "list"]).encode(),
        b"",
        json.dumps({"text": "No id here; it gets one from its position."}).encode(),
    ]
    (folder / "mixed.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    valid |= {"ok-1", "ok-2", "mixed.jsonl/9"}
    big_text = (SENTENCE * (BIG_CHARS // len(SENTENCE) + 1))[:BIG_CHARS]
    (folder / "big.jsonl").write_text(json.dumps({"id": "big", "text": big_text}) + "\n")
    valid.add("big")
    (folder / "corrupt.jsonl.gz").write_bytes(b"\x1f\x8b\x08\x00this is not gzip data at all")
    with gzip.open(folder / "good.jsonl.gz", "wt") as f:
        f.write(json.dumps({"id": "gz-1", "text": "It suffices to show n > 0."}) + "\n")
    valid.add("gz-1")
    pq.write_table(pa.table({"id": ["p1"], "content": ["no text column"]}), folder / "wrong_schema.parquet")
    pq.write_table(pa.table({"id": ["p2", "p3"], "text": ["Step 1: factor.", None]}), folder / "nullable.parquet")
    valid.add("p2")
    (folder / "notes.txt").write_text("not a corpus file")
    return folder, valid


@pytest.fixture(scope="module")
def built(messy_corpus, tmp_path_factory):
    folder, _ = messy_corpus
    tmp_path = tmp_path_factory.mktemp("built")
    result = runner.invoke(app, ["build", "--behaviors", "none", "--input", str(folder), "--output", str(tmp_path / "out"),
                                 "--tags", str(tmp_path / "tags"), "--classifier", CUES], catch_exceptions=False)
    return tmp_path, result


def test_run_completes_keeps_rejects_and_every_valid_document(messy_corpus, built):
    _, valid = messy_corpus
    tmp_path, result = built
    out = tmp_path / "out"
    assert result.exit_code == 0, result.output
    import duckdb

    with duckdb.connect() as con:
        tagged = {r[0] for r in con.sql(f"SELECT id FROM read_parquet('{tmp_path}/tags/{CUES}/*.parquet')").fetchall()}
    assert {v.split("/")[-1] if "/" in v else v for v in valid} <= {t.split("/")[-1] if "/" in t else t for t in tagged}
    assert len(tagged) == len(valid)

    rejects = [json.loads(line) for p in sorted((tmp_path / "tags" / CUES / "rejects").glob("*.jsonl"))
               for line in p.read_text().splitlines()]
    kinds = sorted(r["reason"].split(":")[0] for r in rejects)
    assert kinds == sorted([
        "malformed_json", "invalid_utf8", "missing_text_field", "empty_text", "text_not_string", "not_an_object",
        "unreadable_file", "missing_text_column", "text_not_string", "unsupported_file_type",
    ])
    latin = next(r for r in rejects if r["reason"].startswith("invalid_utf8"))
    assert "caf\\xe9" in latin["raw"] and latin["position"] == 3
    broken = next(r for r in rejects if r["reason"].startswith("malformed_json"))
    assert broken["raw"].startswith('{"id": "broken"')
    # the same rejects are kept beside the built dataset, and the summary reports them
    assert list((out / "rejects").glob("rejects_*.jsonl"))
    assert "rejected" in result.output and "10" in result.output
    assert not list(out.rglob("*.partial")) and not list((tmp_path / "tags").rglob("*.partial"))


def test_big_document_is_tagged_whole(built):
    tmp_path, _ = built
    rows = pa.concat_tables([pq.read_table(p) for p in (tmp_path / "tags" / CUES).glob("*.parquet")]).to_pylist()
    row = next(r for r in rows if r["id"] == "big")
    assert row["n_chars"] == BIG_CHARS
    assert row["verification"] >= BIG_CHARS // len(SENTENCE)  # every whole sentence of the big document is a check
    assert row["error"] is None

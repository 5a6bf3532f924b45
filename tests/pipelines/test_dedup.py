import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from curate.pipelines.dedup import dedup, dedup_dataset, minhash_config


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _write(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def _kept(directory: Path) -> list[dict]:
    return pq.read_table(sorted(str(p) for p in (directory / "data").glob("*.parquet"))).to_pylist()


def test_threshold_picks_lsh_parameters():
    for threshold in (0.6, 0.75, 0.9):
        config = minhash_config(threshold)
        assert abs((1 / config.num_buckets) ** (1 / config.hashes_per_bucket) - threshold) < 0.03
    with pytest.raises(ValueError):
        minhash_config(1.5)


def test_exact_and_near_duplicates_across_tasks_name_the_kept_row(shared_data, tmp_path):
    gsm = _rows(shared_data / "gsm8k" / "test.jsonl")
    originals = [{"id": f"g{i}", **r} for i, r in enumerate(gsm[:300])]
    exact = [{"id": f"exact{i}", "question": "  " + r["question"].upper() + " ", "answer": r["answer"]}
             for i, r in enumerate(gsm[:50])]
    # One changed word in a 40-60 word question: Jaccard of 5-gram shingles stays well above 0.75.
    near = [{"id": f"near{i}", "question": r["question"].rstrip("?") + " altogether?", "answer": r["answer"]}
            for i, r in enumerate(gsm[50:100], start=50)]
    others = [{"id": f"o{i}", **r} for i, r in enumerate(gsm[300:400])]
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    _write(corpus / "a.jsonl", originals + exact[:25])  # same task as their originals: exact pass
    _write(corpus / "b.jsonl", exact[25:] + near + others)  # another task: MinHash
    result = dedup(corpus, tmp_path / "out", text_key="question", tasks=2, progress=False)

    kept_ids = {r["id"] for r in _kept(tmp_path / "out")}
    assert kept_ids == {r["id"] for r in originals + others}
    assert result.kept == 400 and result.removed == 100 and result.read == 500
    assert result.exact_removed >= 25
    removed = _rows(tmp_path / "out" / "rejects" / "duplicates.jsonl")
    assert len(removed) == 100
    for row in removed:
        index = int(row["id"].removeprefix("exact").removeprefix("near"))
        assert row["duplicate_of"] == f"g{index}", row
        assert row["reason"] in ("exact_duplicate", "near_duplicate")
        assert row["row"]["answer"] == gsm[index]["answer"]
    card = (tmp_path / "out" / "README.md").read_text()
    assert "## Deduplication" in card and "| near duplicates removed |" in card


def test_clean_set_loses_nothing(shared_data, tmp_path):
    rows = _rows(shared_data / "math500" / "test.jsonl")
    _write(tmp_path / "math.jsonl", rows)
    result = dedup(tmp_path / "math.jsonl", tmp_path / "out", text_key="problem", progress=False)
    assert result.removed == 0 and result.kept == 500
    assert not (tmp_path / "out" / "rejects" / "duplicates.jsonl").exists()


def test_dedup_dataset_in_place_keeps_columns_and_splits(shared_data, tmp_path):
    gsm = _rows(shared_data / "gsm8k" / "test.jsonl")[:120]
    dataset = tmp_path / "ds"
    (dataset / "data").mkdir(parents=True)
    schema = pa.schema([("id", pa.string()), ("question", pa.string()), ("answer", pa.string()),
                        ("data_source", pa.string()), ("level", pa.int32())])
    train = [{"id": f"t{i}", "question": r["question"], "answer": r["answer"], "data_source": "curate/math", "level": i % 5}
             for i, r in enumerate(gsm[:100])]
    train += [{**train[i], "id": f"dup{i}"} for i in range(10)]
    test = [{"id": f"v{i}", "question": r["question"], "answer": r["answer"], "data_source": "curate/math", "level": 1}
            for i, r in enumerate(gsm[100:])]
    pq.write_table(pa.Table.from_pylist(train, schema=schema), dataset / "data" / "train-00000.parquet")
    pq.write_table(pa.Table.from_pylist(test, schema=schema), dataset / "data" / "test-00000.parquet")
    (dataset / "README.md").write_text("---\nlicense: mit\n---\n\n# A built dataset\n")

    result = dedup_dataset(dataset, progress=False)
    assert result.removed == 10 and result.parameters["text_key"] == "question"
    files = sorted(p.name for p in (dataset / "data").glob("*.parquet"))
    assert any("train-" in f for f in files) and any("test-" in f for f in files)
    tables = {name: pq.read_table(dataset / "data" / name) for name in files}
    assert all(t.schema.field("level").type == pa.int32() for t in tables.values())
    assert sum(t.num_rows for n, t in tables.items() if "test-" in n) == 20
    assert sum(t.num_rows for n, t in tables.items() if "train-" in n) == 100
    card = (dataset / "README.md").read_text()
    assert card.startswith("---\nlicense: mit") and "# A built dataset" in card and "## Deduplication" in card
    dedup_dataset(dataset, progress=False)  # a rerun replaces the section rather than adding one
    assert (dataset / "README.md").read_text().count("## Deduplication") == 1

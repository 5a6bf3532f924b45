import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from curate.pipelines.decontam import BenchmarkError, decontaminate, parse_against


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _write(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def _stackexchange_docs(shared_data: Path, limit: int = 40) -> list[dict]:
    path = shared_data / "stackexchange_math" / "math.stackexchange.com__category-theory.jsonl"
    docs = []
    for thread in _rows(path)[:limit]:
        answers = "\n\n".join(a["body_text"] for a in thread["answers"])
        docs.append({"id": thread["thread_id"], "text": f"{thread['question']['title']}\n\n{thread['question']['body_text']}\n\n{answers}"})
    return docs


def test_gsm8k_socratic_is_flagged_against_test(shared_data, tmp_path):
    result = decontaminate(shared_data / "gsm8k" / "test_socratic.jsonl", tmp_path / "out", "gsm8k",
                           benchmarks_dir=shared_data, progress=False)
    assert result.read == 1319 and result.hits["gsm8k"] >= 0.98 * 1319
    removed = _rows(tmp_path / "out" / "rejects" / "contaminated.jsonl")
    assert len(removed) == result.removed
    assert all(r["benchmark"] == "gsm8k" and r["benchmark_item"] and len(r["ngram"].split()) >= 4 for r in removed)


def test_gsm8k_train_against_test_finds_few(shared_data, tmp_path):
    result = decontaminate(shared_data / "gsm8k" / "train.jsonl", tmp_path / "out", "gsm8k",
                           benchmarks_dir=shared_data, progress=False)
    assert result.read == 7473
    assert 0 < result.removed < 0.02 * 7473


def test_aqua_test_against_reformatted_copy_is_flagged_entirely(shared_data, tmp_path):
    against = f"{shared_data / 'llm_adapters' / 'aqua_test_with_model_rationales.json'}=instruction"
    result = decontaminate(shared_data / "aqua" / "test.json", tmp_path / "out", against, fields=["question"],
                           progress=False)
    assert result.removed == 254 and result.kept == 0


def test_planted_math500_solution_in_stackexchange_text_is_caught(shared_data, tmp_path):
    math = _rows(shared_data / "math500" / "test.jsonl")
    planted = next(r for r in math if len(r["solution"]) > 400)
    docs = _stackexchange_docs(shared_data)
    docs[7]["text"] += "\n\nA worked example I found:\n" + planted["solution"] + "\nHope this helps."
    _write(tmp_path / "se.jsonl", docs)
    result = decontaminate(tmp_path / "se.jsonl", tmp_path / "out", "math500,gsm8k", benchmarks_dir=shared_data,
                           progress=False)
    assert result.removed == 1 and result.hits == {"math500": 1}
    (record,) = _rows(tmp_path / "out" / "rejects" / "contaminated.jsonl")
    assert record["id"] == docs[7]["id"]
    assert record["benchmark_item"] == planted["unique_id"] and record["benchmark_field"] == "solution"
    assert record["match"] == "13-gram" and len(record["ngram"].split()) == 13
    kept = pq.read_table([str(p) for p in (tmp_path / "out" / "data").glob("*.parquet")])
    assert kept.num_rows == len(docs) - 1 and docs[7]["id"] not in kept.column("id").to_pylist()
    card = (tmp_path / "out" / "README.md").read_text()
    assert "## Benchmark decontamination" in card and "| math500 | 500 | 1 |" in card


def test_clean_set_loses_nothing(shared_data, tmp_path):
    docs = _stackexchange_docs(shared_data, limit=50)
    _write(tmp_path / "se.jsonl", docs)
    result = decontaminate(tmp_path / "se.jsonl", tmp_path / "out", "gsm8k,math500,aqua,mmlu_stem",
                           benchmarks_dir=shared_data, progress=False)
    assert result.removed == 0 and result.kept == len(docs)
    assert not (tmp_path / "out" / "rejects" / "contaminated.jsonl").exists()


def test_against_is_checked_before_any_work(tmp_path, monkeypatch):
    monkeypatch.delenv("CURATE_BENCHMARKS_DIR", raising=False)
    with pytest.raises(BenchmarkError, match="local copy"):
        parse_against("gsm8k")
    with pytest.raises(BenchmarkError, match="neither a file nor a built-in"):
        parse_against("no_such_bench", benchmarks_dir=tmp_path)
    (tmp_path / "mine.jsonl").write_text('{"q": "x"}\n')
    (source,) = parse_against(f"{tmp_path / 'mine.jsonl'}=q")
    assert source.fields == ("q",)

"""tag -> select -> build end to end through the CLI, on files made here."""

import json
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from datasets import load_dataset
from huggingface_hub import DatasetCard
from typer.testing import CliRunner

from curate.behaviors import BEHAVIOR_NAMES
from curate.cli import app
from curate.schema import ATTRIBUTE_SCHEMA
from tests.support.shared import DEFAULT_CUES, DOCS

runner = CliRunner()



def invoke(*args: str):
    result = runner.invoke(app, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    folder = tmp_path / "corpus"
    folder.mkdir()
    with (folder / "a.jsonl").open("w") as f:
        for doc_id, text in DOCS[:3]:
            f.write(json.dumps({"id": doc_id, "text": text, "domain": "math"}) + "\n")
    pq.write_table(pa.table({"id": [d for d, _ in DOCS[3:]], "text": [t for _, t in DOCS[3:]]}), folder / "b.parquet")
    return folder


def test_tag_writes_attribute_schema(corpus: Path, tmp_path: Path):
    tags = tmp_path / "tags"
    invoke("tag", "--input", str(corpus), "--output", str(tags), "--classifier", "cues")
    shards = list((tags / DEFAULT_CUES).glob("*.parquet"))
    assert shards and not list((tags / DEFAULT_CUES).glob("*.partial"))
    table = pq.read_table(shards[0])
    assert table.schema.equals(ATTRIBUTE_SCHEMA)
    rows = {r["id"]: r for r in pa.concat_tables([pq.read_table(s) for s in shards]).to_pylist()}
    assert set(rows) == {d for d, _ in DOCS}
    assert rows["d-back"]["backtracking"] >= 1 and rows["d-plain"]["backtracking"] == 0
    assert rows["d-both"]["classifier"] == DEFAULT_CUES and rows["d-both"]["error"] is None
    # The default (cues_ngram_v1) scores each behavior, and a behavior is counted exactly where its score is >= 0.5.
    assert all((r[b] > 0) == (r["scores"][b] >= 0.5) for r in rows.values() for b in BEHAVIOR_NAMES)
    evidence = rows["d-verify"]["evidence"]
    text = dict(DOCS)["d-verify"]
    assert any(text[e["start"]:e["end"]].lower().startswith("double") for e in evidence)
    assert "text" not in table.column_names


def test_rerun_skips_finished_tasks_and_refuses_other_input(corpus: Path, tmp_path: Path):
    tags = tmp_path / "tags"
    invoke("tag", "--input", str(corpus), "--output", str(tags))
    first = {p.name: p.stat().st_mtime_ns for p in (tags / DEFAULT_CUES).glob("*.parquet")}
    invoke("tag", "--input", str(corpus), "--output", str(tags))
    assert {p.name: p.stat().st_mtime_ns for p in (tags / DEFAULT_CUES).glob("*.parquet")} == first
    other = tmp_path / "other.jsonl"
    other.write_text(json.dumps({"text": "x"}) + "\n")
    result = runner.invoke(app, ["tag", "--input", str(other), "--output", str(tags)])
    assert result.exit_code == 2 and "different input" in result.output


def test_build_selects_and_writes_loadable_dataset_with_card(corpus: Path, tmp_path: Path):
    out = tmp_path / "out"
    invoke("build", "--behaviors", "backtracking,verification", "--input", str(corpus / "*.jsonl"), "--output", str(out))
    ds = load_dataset("parquet", data_dir=str(out / "data"), split="train")
    # cues_v3 reads d-back's "50, not 48" as a check against the target, so d-back shows both behaviors too.
    assert sorted(ds["id"]) == ["d-back", "d-both"]
    assert dict(zip(ds["id"], ds["text"]))["d-both"] == dict(DOCS)["d-both"]
    card = DatasetCard.load(out / "README.md")
    assert card.data.license == "other"
    assert card.data.task_categories == ["text-generation"] and card.data.size_categories == ["n<1K"]
    assert card.data.configs[0]["data_files"][0]["path"] == "data/*.parquet"
    assert "backtracking" in card.text and "--behaviors backtracking,verification" in card.text


def test_build_none_and_exclude_and_limit_are_reproducible(corpus: Path, tmp_path: Path):
    tags = tmp_path / "tags"
    invoke("build", "--behaviors", "none", "--input", str(corpus), "--output", str(tmp_path / "none"), "--tags", str(tags))
    ids = set(load_dataset("parquet", data_dir=str(tmp_path / "none" / "data"), split="train")["id"])
    assert ids == {"d-plain", "d-plain2"}
    invoke("build", "--behaviors", "verification", "--exclude-behaviors", "backtracking", "--input", str(corpus),
           "--output", str(tmp_path / "v"), "--tags", str(tags))
    assert load_dataset("parquet", data_dir=str(tmp_path / "v" / "data"), split="train")["id"] == ["d-verify"]
    picks = []
    for run in range(2):
        out = tmp_path / f"lim{run}"
        invoke("build", "--behaviors", "none", "--limit", "1", "--seed", "7", "--input", str(corpus), "--output", str(out), "--tags", str(tags))
        picks.append(load_dataset("parquet", data_dir=str(out / "data"), split="train")["id"])
    assert picks[0] == picks[1] and len(picks[0]) == 1


def test_build_changes_selection_in_place(corpus: Path, tmp_path: Path):
    out = tmp_path / "out"
    invoke("build", "--behaviors", "backtracking", "--input", str(corpus), "--output", str(out))
    # Another selection into the same folder is another dataset: refused, then replaced with --overwrite.
    refused = runner.invoke(app, ["build", "--behaviors", "none", "--input", str(corpus), "--output", str(out)])
    assert refused.exit_code == 2 and "--overwrite" in refused.output
    invoke("build", "--behaviors", "none", "--input", str(corpus), "--output", str(out), "--overwrite")
    ids = set(load_dataset("parquet", data_dir=str(out / "data"), split="train")["id"])
    assert ids == {"d-plain", "d-plain2"}


def test_unknown_names_fail_with_the_valid_ones(corpus: Path, tmp_path: Path):
    result = runner.invoke(app, ["build", "--behaviors", "reflection", "--input", str(corpus), "--output", str(tmp_path / "o")])
    assert result.exit_code == 2 and "backward_chaining" in result.output
    result = runner.invoke(app, ["tag", "--input", str(corpus), "--output", str(tmp_path / "t"), "--classifier", "nope"])
    assert result.exit_code == 2 and "cues_v1" in result.output
    result = runner.invoke(app, ["tag", "--input", str(tmp_path / "missing.jsonl"), "--output", str(tmp_path / "t")])
    assert result.exit_code == 2 and "does not exist" in result.output


def test_stats_and_plot(corpus: Path, tmp_path: Path):
    tags = tmp_path / "tags"
    invoke("tag", "--input", str(corpus), "--output", str(tags))
    plot = tmp_path / "prevalence.png"
    result = invoke("stats", str(tags), "--plot", str(plot))
    assert f"{DEFAULT_CUES}: 5 documents" in result.output.replace("\n", " ")
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    from curate.pipelines.query import behavior_stats

    stats = behavior_stats(tags)[0]
    assert stats.documents == 5 and stats.present["backtracking"] == 2
    # d-both, and d-back, whose "50, not 48" states a verdict against the target (verification since cues_v3)
    assert stats.cooccurrence["backtracking"]["verification"] == 2
    assert stats.no_behavior == 2 and stats.null_rate["verification"] == 0.0
    assert sum(stats.histogram["backtracking"].values()) == 5
    with duckdb.connect() as con:
        assert con.sql(f"SELECT count(*) FROM read_parquet('{tags}/{DEFAULT_CUES}/*.parquet')").fetchall()[0][0] == 5


def test_build_on_bundled_sample(tmp_path: Path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = invoke("build", "--behaviors", "backtracking")
    assert "bundled sample corpus" in result.output
    ds = load_dataset("parquet", data_dir=str(tmp_path / "datasets" / "backtracking" / "data"), split="train")
    assert len(ds) > 10 and all(n >= 1 for n in ds["backtracking"])
    assert DatasetCard.load(tmp_path / "datasets" / "backtracking" / "README.md").data.license == "apache-2.0"


def test_multiple_tasks_and_workers_cover_every_document(corpus: Path, tmp_path: Path):
    tags = tmp_path / "tags"
    invoke("tag", "--input", str(corpus), "--output", str(tags), "--tasks", "2", "--workers", "2")
    ids = pa.concat_tables([pq.read_table(p) for p in (tags / DEFAULT_CUES).glob("*.parquet")]).column("id").to_pylist()
    assert sorted(ids) == sorted(d for d, _ in DOCS)


def test_llm_classifier_needs_a_model_and_runs_through_its_own_job(corpus: Path, tmp_path: Path):
    result = runner.invoke(app, ["tag", "--input", str(corpus), "--output", str(tmp_path / "t"), "--classifier", "llm"])
    assert result.exit_code == 2 and "--model" in result.output
    assert not (tmp_path / "t" / "llm_v1" / "manifest.json").exists()
    from curate.pipelines.readers import InputSpec
    from curate.pipelines.tag import run_tagging

    with pytest.raises(ValueError, match="tag-llm"):
        run_tagging(InputSpec(path=str(corpus)), tmp_path / "t", "llm")


@pytest.mark.parametrize("streaming", [False, True])
def test_hugging_face_dataset_input(tmp_path: Path, streaming: bool):
    """`hf:` goes through datasets.load_dataset; a local dataset folder stands in for a hub repo."""
    folder = tmp_path / "hub_dataset"
    folder.mkdir()
    rows = [{"id": "h1", "text": "Wait, that's wrong."}, {"id": "h2", "text": ""}, {"id": "h3", "text": "It suffices to show x > 0."}]
    (folder / "train.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    tags = tmp_path / "tags"
    args = ["tag", "--input", f"hf:{folder}", "--output", str(tags)] + (["--streaming"] if streaming else [])
    invoke(*args)
    got = {r["id"]: r for p in (tags / DEFAULT_CUES).glob("*.parquet") for r in pq.read_table(p).to_pylist()}
    assert set(got) == {"h1", "h3"}
    assert got["h1"]["backtracking"] == 1 and got["h3"]["backward_chaining"] == 1
    rejects = [json.loads(line) for p in (tags / DEFAULT_CUES / "rejects").glob("*.jsonl") for line in p.read_text().splitlines()]
    assert [r["reason"].split(":")[0] for r in rejects] == ["empty_text"]


def test_a_rerun_with_another_task_count_finishes_the_original_sharding(tmp_path: Path):
    from curate.pipelines.readers import InputSpec
    from curate.pipelines.tag import run_tagging

    folder = tmp_path / "corpus"
    folder.mkdir()
    for part in range(4):
        with (folder / f"part{part}.jsonl").open("w") as f:
            for i in range(5):
                f.write(json.dumps({"id": f"p{part}-{i}", "text": f"Let me check: {part} + {i} = {part + i}."}) + "\n")
    spec = InputSpec(str(folder))
    run_tagging(spec, tmp_path / "tags", tasks=2, progress=False)
    out = tmp_path / "tags" / DEFAULT_CUES
    # As if rank 1 had been killed: no completion marker, no shard.
    (out / "_logs" / "completions" / "00001").unlink()
    for shard in out.glob("*attributes_00001*.parquet"):
        shard.unlink()

    run_tagging(spec, tmp_path / "tags", tasks=1, progress=False)
    def tagged_ids() -> list[str]:
        return [i for shard in sorted(out.glob("*.parquet")) for i in pq.read_table(shard, columns=["id"]).column("id").to_pylist()]

    assert sorted(tagged_ids()) == sorted(f"p{part}-{i}" for part in range(4) for i in range(5))

    # More tasks than the tags were made with: nothing is tagged twice.
    invoke("build", "--input", str(folder), "--tags", str(tmp_path / "tags"), "--behaviors", "verification",
           "--tasks", "3", "--output", str(tmp_path / "dataset"))
    assert len(tagged_ids()) == 20
    assert len(pq.read_table(tmp_path / "dataset" / "data")) == 20

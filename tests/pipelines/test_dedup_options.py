"""--dedup / --decontam on the priming, mcqa and multihop builders: each cleans the right fields and reports it."""

import json
from pathlib import Path

import pyarrow.parquet as pq
from typer.testing import CliRunner

from curate.builders.jobs import McqaJob, MultihopJob
from curate.builders.mcqa import run_mcqa
from curate.builders.multihop import run_multihop
from curate.builders.priming import PrimingConfig, run_priming
from curate.cli import app
from curate.pipelines.cleaning import Cleaning


def _rows(directory: Path, pattern: str = "*.parquet") -> list[dict]:
    return [row for f in sorted((directory / "data").glob(pattern)) for row in pq.read_table(f).to_pylist()]


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _head(path: Path, n: int) -> list[str]:
    with path.open() as f:
        return [next(f) for _ in range(n)]


def test_priming_dedup_keeps_distinct_traces_and_math_benchmarks_remove_nothing(shared_data, tmp_path):
    config = dict(variant="all_strategies", n=40, test_n=6, seed=3)
    plain = _rows(run_priming(PrimingConfig(**config), tmp_path / "plain", progress=False).output)
    out = tmp_path / "clean"
    run_priming(PrimingConfig(**config), out, progress=False, dedup=True, decontam="gsm8k,math500",
                benchmarks_dir=shared_data)

    # Countdown questions share their template; judged on the question, most of them would go as near duplicates.
    dedup_report = json.loads((out / ".curate" / "dedup.json").read_text())
    assert dedup_report["text_key"] == "completion"
    assert dedup_report["read"] == len(plain) and dedup_report["exact_removed"] + dedup_report["near_removed"] == 0
    decontam_report = json.loads((out / ".curate" / "decontam.json").read_text())
    assert decontam_report["fields"] == ["question", "completion"] and decontam_report["removed"] == 0
    assert sorted(r["id"] for r in _rows(out)) == sorted(r["id"] for r in plain)
    from datasets import load_dataset

    loaded = load_dataset(str(out), download_mode="force_redownload", cache_dir=str(tmp_path / "hf"))
    assert {s: len(d) for s, d in loaded.items()} == {"train": 40, "test": 6}
    card = (out / "README.md").read_text()
    assert "## Deduplication" in card and "| gsm8k | 1,319 | 0 |" in card and "| math500 | 500 | 0 |" in card


def test_priming_decontam_removes_a_row_whose_trace_is_in_a_benchmark(tmp_path):
    config = dict(variant="only_backtracking", n=20, test_n=0, seed=5)
    planted = _rows(run_priming(PrimingConfig(**config), tmp_path / "plain", progress=False).output)[4]
    bench = tmp_path / "bench.jsonl"
    bench.write_text(json.dumps({"problem": "An unrelated question.", "solution": planted["completion"]}) + "\n")
    out = tmp_path / "clean"
    run_priming(PrimingConfig(**config), out, progress=False, decontam=f"{bench}=problem+solution")
    hits = {h["id"]: h for h in _jsonl(out / "rejects" / "contaminated.jsonl")}
    assert hits[planted["id"]]["field"] == "completion" and hits[planted["id"]]["benchmark_field"] == "solution"
    assert planted["id"] not in {r["id"] for r in _rows(out)}
    assert len(_rows(out)) + len(hits) == 20


def test_mcqa_dedup_drops_copied_items_and_decontam_flags_aqua_test(shared_data, tmp_path):
    aqua_test = shared_data / "aqua" / "test.json"
    copy = tmp_path / "aqua_copy.jsonl"
    copy.write_text("".join(_head(aqua_test, 40)))
    once = run_mcqa(McqaJob(inputs=[str(copy)], output=tmp_path / "once", cleaning=Cleaning()), progress=False)
    assert once.kept > 0

    twice = tmp_path / "twice"
    run_mcqa(McqaJob(inputs=[str(aqua_test), str(copy)], output=twice, limit=40,
                     cleaning=Cleaning(dedup=True, decontam="gsm8k", benchmarks_dir=shared_data)), progress=False)
    removed = _jsonl(twice / "rejects" / "duplicates.jsonl")
    assert len(removed) == once.kept
    assert all(r["reason"] == "exact_duplicate" and r["duplicate_of"].startswith("aqua/test:") for r in removed)
    assert len(_rows(twice)) == once.kept
    # AQuA is not GSM8K: the decontamination pass must remove nothing here.
    report = json.loads((twice / ".curate" / "decontam.json").read_text())
    assert report["fields"] == ["question"] and report["removed"] == 0
    assert not (twice / "rejects" / "contaminated.jsonl").exists()

    flagged = tmp_path / "flagged"
    run_mcqa(McqaJob(inputs=[str(aqua_test)], output=flagged, limit=40,
                     cleaning=Cleaning(decontam="aqua", benchmarks_dir=shared_data)), progress=False)
    assert _rows(flagged) == []
    hits = _jsonl(flagged / "rejects" / "contaminated.jsonl")
    assert len(hits) == once.kept and {h["benchmark"] for h in hits} == {"aqua"}
    card = (flagged / "README.md").read_text()
    assert "## Conversion per source" in card and f"| aqua/test | 40 | {once.kept} |" in card

    # A later run without the option leaves no stale side file behind.
    run_mcqa(McqaJob(inputs=[str(aqua_test)], output=flagged, limit=40, cleaning=Cleaning()), progress=False)
    assert not (flagged / "rejects" / "contaminated.jsonl").exists()
    assert "## Benchmark decontamination" not in (flagged / "README.md").read_text()


def test_multihop_cleans_sources_before_chaining(shared_data, tmp_path):
    train = _head(shared_data / "gsm8k" / "train.jsonl", 300)
    socratic = _head(shared_data / "gsm8k" / "test_socratic.jsonl", 40)
    source = tmp_path / "sources.jsonl"
    source.write_text("".join(train + socratic + train[:15]))
    out = tmp_path / "multihop"
    job = MultihopJob(input=str(source), output=out, n=40, hops="2-3", seed=1,
                      cleaning=Cleaning(dedup=True, decontam="gsm8k", benchmarks_dir=shared_data))
    result = run_multihop(job, progress=False)

    set_aside = {r["id"]: r for r in _jsonl(out / "rejects" / "sources.jsonl")}
    duplicates = {i for i, r in set_aside.items() if r["reason"] == "duplicate_source"}
    contaminated = {i for i, r in set_aside.items() if r["reason"] == "contaminated_source"}
    assert duplicates == {f"sources.jsonl/{340 + k}" for k in range(15)}
    assert {f"sources.jsonl/{300 + k}" for k in range(40)} <= contaminated
    assert len(contaminated) < 60  # the socratic copies, and a few train problems at most
    assert all("gsm8k item" in set_aside[i]["detail"] for i in contaminated)

    used = {hop["source_id"] for row in _rows(out) for hop in row["hops"]}
    assert used and not used & (duplicates | contaminated)
    chains = {name: {r["chain_id"] for r in _rows(out, f"{name}-*.parquet")} for name in ("full", "half", "single")}
    assert chains["full"] == chains["half"] == chains["single"] and len(chains["full"]) == result.stats.rows["full"]

    card = (out / "README.md").read_text()
    assert "## Deduplication" in card and "## Benchmark decontamination" in card and "before chaining" in card
    assert "| gsm8k | 1,319 |" in card
    assert len(_jsonl(out / "rejects" / "duplicates.jsonl")) == 15
    assert not (out / ".curate" / "sources_dedup").exists()

    # Rebuilt without the options: no report or side file of the earlier run is left.
    run_multihop(MultihopJob(input=str(source), output=out, n=5, cleaning=Cleaning()), progress=False)
    assert not (out / "rejects" / "contaminated.jsonl").exists() and not (out / ".curate" / "dedup.json").exists()
    assert "## Deduplication" not in (out / "README.md").read_text()


def test_cli_multihop_reports_cleaning_and_rejects_unknown_benchmark(shared_data, tmp_path):
    source = tmp_path / "sources.jsonl"
    source.write_text("".join(_head(shared_data / "gsm8k" / "train.jsonl", 150)
                              + _head(shared_data / "gsm8k" / "test.jsonl", 10)))
    runner = CliRunner()
    out = tmp_path / "out"
    done = runner.invoke(app, ["multihop", "--input", str(source), "--n", "10", "--hops", "2", "--output", str(out),
                               "--dedup", "--decontam", "gsm8k", "--benchmarks-dir", str(shared_data)])
    assert done.exit_code == 0, done.output
    assert "contaminated removed" in done.output and "duplicates removed" in done.output
    report = json.loads((out / ".curate" / "decontam.json").read_text())
    assert report["hits"]["gsm8k"] >= 10

    failed = runner.invoke(app, ["mcqa", "--input", str(shared_data / "aqua" / "test.json"), "--limit", "5",
                                 "--output", str(tmp_path / "m"), "--decontam", "no_such_benchmark"])
    assert failed.exit_code != 0 and "no_such_benchmark" in failed.output

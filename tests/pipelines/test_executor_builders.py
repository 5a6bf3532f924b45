"""dedup, decontam, cpt and filter-passrate on every executor: a Slurm dry run writes one job array per stage, chained by
--dependency, whose pickled jobs, run in order as Slurm would run them, leave what the rerun of the same
command turns into the same output as a local run; Ray gives the same kept and removed rows as local; an
interrupted dedup resumes on its finished stages, and a changed input starts over."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from curate.builders.cpt.run import run_cpt
from curate.builders.jobs import CPTJob
from curate.cli import app
from curate.pipelines.cleaning import Cleaning
from curate.pipelines.decontam import decontaminate
from curate.pipelines.dedup import dedup
from curate.pipelines.executors import DRY_RUN_SUBMISSION, SLURM_SCRIPT, ExecutorOptions
from curate.pipelines.readers import InputSpec
from curate.pipelines.tag import run_tagging
from tests.support.shared import HAS_RAY, HAS_SERVE, SAMPLE, sample_records

DEDUP_STAGES = ("1_signatures", "2_buckets", "3_clusters", "4_filter")


def sample_docs() -> list[dict]:
    return [{"id": r["id"], "text": r["text"]} for r in sample_records() if len(r["text"].split()) > 30]


def write_jsonl(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


def duplicated_corpus(folder: Path) -> None:
    """Two files (one per task): copies within a file (the exact pass), across files (MinHash) and near copies."""
    docs = sample_docs()[:90]
    first, second = docs[:50], docs[50:]
    exact = [{"id": f"exact-{d['id']}", "text": "  " + d["text"].upper()} for d in first[:5]]
    across = [{"id": f"across-{d['id']}", "text": d["text"]} for d in first[5:10]]
    near = [{"id": f"near-{d['id']}", "text": d["text"].rstrip(".") + " and that settles it."} for d in first[10:15]]
    write_jsonl(folder / "a.jsonl", first + exact)
    write_jsonl(folder / "b.jsonl", second + across + near + [{"id": "broken"}])


def kept_rows(output: Path) -> list[dict]:
    files = sorted((output / "data").glob("*.parquet"))
    return sorted((row for f in files for row in pq.read_table(f).to_pylist()), key=lambda r: r["id"])


def removed_rows(path: Path) -> list[dict]:
    rows = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    return sorted(rows, key=lambda r: r["id"])


def same_dedup(a: Path, b: Path) -> None:
    assert kept_rows(a) == kept_rows(b)
    assert removed_rows(a / "rejects" / "duplicates.jsonl") == removed_rows(b / "rejects" / "duplicates.jsonl")


RUN_ARRAYS = textwrap.dedent("""
    import json, os, sys
    import dill
    for logs in sys.argv[1:]:
        with open(os.path.join(logs, "executor.pik"), "rb") as f:
            executor = dill.load(f)
        with open(os.path.join(logs, "ranks_to_run.json")) as f:
            elements = len(json.load(f))
        for index in range(elements):
            os.environ["SLURM_ARRAY_TASK_ID"] = str(index)
            executor.run()
""")


def run_slurm_arrays(tmp_path: Path, logging_dirs: list[Path]) -> None:
    """Every array element of each job, jobs in dependency order, from the pickled executors only (a fresh
    process, as `launch_pickled_pipeline` on a node). datatrove asks `scontrol` to expand the node list;
    a stand-in answers on this machine without Slurm."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "scontrol").write_text('#!/bin/sh\necho "$3"\n')
    (bin_dir / "scontrol").chmod(0o755)
    env = {**os.environ, "SLURM_NODELIST": "node1", "RUN_OFFSET": "0", "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run([sys.executable, "-c", RUN_ARRAYS, *map(str, logging_dirs)], check=False, env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]


def dedup_cli(corpus: Path, output: Path, *extra: str):
    return CliRunner().invoke(app, ["dedup", str(corpus), "--output", str(output), "--tasks", "2", "--workers", "2",
                                    *extra], catch_exceptions=False)


SLURM = ("--executor", "slurm", "--slurm-partition", "cpu")


def test_dedup_slurm_dry_run_chains_four_job_arrays_that_rerun_into_the_local_result(tmp_path):
    duplicated_corpus(tmp_path / "corpus")
    local = dedup(tmp_path / "corpus", tmp_path / "local", tasks=2, workers=2, progress=False)
    assert local.exact_removed >= 5 and local.near_removed >= 5 and local.unreadable == 1

    out = tmp_path / "slurm"
    submitted = dedup_cli(tmp_path / "corpus", out, *SLURM, "--slurm-time", "02:00:00", "--slurm-dry-run")
    assert submitted.exit_code == 0, submitted.output
    assert "dry run" in submitted.output and not (out / "data").exists()
    logs = out / ".curate" / "dedup" / "logs"
    arrays = {"1_signatures": "0-1%2", "2_buckets": "0-9%2", "3_clusters": "0-0%2", "4_filter": "0-1%2"}
    previous = None
    for number, stage in enumerate(DEDUP_STAGES, start=1):
        script = (logs / stage / SLURM_SCRIPT).read_text()
        directives = dict(re.findall(r"^#SBATCH --([\w-]+)=?(.*)$", script, flags=re.MULTILINE))
        assert directives["partition"] == "cpu" and directives["time"] == "02:00:00"
        assert directives["array"] == arrays[stage]
        assert directives["job-name"] == f"curate-dedup-{stage.replace('_', '-', 1)}"
        submission = json.loads((logs / stage / DRY_RUN_SUBMISSION).read_text())
        dependencies = [a.removeprefix("--dependency=") for a in submission["sbatch_args"] if a.startswith("--dependency=")]
        # One submission queues the chain: each job array waits for the one before it to succeed.
        assert dependencies == ([f"afterok:{previous}"] if previous else []), (stage, submission)
        assert submission["job_id"] == f"dry-run-{directives['job-name']}"
        previous = submission["job_id"]

    run_slurm_arrays(tmp_path, [logs / stage for stage in DEDUP_STAGES])
    assert not (out / "data").exists(), "the stages write into the working folder; the rerun publishes"
    rerun = dedup_cli(tmp_path / "corpus", out, *SLURM)
    assert rerun.exit_code == 0, rerun.output
    assert "Deduplicated" in rerun.output
    same_dedup(out, tmp_path / "local")
    assert json.loads((out / ".curate" / "dedup.json").read_text())["kept"] == local.kept


def stats_times(logs: Path, stage: str) -> dict[str, int]:
    return {p.name: p.stat().st_mtime_ns for p in (logs / stage / "stats").glob("*.json")}


def test_interrupted_dedup_resumes_and_a_changed_input_starts_over(tmp_path):
    corpus = tmp_path / "corpus"
    duplicated_corpus(corpus)
    out = tmp_path / "out"
    logs = out / ".curate" / "dedup" / "logs"
    assert dedup_cli(corpus, out, *SLURM, "--slurm-dry-run").exit_code == 0
    # The chain stops after stage 3 (a cancelled job, a killed node): the rerun, here on this machine,
    # runs stage 4 only and keeps the signatures, buckets and clusters it finds.
    run_slurm_arrays(tmp_path, [logs / stage for stage in DEDUP_STAGES[:3]])
    finished = {stage: stats_times(logs, stage) for stage in DEDUP_STAGES[:3]}
    assert all(finished.values())
    resumed = dedup(corpus, out, tasks=2, workers=2, progress=False)
    assert {stage: stats_times(logs, stage) for stage in DEDUP_STAGES[:3]} == finished
    assert len(stats_times(logs, "4_filter")) == 2
    reference = dedup(corpus, tmp_path / "reference", tasks=2, workers=2, progress=False)
    same_dedup(out, tmp_path / "reference")
    assert (resumed.kept, resumed.removed) == (reference.kept, reference.removed)

    # Same interruption, then a file changes: the finished stages belong to the old input and are redone.
    assert dedup_cli(corpus, out, *SLURM, "--slurm-dry-run").exit_code == 0
    run_slurm_arrays(tmp_path, [logs / stage for stage in DEDUP_STAGES[:3]])
    before = stats_times(logs, "1_signatures")
    added = {"id": "late-copy", "text": sample_docs()[0]["text"]}
    with (corpus / "b.jsonl").open("a") as f:
        f.write(json.dumps(added) + "\n")
    changed = dedup(corpus, out, tasks=2, workers=2, progress=False)
    assert stats_times(logs, "1_signatures").keys() == before.keys()
    assert all(stats_times(logs, "1_signatures")[k] != v for k, v in before.items())
    fresh = dedup(corpus, tmp_path / "fresh", tasks=2, workers=2, progress=False)
    same_dedup(out, tmp_path / "fresh")
    assert changed.removed == reference.removed + 1
    assert "late-copy" in {r["id"] for r in removed_rows(out / "rejects" / "duplicates.jsonl")}
    assert fresh.kept == reference.kept


def contaminated_corpus(tmp_path: Path) -> tuple[Path, Path]:
    docs = sample_docs()[:60]
    benchmark = tmp_path / "bench" / "test.jsonl"
    write_jsonl(benchmark, [{"problem": d["text"]} for d in docs[::10]])
    write_jsonl(tmp_path / "corpus" / "a.jsonl", docs[:30])
    write_jsonl(tmp_path / "corpus" / "b.jsonl", docs[30:] + [{"id": "no-text"}])
    return tmp_path / "corpus", benchmark


def test_decontam_slurm_dry_run_then_rerun_matches_local(tmp_path):
    corpus, benchmark = contaminated_corpus(tmp_path)
    against = f"{benchmark}=problem"
    local = decontaminate(corpus, tmp_path / "local", against, tasks=2, workers=2, progress=False)
    assert local.removed == 6 and local.unreadable == 1

    out = tmp_path / "slurm"
    command = ["decontam", str(corpus), "--against", against, "--output", str(out), "--tasks", "2", "--workers", "2", *SLURM]
    submitted = CliRunner().invoke(app, [*command, "--cpus-per-task", "2", "--slurm-dry-run"], catch_exceptions=False)
    assert submitted.exit_code == 0 and "dry run" in submitted.output, submitted.output
    logs = out / ".curate" / "decontam" / "logs"
    directives = dict(re.findall(r"^#SBATCH --([\w-]+)=?(.*)$", (logs / SLURM_SCRIPT).read_text(), flags=re.MULTILINE))
    assert directives["array"] == "0-1%2" and directives["cpus-per-task"] == "2" and directives["job-name"] == "curate-decontam"
    assert not any(a.startswith("--dependency") for a in json.loads((logs / DRY_RUN_SUBMISSION).read_text())["sbatch_args"])
    # The index the job reads was built at submission and stays for the rerun.
    assert (out / ".curate" / "decontam" / "index" / "summary.json").exists()

    run_slurm_arrays(tmp_path, [logs])
    rerun = CliRunner().invoke(app, command, catch_exceptions=False)
    assert rerun.exit_code == 0 and "Decontaminated" in rerun.output, rerun.output
    assert kept_rows(out) == kept_rows(tmp_path / "local")
    assert removed_rows(out / "rejects" / "contaminated.jsonl") == removed_rows(tmp_path / "local" / "rejects" / "contaminated.jsonl")


@pytest.fixture(scope="module")
def tiny_tokenizer(tmp_path_factory):
    from tests.support.tiny_model import make_tiny_chat_model

    return str(make_tiny_chat_model(tmp_path_factory.mktemp("tiny") / "model"))


@pytest.fixture(scope="module")
def sample_tags(tmp_path_factory):
    return run_tagging(InputSpec(str(SAMPLE)), tmp_path_factory.mktemp("tags"), "cues", tasks=2, progress=False).tags_dir


def cpt_sets(output: Path) -> dict[str, list[tuple[str, int]]]:
    return {v: [(r["id"], r["n_tokens"]) for r in pq.read_table(output / v / "data").to_pylist()]
            for v in ("enriched", "minimized")}


def test_cpt_slurm_dry_run_then_rerun_matches_local(tmp_path, sample_tags, tiny_tokenizer):
    local = run_cpt(CPTJob(tags=sample_tags, corpus=InputSpec(str(SAMPLE)), tokens="6k", tokenizer=tiny_tokenizer,
                           output=tmp_path / "local", seed=3, cleaning=Cleaning(dedup=True), export=False,
                           executor=ExecutorOptions(tasks=2, workers=2)), progress=False)
    out = tmp_path / "slurm"
    command = ["cpt", "--tags", str(sample_tags), "--texts", str(SAMPLE), "--tokens", "6k", "--tokenizer", tiny_tokenizer,
               "--seed", "3", "--dedup", "--tasks", "2", "--workers", "2", "--output", str(out), *SLURM]
    submitted = CliRunner().invoke(app, [*command, "--slurm-dry-run"], catch_exceptions=False)
    assert submitted.exit_code == 0 and "dry run" in submitted.output, submitted.output
    logs = out / ".curate" / "pool" / "logs"
    script = (logs / SLURM_SCRIPT).read_text()
    directives = dict(re.findall(r"^#SBATCH --([\w-]+)=?(.*)$", script, flags=re.MULTILINE))
    assert directives["job-name"] == "curate-cpt-pool" and directives["array"] == "0-1%2" and "gpus" not in directives
    assert json.loads((logs / DRY_RUN_SUBMISSION).read_text())["sbatch_args"] == ["--export=ALL,RUN_OFFSET=0"]
    assert not (out / "enriched").exists()

    run_slurm_arrays(tmp_path, [logs])
    rerun = CliRunner().invoke(app, command, catch_exceptions=False)
    assert rerun.exit_code == 0 and "CPT corpora" in rerun.output, rerun.output
    assert cpt_sets(out) == cpt_sets(tmp_path / "local")
    assert json.loads((out / ".curate" / "cpt.json").read_text())["rejects"] == local.rejects


@pytest.mark.skipif(not HAS_SERVE, reason="needs `transformers serve` (pip install 'curate[serve]')")
def test_cpt_rewrite_goes_to_slurm_with_its_gpus_once_the_pool_is_done(tmp_path, sample_tags, tiny_tokenizer):
    out = tmp_path / "cpt"
    command = [
        "cpt", "--tags", str(sample_tags), "--texts", str(SAMPLE), "--tokens", "6k", "--tokenizer", tiny_tokenizer,
        "--seed", "3", "--tasks", "2", "--workers", "2", "--output", str(out), "--rewrite", "--model", tiny_tokenizer,
        "--gpus-per-task", "1", *SLURM, "--slurm-dry-run",
    ]
    # First run: only the corpus pass is submitted; its job array then runs (here, on this machine).
    first = CliRunner().invoke(app, command, catch_exceptions=False)
    assert first.exit_code == 0 and "curate-cpt-pool" in (out / ".curate" / "pool" / "logs" / SLURM_SCRIPT).read_text()
    assert not (out / ".curate" / "rewrite").exists(), first.output
    pool_logs = out / ".curate" / "pool" / "logs"
    run_slurm_arrays(tmp_path, [pool_logs])
    pool_script = (pool_logs / SLURM_SCRIPT).stat().st_mtime_ns
    submitted = CliRunner().invoke(app, command, catch_exceptions=False)
    assert submitted.exit_code == 0 and "dry run" in submitted.output, submitted.output
    assert (pool_logs / SLURM_SCRIPT).stat().st_mtime_ns == pool_script, "the finished corpus pass is not resubmitted"
    script = (out / ".curate" / "rewrite" / "round-0" / "logs" / SLURM_SCRIPT).read_text()  # the first rewrite round
    directives = dict(re.findall(r"^#SBATCH --([\w-]+)=?(.*)$", script, flags=re.MULTILINE))
    assert directives["job-name"] == "curate-cpt-rewrite" and directives["gpus"] == "1"
    assert cpt_sets(out)["enriched"], "the sets are written before the rewrite is submitted"
    # Each rerun writes the sets anew; the same rows keep the rewrite's folder (and its checkpoints) for it.
    documents = out / ".curate" / "rewrite" / "round-0" / "input" / "documents.parquet"
    written = documents.stat().st_mtime_ns
    assert CliRunner().invoke(app, command, catch_exceptions=False).exit_code == 0
    assert documents.stat().st_mtime_ns == written


@pytest.mark.skipif(not HAS_SERVE, reason="needs `transformers serve` (pip install 'curate[serve]')")
def test_passrate_slurm_dry_run_then_rerun_reads_the_jobs_samples(tmp_path, tiny_tokenizer):
    dataset = tmp_path / "ds"
    rows = [{"id": f"q{i}", "question": f"What is {i} + {i}?", "answer": str(2 * i), "data_source": "curate/math",
             "ability": "math"} for i in range(4)]
    (dataset / "data").mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows), dataset / "data" / "train-00000.parquet")
    out = tmp_path / "pr"
    command = ["filter-passrate", "--dataset", str(dataset), "--model", tiny_tokenizer, "--k", "2", "--max-tokens", "8",
               "--device", "cpu", "--output", str(out), *SLURM]
    gpus = CliRunner().invoke(app, [*command, "--gpus-per-task", "1", "--slurm-dry-run"], catch_exceptions=False)
    assert gpus.exit_code == 0 and "dry run" in gpus.output, gpus.output
    logs = out / ".curate" / "logs"
    directives = dict(re.findall(r"^#SBATCH --([\w-]+)=?(.*)$", (logs / SLURM_SCRIPT).read_text(), flags=re.MULTILINE))
    assert directives["job-name"] == "curate-passrate" and directives["gpus"] == "1"

    # On this machine without GPUs, the job that runs is a CPU one; its samples are what the rerun selects from.
    assert CliRunner().invoke(app, [*command, "--slurm-dry-run"], catch_exceptions=False).exit_code == 0
    assert "gpus" not in (logs / SLURM_SCRIPT).read_text()
    run_slurm_arrays(tmp_path, [logs])
    sampled = {p: p.stat().st_mtime_ns for p in (out / "rates").glob("rates_*.parquet")}
    assert sorted(r["id"] for p in sampled for r in pq.read_table(p).to_pylist()) == ["q0", "q1", "q2", "q3"]
    rerun = CliRunner().invoke(app, command, catch_exceptions=False)
    assert rerun.exit_code == 0 and "Pass rate" in rerun.output, rerun.output
    assert {p: p.stat().st_mtime_ns for p in (out / "rates").glob("rates_*.parquet")} == sampled, "nothing sampled again"
    assert json.loads((out / ".curate" / "passrate.json").read_text())["k"] == 2


@pytest.fixture(scope="module")
def ray_cluster():
    """One local Ray for the module: the builders connect to a running Ray rather than starting their own."""
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


@pytest.mark.skipif(not HAS_RAY, reason="Ray not installed (pip install 'ray[default]')")
def test_ray_dedup_and_decontam_match_local(tmp_path, ray_cluster):
    duplicated_corpus(tmp_path / "corpus")
    dedup(tmp_path / "corpus", tmp_path / "local", tasks=2, workers=2, progress=False)
    on_ray = dedup(tmp_path / "corpus", tmp_path / "ray", tasks=2, workers=2, progress=False,
                   executor=ExecutorOptions(kind="ray"))
    same_dedup(tmp_path / "ray", tmp_path / "local")
    assert on_ray.removed >= 10

    corpus, benchmark = contaminated_corpus(tmp_path / "decontam")
    local = decontaminate(corpus, tmp_path / "decontam_local", f"{benchmark}=problem", tasks=2, workers=2, progress=False)
    ray_result = decontaminate(corpus, tmp_path / "decontam_ray", f"{benchmark}=problem", tasks=2, workers=2,
                               progress=False, executor=ExecutorOptions(kind="ray"))
    assert kept_rows(tmp_path / "decontam_ray") == kept_rows(tmp_path / "decontam_local")
    assert ray_result.hits == local.hits and ray_result.removed == 6


@pytest.mark.skipif(not HAS_RAY, reason="Ray not installed (pip install 'ray[default]')")
def test_ray_cpt_matches_local(tmp_path, ray_cluster, sample_tags, tiny_tokenizer):
    for name in ("local", "ray"):
        run_cpt(CPTJob(tags=sample_tags, corpus=InputSpec(str(SAMPLE)), tokens="6k", tokenizer=tiny_tokenizer,
                       output=tmp_path / name, seed=3, cleaning=Cleaning(), export=False,
                       executor=ExecutorOptions(tasks=2, workers=2, kind=name)), progress=False)
    assert cpt_sets(tmp_path / "ray") == cpt_sets(tmp_path / "local")
    assert all(cpt_sets(tmp_path / "ray").values())

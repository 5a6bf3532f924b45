"""Executors and resume: a tag run killed with SIGKILL mid-way and rerun ends with every input id exactly
once and unchanged attributes for what finished before the kill (local and Ray); the Slurm job array
datatrove generates is checked and its pickled job runs as Slurm would run it; Ray gives the same tags as local."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from curate.cli import app
from curate.pipelines.executors import ExecutorConfigError, ExecutorOptions, JobSubmitted
from curate.pipelines.readers import InputSpec
from curate.pipelines.tag import run_tagging
from tests.support.shared import DEFAULT_CUES, HAS_RAY, sample_texts

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "curate" / "sample_data" / "corpus"




def write_corpus(folder: Path, files: int, per_file: int) -> list[str]:
    folder.mkdir(parents=True, exist_ok=True)
    texts = sample_texts()
    ids = []
    for f in range(files):
        with (folder / f"part-{f:03d}.jsonl").open("w") as out:
            for i in range(per_file):
                doc_id = f"f{f:03d}-{i:04d}"
                out.write(json.dumps({"id": doc_id, "text": texts[(f * per_file + i) % len(texts)]}) + "\n")
                ids.append(doc_id)
    return ids


def shard_rows(tags: Path, ranks: set[int] | None = None) -> list[dict]:
    rows = []
    for path in sorted(tags.glob("*attributes_*.parquet")):
        rank = int(re.search(r"attributes_(\d+)", path.name).group(1))
        if ranks is None or rank in ranks:
            rows += pq.read_table(path).to_pylist()
    return rows


def completed_ranks(tags: Path) -> set[int]:
    return {int(p.name) for p in (tags / "_logs" / "completions").glob("*")}


def kill_and_resume(tmp_path: Path, executor_args: list[str], files: int, wait_for: int, deadline_s: float) -> None:
    ids = write_corpus(tmp_path / "corpus", files=files, per_file=60)
    tags_root = tmp_path / "tags"
    tags = tags_root / DEFAULT_CUES
    command = [sys.executable, "-m", "curate.cli", "tag", "--input", str(tmp_path / "corpus"), "--output", str(tags_root),
               "--tasks", str(files), "--workers", "2", *executor_args]
    process = subprocess.Popen(command, cwd=ROOT, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + deadline_s
        while len(completed_ranks(tags)) < wait_for and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.02)
        assert process.poll() is None, "the run finished before it could be killed; give the test more files"
        assert len(completed_ranks(tags)) >= wait_for, "no task finished in time"
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    time.sleep(0.5)  # let anything the kill orphaned notice and stop
    finished = completed_ranks(tags)
    assert len(finished) < files, "the kill came after the last task"
    before = {row["id"]: row for row in shard_rows(tags, finished)}
    assert before

    rerun = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=180)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    rows = shard_rows(tags)
    out_ids = [row["id"] for row in rows]
    assert len(out_ids) == len(set(out_ids)), "duplicated documents after resume"
    assert sorted(out_ids) == sorted(ids)
    after = {row["id"]: row for row in rows}
    assert all(after[doc_id] == row for doc_id, row in before.items())
    assert completed_ranks(tags) == set(range(files))
    assert not list(tags.glob("*.partial"))


def test_sigkill_mid_run_then_rerun_local(tmp_path):
    kill_and_resume(tmp_path, [], files=24, wait_for=3, deadline_s=90)


@pytest.mark.skipif(not HAS_RAY, reason="Ray not installed (pip install 'ray[default]')")
@pytest.mark.slow  # a Ray cluster and an actor per task for 12 tasks, twice: 30-55 s on 2 cores
def test_sigkill_mid_run_then_rerun_ray(tmp_path):
    kill_and_resume(tmp_path, ["--executor", "ray"], files=12, wait_for=2, deadline_s=180)


@pytest.mark.skipif(not HAS_RAY, reason="Ray not installed (pip install 'ray[default]')")
def test_ray_gives_the_same_tags_as_local(tmp_path):
    write_corpus(tmp_path / "corpus", files=4, per_file=20)
    spec = InputSpec(str(tmp_path / "corpus"))
    local = run_tagging(spec, tmp_path / "local", tasks=4, workers=2, progress=False)
    ray = run_tagging(spec, tmp_path / "ray", tasks=4, workers=2, progress=False, executor=ExecutorOptions(kind="ray"))
    by_id = lambda rows: sorted(rows, key=lambda r: r["id"])  # noqa: E731
    assert by_id(shard_rows(ray.tags_dir)) == by_id(shard_rows(local.tags_dir))
    assert len(shard_rows(ray.tags_dir)) == 80


def test_slurm_dry_run_writes_a_job_array_that_runs(tmp_path):
    ids = write_corpus(tmp_path / "corpus", files=3, per_file=10)
    tags_root = tmp_path / "tags"
    result = CliRunner().invoke(app, [
        "tag", "--input", str(tmp_path / "corpus"), "--output", str(tags_root), "--tasks", "3", "--workers", "2",
        "--executor", "slurm", "--slurm-partition", "cpu", "--slurm-time", "01:30:00", "--cpus-per-task", "2",
        "--slurm-dry-run",
    ], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    logs = tags_root / DEFAULT_CUES / "_logs"
    script = (logs / "launch_script.slurm").read_text()
    directives = dict(re.findall(r"^#SBATCH --([\w-]+)=?(.*)$", script, flags=re.MULTILINE))
    assert directives["partition"] == "cpu" and directives["time"] == "01:30:00"
    assert directives["array"] == "0-2%2" and directives["cpus-per-task"] == "2"
    assert directives["job-name"] == f"curate-tag-{DEFAULT_CUES}"
    assert f"source {sys.prefix}/bin/activate" in script
    assert not list((tags_root / DEFAULT_CUES).glob("*attributes_*.parquet")), "a dry run must not run anything"

    # Run each array element as Slurm would: the command after srun, with the array index set. datatrove
    # asks `scontrol` to expand the node list; this stands in for it on a machine without Slurm.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "scontrol").write_text('#!/bin/sh\necho "$3"\n')
    (bin_dir / "scontrol").chmod(0o755)
    launch = next(line for line in script.splitlines() if "launch_pickled_pipeline" in line)
    command = shlex.split(launch)[shlex.split(launch).index("launch_pickled_pipeline"):]
    command[0] = str(Path(sys.executable).parent / command[0])
    elements = [
        subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env={
            **os.environ, "SLURM_ARRAY_TASK_ID": str(index), "SLURM_NODELIST": "node1", "RUN_OFFSET": "0",
            "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"})
        for index in range(3)
    ]
    for element in elements:
        _, stderr = element.communicate(timeout=120)
        assert element.returncode == 0, stderr[-2000:]
    assert sorted(row["id"] for row in shard_rows(tags_root / DEFAULT_CUES)) == sorted(ids)

    # Every rank is now complete: the same command goes straight through to the summary.
    again = CliRunner().invoke(app, [
        "tag", "--input", str(tmp_path / "corpus"), "--output", str(tags_root), "--tasks", "3",
        "--executor", "slurm", "--slurm-partition", "cpu",
    ], catch_exceptions=False)
    assert again.exit_code == 0 and "tagged" in again.output


def test_slurm_dry_run_from_the_api_says_nothing_was_submitted(tmp_path):
    write_corpus(tmp_path / "corpus", files=2, per_file=5)
    with pytest.raises(JobSubmitted, match="dry run") as raised:
        run_tagging(InputSpec(str(tmp_path / "corpus")), tmp_path / "tags", tasks=2, progress=False,
                    executor=ExecutorOptions(kind="slurm", partition="gpu", dry_run=True, gpus_per_task=1))
    assert raised.value.job_id is None
    assert "#SBATCH --gpus=1" in raised.value.script.read_text()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (ExecutorOptions(kind="dask"), "unknown executor"),
        (ExecutorOptions(kind="slurm"), "--slurm-partition"),
        (ExecutorOptions(kind="local", dry_run=True), "only applies to --executor slurm"),
        (ExecutorOptions(kind="local", ray_address="auto"), "only applies to --executor ray"),
    ],
)
def test_bad_executor_options_are_clear_errors(options, message):
    with pytest.raises(ExecutorConfigError, match=message):
        options.validate()


def test_cli_rejects_slurm_without_partition(tmp_path):
    write_corpus(tmp_path / "corpus", files=1, per_file=2)
    result = CliRunner().invoke(app, ["tag", "--input", str(tmp_path / "corpus"), "--output", str(tmp_path / "t"),
                                      "--executor", "slurm"])
    assert result.exit_code == 2 and "--slurm-partition" in result.output

"""LLM tagging on every executor, one model server per datatrove task.

The local runs start real `transformers serve` processes (the tiny random model, on CPU) and read what
each server process was started with from /proc: its port and its CUDA_VISIBLE_DEVICES. No GPU is
needed for that: CUDA_VISIBLE_DEVICES names the GPUs a process may use, and a list of made-up ids is
split across tasks exactly as real ids would be. The Slurm job array is written as a dry run and one
array element is run here the way Slurm would run it.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Self

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from curate.cli import app
from curate.pipelines.executors import (
    ExecutorConfigError,
    ExecutorOptions,
    check_local_gpus,
    gpu_slice,
    make_executor,
    visible_gpus,
)
from curate.pipelines.llm.options import ServerConfigError
from curate.pipelines.llm.server import inference_config
from curate.pipelines.llm_tag import LLMTagOptions
from tests.support.fault_server import FaultServer
from tests.support.shared import HAS_RAY, HAS_SERVE, sample_texts

ROOT = Path(__file__).resolve().parents[2]
needs_serve = pytest.mark.skipif(not HAS_SERVE, reason="transformers[serving] not installed (pip install 'curate[serve]')")
needs_proc = pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="reads server processes from /proc")
FAKE_GPUS = "gpu-a,gpu-b,gpu-c,gpu-d"


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    from tests.support.tiny_model import make_tiny_chat_model

    return make_tiny_chat_model(tmp_path_factory.mktemp("tiny") / "model")


def write_corpus(folder: Path, files: int, per_file: int) -> list[str]:
    folder.mkdir(parents=True, exist_ok=True)
    texts, ids = sample_texts(), []
    for f in range(files):
        with (folder / f"part-{f}.jsonl").open("w") as out:
            for i in range(per_file):
                ids.append(f"f{f}-{i}")
                out.write(json.dumps({"id": ids[-1], "text": texts[(f * per_file + i) % len(texts)]}) + "\n")
    return ids


def rows(out: Path) -> list[dict]:
    return [r for f in sorted(out.glob("attributes_*.parquet")) for r in pq.read_table(f).to_pylist()]


# --------------------------------------------------------------------------------------------- #
# Which GPUs a task gets
# --------------------------------------------------------------------------------------------- #
def test_eight_gpus_four_workers_two_per_task_are_disjoint_and_cover_all():
    gpus = [str(i) for i in range(8)]
    slices = [gpu_slice(gpus, slot, 2) for slot in range(4)]
    assert slices == [["0", "1"], ["2", "3"], ["4", "5"], ["6", "7"]]
    with pytest.raises(ExecutorConfigError, match="only 8 are visible"):
        gpu_slice(gpus, 4, 2)
    check_local_gpus(4, 2, gpus)
    with pytest.raises(ExecutorConfigError, match="--workers 3 x --gpus-per-task 3 needs 9 GPUs.*8 are visible"):
        check_local_gpus(3, 3, gpus)


@pytest.mark.parametrize(
    ("declared", "expected"),
    [("0,1,2", ["0", "1", "2"]), ("", []), ("2, 5", ["2", "5"]), ("0,-1,1", ["0"]),
     ("GPU-6e7b,MIG-1c2d", ["GPU-6e7b", "MIG-1c2d"])],
)
def test_visible_gpus_follow_cuda_visible_devices(monkeypatch, declared, expected):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", declared)
    assert visible_gpus() == expected


def test_visible_gpus_without_the_variable_ask_nvidia_smi(monkeypatch, tmp_path):
    listing = ("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-6e7b)\n  MIG 3g.40gb Device 0: (UUID: MIG-1c2d)\n"
               "GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-77aa)\n")
    tool = tmp_path / "nvidia-smi"
    tool.write_text(f"#!/bin/sh\n[ \"$1\" = -L ] && printf '{listing}'\n")
    tool.chmod(0o755)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    assert visible_gpus() == ["0", "1"]


def test_local_executor_refuses_more_gpus_than_visible(monkeypatch, tmp_path):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2")
    with pytest.raises(ExecutorConfigError, match="needs 4 GPUs on this machine, but 3 are visible"):
        make_executor([], ExecutorOptions(gpus_per_task=2), tasks=8, workers=2, logging_dir=tmp_path)
    # Two tasks never run more than two at once, whatever --workers says.
    executor = make_executor([], ExecutorOptions(gpus_per_task=1), tasks=2, workers=8, logging_dir=tmp_path)
    assert executor.workers == 2 and executor.gpus == ["0", "1", "2"]


def test_tensor_parallel_defaults_to_gpus_per_task_for_vllm(tmp_path):
    vllm = LLMTagOptions(model="m", backend="vllm")
    assert inference_config(vllm, str(tmp_path), gpus_per_task=2, context_tokens=2048).tp == 2
    assert inference_config(vllm, str(tmp_path), context_tokens=2048).tp == 1
    assert inference_config(LLMTagOptions(model="m", backend="vllm", tp=4), str(tmp_path), gpus_per_task=4,
                            context_tokens=2048).tp == 4
    # --dp replicas share the task's GPUs: 4 GPUs are 2 replicas of tensor parallelism 2.
    replicated = LLMTagOptions(model="m", backend="vllm", dp=2)
    assert inference_config(replicated, str(tmp_path), gpus_per_task=4, context_tokens=2048).tp == 2
    with pytest.raises(ServerConfigError, match="--tp 1 x --dp 1 = 1 GPUs per server.*--gpus-per-task 2"):
        LLMTagOptions(model="m", backend="vllm", tp=1).validate(gpus_per_task=2)
    with pytest.raises(ServerConfigError, match="an endpoint's GPUs are its own"):
        LLMTagOptions(model="m", backend="endpoint", endpoint_url="http://127.0.0.1:9/v1").validate(gpus_per_task=1)


# --------------------------------------------------------------------------------------------- #
# Local: one server per task, each with its own GPUs
# --------------------------------------------------------------------------------------------- #
class ServerWatch:
    """Polls /proc for `transformers serve MODEL` processes and keeps what each was started with."""

    def __init__(self, model: Path):
        self.model = str(model)
        self.seen: dict[int, dict] = {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._poll, daemon=True)

    def __enter__(self) -> Self:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join()

    def _poll(self) -> None:
        while not self.stop.is_set():
            for proc in Path("/proc").iterdir():
                if not proc.name.isdigit() or int(proc.name) in self.seen:
                    continue
                try:
                    argv = (proc / "cmdline").read_bytes().decode().split("\0")
                    if "serve" not in argv or self.model not in argv:
                        continue
                    environ = dict(item.split("=", 1) for item in (proc / "environ").read_bytes().decode().split("\0") if "=" in item)
                except (OSError, UnicodeDecodeError):
                    continue
                self.seen[int(proc.name)] = {"port": argv[argv.index("--port") + 1],
                                             "gpus": environ.get("CUDA_VISIBLE_DEVICES")}
            time.sleep(0.1)


@needs_serve
@needs_proc
def test_local_two_tasks_two_workers_one_server_each_with_its_own_gpus(tiny_model, tmp_path):
    ids = write_corpus(tmp_path / "corpus", files=2, per_file=3)
    tags = tmp_path / "tags"
    command = [sys.executable, "-m", "curate.cli", "tag-llm", "--model", str(tiny_model), "--backend", "transformers",
               "--device", "cpu", "--mode", "joint", "--max-doc-tokens", "48", "--max-answer-tokens", "6",
               "--input", str(tmp_path / "corpus"), "--output", str(tags), "--tasks", "2", "--workers", "2",
               "--gpus-per-task", "2"]
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": FAKE_GPUS}
    with ServerWatch(tiny_model) as watch:
        first = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert first.returncode == 0, first.stderr[-3000:]
    servers = list(watch.seen.values())
    assert len(servers) == 2, servers
    assert len({s["port"] for s in servers}) == 2
    assert sorted(s["gpus"] for s in servers) == ["gpu-a,gpu-b", "gpu-c,gpu-d"]

    out = tags / "llm_v1"
    assert sorted(r["id"] for r in rows(out)) == sorted(ids)  # every document exactly once
    logs = sorted(p.name for p in (out / "_logs" / "server").glob("*.log"))
    assert logs == ["server_rank_00000_node_-1.log", "server_rank_00001_node_-1.log"]
    written = {p: p.stat().st_mtime_ns for p in out.glob("attributes_*.parquet")}

    with ServerWatch(tiny_model) as watch:
        again = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert again.returncode == 0, again.stderr[-3000:]
    assert watch.seen == {}, "a rerun of finished tasks started a server"
    assert {p: p.stat().st_mtime_ns for p in out.glob("attributes_*.parquet")} == written


@needs_serve
def test_cli_refuses_more_gpus_than_visible(tiny_model, tmp_path):
    write_corpus(tmp_path / "corpus", files=1, per_file=1)
    result = CliRunner(env={"CUDA_VISIBLE_DEVICES": "0,1"}).invoke(app, [
        "tag", "--classifier", "llm", "--model", str(tiny_model), "--backend", "transformers", "--input",
        str(tmp_path / "corpus"), "--output", str(tmp_path / "tags"), "--tasks", "4", "--workers", "2",
        "--gpus-per-task", "2"])
    assert result.exit_code == 2
    assert "needs 4 GPUs on this machine, but 2 are visible" in " ".join(result.output.split())


# --------------------------------------------------------------------------------------------- #
# Slurm: the job array asks for the GPUs, and an element runs as Slurm would run it
# --------------------------------------------------------------------------------------------- #
def run_array_element(logs: Path, index: int, tmp_path: Path, env: dict | None = None) -> None:
    """The command after `srun` in the script, with the array index set; a stand-in `scontrol`
    expands the node list on a machine without Slurm."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "scontrol").write_text('#!/bin/sh\necho "$3"\n')
    (bin_dir / "scontrol").chmod(0o755)
    launch = next(line for line in (logs / "launch_script.slurm").read_text().splitlines() if "launch_pickled_pipeline" in line)
    command = shlex.split(launch)[shlex.split(launch).index("launch_pickled_pipeline"):]
    command[0] = str(Path(sys.executable).parent / command[0])
    element = subprocess.run(command, capture_output=True, text=True, timeout=240, check=False, env={
        **(env or os.environ), "SLURM_ARRAY_TASK_ID": str(index), "SLURM_NODELIST": "node1", "RUN_OFFSET": "0",
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"})
    assert element.returncode == 0, element.stderr[-3000:]


@needs_serve
def test_slurm_dry_run_asks_for_gpus_and_an_element_tags_its_shard(tiny_model, tmp_path):
    ids = write_corpus(tmp_path / "corpus", files=2, per_file=2)
    tags = tmp_path / "tags"
    result = CliRunner().invoke(app, [
        "tag-llm", "--model", str(tiny_model), "--backend", "transformers", "--device", "cpu", "--mode", "joint",
        "--max-doc-tokens", "48", "--max-answer-tokens", "6", "--input", str(tmp_path / "corpus"), "--output", str(tags),
        "--tasks", "2", "--workers", "2", "--executor", "slurm", "--slurm-partition", "gpu", "--gpus-per-task", "2",
        "--slurm-dry-run",
    ], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "dry run" in result.output
    out = tags / "llm_v1"
    script = (out / "_logs" / "launch_script.slurm").read_text()
    directives = dict(re.findall(r"^#SBATCH --([\w-]+)=?(.*)$", script, flags=re.MULTILINE))
    assert directives["gpus"] == "2" and directives["partition"] == "gpu"
    assert directives["array"] == "0-1%2" and directives["job-name"] == "curate-tag-llm_v1"
    assert not rows(out), "a dry run must not tag anything"

    run_array_element(out / "_logs", 0, tmp_path)
    assert sorted(r["id"] for r in rows(out)) == sorted(i for i in ids if i.startswith("f0-"))
    assert {p.name for p in (out / "_logs" / "completions").iterdir()} == {"00000"}
    assert (out / "_logs" / "server" / "server_rank_00000_node_-1.log").exists()


def test_endpoint_key_is_read_in_the_worker_and_written_nowhere(tiny_model, tmp_path, monkeypatch):
    secret = "sk-curate-test-9f8e7d6c5b4a"
    monkeypatch.setenv("CURATE_API_KEY", secret)
    ids = write_corpus(tmp_path / "corpus", files=2, per_file=2)
    tags = tmp_path / "tags"
    with FaultServer({}, seed=0) as server:
        result = CliRunner().invoke(app, [
            "tag", "--classifier", "llm", "--model", str(tiny_model), "--backend", "endpoint", "--endpoint-url",
            server.url, "--input", str(tmp_path / "corpus"), "--output", str(tags), "--tasks", "2",
            "--executor", "slurm", "--slurm-partition", "cpu", "--slurm-dry-run",
        ], catch_exceptions=False)
        assert result.exit_code == 0, result.output
        out = tags / "llm_v1"
        written = [p for p in out.rglob("*") if p.is_file()]
        assert {"executor.json", "executor.pik", "launch_script.slurm"} <= {p.name for p in written}
        for index in (0, 1):
            run_array_element(out / "_logs", index, tmp_path)
        served = sum(server.outcomes.values())
    assert served == len(ids) * 4
    assert sorted(r["id"] for r in rows(out)) == sorted(ids)
    assert secret not in result.output
    for path in out.rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), f"the API key was written to {path}"


# --------------------------------------------------------------------------------------------- #
# Ray
# --------------------------------------------------------------------------------------------- #
@needs_serve
@needs_proc
@pytest.mark.skipif(not HAS_RAY, reason="Ray not installed (pip install 'ray[default]')")
def test_ray_gives_each_task_a_server_on_the_gpus_ray_reserved(tiny_model, tmp_path):
    import ray

    from curate.pipelines.llm_tag import run_llm_tagging
    from curate.pipelines.readers import InputSpec

    ids = write_corpus(tmp_path / "corpus", files=2, per_file=2)
    options = LLMTagOptions(model=str(tiny_model), backend="transformers", device="cpu", mode="joint", max_doc_tokens=48,
                            max_answer_tokens=6)
    # A Ray node told it has four GPUs hands out their ids exactly as on a GPU machine: it sets each task's
    # CUDA_VISIBLE_DEVICES to the ids it reserved for it, and the task's server inherits them.
    ray.init(num_cpus=2, num_gpus=4, include_dashboard=False, log_to_driver=False)
    try:
        with ServerWatch(tiny_model) as watch:
            result = run_llm_tagging(InputSpec(str(tmp_path / "corpus")), tmp_path / "tags", options, tasks=2, workers=2,
                                     progress=False, executor=ExecutorOptions(kind="ray", gpus_per_task=2))
    finally:
        ray.shutdown()
    assert sorted(r["id"] for r in rows(result.tags_dir)) == sorted(ids)
    servers = list(watch.seen.values())
    assert len(servers) == 2 and len({s["port"] for s in servers}) == 2, servers
    reserved = [s["gpus"].split(",") for s in servers]
    assert all(len(g) == 2 for g in reserved) and not set(reserved[0]) & set(reserved[1]), reserved

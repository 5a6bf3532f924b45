"""Scaling of `curate tag` (cues classifier): documents/s with 1 and 2 local workers, Ray against local
on the same input, and peak RSS of the whole process tree as the input grows.

    .venv/bin/python bench/scaling.py --files 4 --per-file 8000 [--ray]

Each measurement is a fresh `curate tag` subprocess into a fresh output directory, so nothing is
skipped as already done; peak RSS and CPU time are sampled from the process tree every 50 ms.
Every run uses as many tasks as workers: datatrove gives task r the files r, r + tasks, ..., so
`--files` should be a multiple of 2, and each task pays its startup (classifier build, and on Ray an
actor process) once instead of once per file. The machine is shared: each line also prints the CPU
time other processes took during the run, which is what a speed-up below the target usually means.

Ray is timed twice: against a cluster started beforehand (`ray start --head`, how a cluster is used:
started once, many jobs), and with `curate tag` starting its own single-node Ray and stopping it,
which adds the cluster's start and shutdown to that one run.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def write_corpus(folder: Path, files: int, per_file: int) -> int:
    from tests.support.shared import sample_texts

    texts = sample_texts()
    folder.mkdir(parents=True)
    for f in range(files):
        with (folder / f"part-{f:03d}.jsonl").open("w") as out:
            for i in range(per_file):
                out.write(json.dumps({"id": f"{f}-{i}", "text": texts[(f * per_file + i) % len(texts)]}) + "\n")
    return files * per_file


class Measured:
    def __init__(self, seconds: float, rss_mib: float, cpu_s: float, others_cpu_s: float):
        self.seconds, self.rss_mib, self.cpu_s, self.others_cpu_s = seconds, rss_mib, cpu_s, others_cpu_s

    def describe(self, n: int) -> str:
        return (f"{self.seconds:.1f} s, {n / self.seconds:,.0f} docs/s, peak RSS {self.rss_mib:,.0f} MiB, "
                f"CPU {self.cpu_s:.1f} s (other processes on this machine: {self.others_cpu_s:.1f} CPU-s)")


def run(corpus: Path, out: Path, tasks: int, workers: int, executor: str, extra: list[str] = (),
        env: dict | None = None) -> Measured:
    command = [sys.executable, "-m", "curate.cli", "tag", "--input", str(corpus), "--output", str(out),
               "--tasks", str(tasks), "--workers", str(workers), "--executor", executor, *extra]
    machine_before = psutil.cpu_times()
    started = time.perf_counter()
    process = psutil.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           env={**os.environ, **(env or {})})
    peak = 0
    cpu: dict[int, float] = {}  # last CPU time seen per process of the tree (children exit before the end)
    stop = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not stop.is_set():
            try:
                tree = [process, *process.children(recursive=True)]
            except psutil.Error:
                tree = []
            rss = 0
            for p in tree:
                try:
                    with p.oneshot():
                        rss += p.memory_info().rss
                        times = p.cpu_times()
                        cpu[p.pid] = times.user + times.system
                except psutil.Error:
                    pass
            peak = max(peak, rss)
            time.sleep(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    _, stderr = process.communicate()
    stop.set()
    sampler.join()
    seconds = time.perf_counter() - started
    machine_after = psutil.cpu_times()
    busy = sum(getattr(machine_after, f) - getattr(machine_before, f) for f in ("user", "system", "nice"))
    if process.returncode != 0:
        raise SystemExit(f"curate tag failed:\n{stderr.decode()[-3000:]}")
    ours = sum(cpu.values())
    return Measured(seconds, peak / 2**20, ours, max(0.0, busy - ours))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_ray_head(cpus: int, temp_dir: Path, env: dict) -> tuple[subprocess.Popen, str, float]:
    """A single-node Ray cluster of its own: free ports, its own temp dir and its own auth token (`env`,
    which every client of it must also get), so it neither meets nor stops another cluster on this
    machine; `--block` ties the cluster to this one process."""
    port = free_port()
    command = [str(Path(sys.executable).parent / "ray"), "start", "--head", "--block", "--disable-usage-stats",
               "--include-dashboard", "false", "--num-cpus", str(cpus), "--node-ip-address", "127.0.0.1",
               "--port", str(port), "--ray-client-server-port", str(free_port()),
               "--dashboard-agent-listen-port", str(free_port()), "--dashboard-agent-grpc-port", str(free_port()),
               "--runtime-env-agent-port", str(free_port()), "--metrics-export-port", str(free_port()),
               "--temp-dir", str(temp_dir)]
    address = f"127.0.0.1:{port}"
    started = time.perf_counter()
    head = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                            env={**os.environ, **env})
    probe = [sys.executable, "-c", f"import ray; ray.init(address={address!r}, log_to_driver=False); ray.shutdown()"]
    while subprocess.run(probe, check=False, capture_output=True, timeout=60, env={**os.environ, **env}).returncode:
        if head.poll() is not None or time.perf_counter() - started > 120:
            head.kill()
            raise SystemExit("could not start a Ray head for the benchmark")
        time.sleep(0.5)
    return head, address, time.perf_counter() - started


def stop_ray_head(head: subprocess.Popen) -> None:
    # `ray start --block` stops the cluster it started when it is terminated.
    head.send_signal(signal.SIGTERM)
    try:
        head.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(head.pid, signal.SIGKILL)
        head.wait()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=4, help="a multiple of 2, so both workers get equal shares")
    parser.add_argument("--per-file", type=int, default=8000)
    parser.add_argument("--ray", action="store_true", help="also time --executor ray")
    parser.add_argument("--rss-per-file", type=int, default=4000, help="documents per file in the RSS check")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        n = write_corpus(tmp / "corpus", args.files, args.per_file)
        print(f"corpus: {args.files} files, {n:,} documents; {os.cpu_count()} CPUs, "
              f"load average {os.getloadavg()[0]:.2f} before the first run")
        local = {}
        for workers in (1, 2):
            local[workers] = run(tmp / "corpus", tmp / f"w{workers}", workers, workers, "local")
            print(f"local, {workers} worker(s) / {workers} task(s): {local[workers].describe(n)}")
        print(f"speed-up 2 vs 1 workers: {local[1].seconds / local[2].seconds:.2f}x (target >= 1.7x)")
        if args.ray:
            auth = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32)}
            head, address, boot = start_ray_head(2, Path(tempfile.mkdtemp(prefix="ray", dir="/tmp")), auth)
            try:
                print(f"ray head started in {boot:.1f} s (once per cluster, not per run)")
                ray = run(tmp / "corpus", tmp / "ray", 2, 2, "ray", ["--ray-address", address], env=auth)
            finally:
                stop_ray_head(head)
            # The actors are the cluster's processes, not children of `curate tag`: their CPU time and
            # memory show under "other processes", not in this line's CPU and RSS.
            print(f"ray (running cluster), 2 workers / 2 tasks: {ray.describe(n)}; overhead vs local: "
                  f"{100 * (ray.seconds / local[2].seconds - 1):+.0f} % (target <= 15 %)")
            own = run(tmp / "corpus", tmp / "ray-own", 2, 2, "ray")
            print(f"ray (started and stopped by the run), 2 workers / 2 tasks: {own.describe(n)}; overhead vs local: "
                  f"{100 * (own.seconds / local[2].seconds - 1):+.0f} %")
        for scale in (1, 4):
            corpus = tmp / f"rss{scale}"
            m = write_corpus(corpus, 2, args.rss_per_file * scale)
            measured = run(corpus, tmp / f"rss-out{scale}", 1, 1, "local")
            print(f"RSS check: {m:,} documents, 1 worker: peak RSS {measured.rss_mib:,.0f} MiB ({measured.seconds:.1f} s)")

if __name__ == "__main__":
    main()

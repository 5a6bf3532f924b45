"""A command whose model server cannot be reached ends, promptly, with one line: never a traceback, never a process
that stays alive. Each test runs the real CLI as a subprocess against 127.0.0.1 on a port nothing listens on.

The hang these guard against: SIGTERM became KeyboardInterrupt raised inside datatrove's event loop, which then
cancelled the request cache's writer before the cache could close, and the cache's SQLite worker thread (not a
daemon) kept the interpreter from exiting after it had printed its error."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.qwen_vocab import make_qwen_tokenizer

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "curate" / "sample_data" / "corpus"
# Far above what either command needs here (seconds); a hang is cut off here and reported as a failure.
LIMIT = 90


def closed_port() -> int:
    """A port that was free a moment ago and that nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def run_cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "curate.cli", *args]
    process = subprocess.Popen(command, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True)
    try:
        stdout, stderr = process.communicate(timeout=LIMIT)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate()
        pytest.fail(f"still running after {LIMIT} s:\n{stderr[-3000:]}")
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)


def last_line(stderr: str) -> str:
    return [line for line in stderr.splitlines() if line.strip()][-1]


def test_tag_llm_against_a_closed_port_exits_2_with_one_line(tmp_path):
    tokenizer = make_qwen_tokenizer(tmp_path / "tokenizer")
    url = f"http://127.0.0.1:{closed_port()}/v1"
    done = run_cli(["tag-llm", "--model", "org/m", "--tokenizer", str(tokenizer), "--backend", "endpoint",
                    "--endpoint-url", url, "--server-start-timeout", "1", "--server-start-retries", "0",
                    "--input", str(SAMPLE / "*.jsonl"), "--limit", "2", "-o", str(tmp_path / "tags")], ROOT)
    assert done.returncode == 2, done.stderr[-3000:]
    # The error runner's line, not typer's boxed traceback of an unexpected exception (datatrove's own log of the
    # failed task, which it also keeps under _logs/, may precede it).
    assert "╭" not in done.stderr, done.stderr[-3000:]
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert errors == [last_line(done.stderr)], done.stderr[-3000:]
    assert errors[0].startswith(f"error: LLM tagging: the endpoint {url} (org/m) did not answer"), errors[0]


def test_sigterm_while_waiting_for_the_endpoint_stops_the_run(tmp_path):
    """`timeout` signals the whole process group: the command says it was interrupted and exits 130, at once."""
    output = tmp_path / "priming"
    command = [sys.executable, "-m", "curate.cli", "priming", "--variant", "all_strategies", "--writer", "llm",
               "--model", "org/m", "--backend", "endpoint", "--endpoint-url", f"http://127.0.0.1:{closed_port()}/v1",
               "--n", "4", "--test-n", "1", "-o", str(output)]
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True)
    try:
        # The request cache exists once the model job runs (it waits for the endpoint for minutes by default).
        deadline = time.monotonic() + LIMIT
        while not list(output.glob(".curate/llm/*/_checkpoints/*/replay.sqlite3")):
            assert process.poll() is None, process.communicate()[1][-3000:]
            assert time.monotonic() < deadline, "the LLM job never started"
            time.sleep(0.2)
        time.sleep(3)  # past the cache's setup: the job is now polling the endpoint, where a real run spends its wait
        os.killpg(process.pid, signal.SIGTERM)
        signalled = time.monotonic()
        try:
            _, stderr = process.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            pytest.fail(f"still running 30 s after SIGTERM:\n{process.communicate()[1][-3000:]}")
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    assert process.returncode == 130, stderr[-3000:]
    assert time.monotonic() - signalled < 30
    assert last_line(stderr) == "interrupted: run the same command again to resume", stderr[-3000:]


def test_priming_with_a_short_start_timeout_exits_2_with_one_line(tmp_path):
    """--server-start-timeout / --server-start-retries reach every job that starts or waits for a server, not only
    tag-llm: without them this run would wait 300 s per attempt for the endpoint, twice."""
    url = f"http://127.0.0.1:{closed_port()}/v1"
    started = time.monotonic()
    done = run_cli(["priming", "--variant", "all_strategies", "--writer", "llm", "--model", "org/m", "--backend",
                    "endpoint", "--endpoint-url", url, "--server-start-timeout", "1", "--server-start-retries", "0",
                    "--n", "4", "--test-n", "1", "-o", str(tmp_path / "priming")], ROOT)
    assert done.returncode == 2, done.stderr[-3000:]
    assert time.monotonic() - started < LIMIT
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert errors == [last_line(done.stderr)], done.stderr[-3000:]
    assert f"the endpoint {url} (org/m) did not answer (1 s per attempt, 1 attempt)" in errors[0], errors[0]

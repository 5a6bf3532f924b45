"""The CLI's console: datatrove's routine log stays in the task log files unless --verbose asks for it."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from pathlib import Path

from loguru import logger

from curate.console import RoutineLogFilter
from tests.support.shared import DEFAULT_CUES

CURATE = str(Path(sys.executable).parent / "curate")
ROOT = Path(__file__).resolve().parents[2]


def test_the_filter_drops_routine_loguru_messages_and_passes_warnings_and_other_text():
    stream = io.StringIO()
    filtered = RoutineLogFilter(stream)
    for colorize in (False, True):
        sink = logger.add(filtered, level="DEBUG", colorize=colorize,
                          format="{time:YYYY-MM-DD HH:mm:ss.SSS} | <level>{level: <8}</level> | {name} - {message}")
        logger.info("Launching pipeline for rank=0")
        logger.success("📉 Stats: All 2 tasks\nREADER ...")
        logger.warning("could not read part3.jsonl")
        logger.remove(sink)
    filtered.write("Document progress: 64doc [00:00, 506.46doc/s]\r")
    filtered.write("2026-11-30 is a date in a document, not a log line\n")
    text = stream.getvalue()
    assert "Launching" not in text and "Stats" not in text
    assert text.count("could not read part3.jsonl") == 2
    assert "Document progress" in text and "not a log line" in text


def test_cli_prints_progress_and_summary_but_keeps_the_info_log_in_the_task_logs(tmp_path):
    quiet = subprocess.run([CURATE, "tag", "--output", str(tmp_path / "quiet"), "--tasks", "2", "--workers", "2"],
                           capture_output=True, text=True, timeout=300, check=True)
    assert "| INFO" not in quiet.stderr and "Stats:" not in quiet.stderr
    assert "Tagged" in quiet.stderr and "with backtracking" in quiet.stderr
    task_logs = sorted((tmp_path / "quiet" / DEFAULT_CUES / "_logs" / "logs").glob("task_*.log"))
    assert len(task_logs) == 2 and all("Launching pipeline" in p.read_text() for p in task_logs)

    verbose = subprocess.run([CURATE, "--verbose", "tag", "--output", str(tmp_path / "verbose")],
                             capture_output=True, text=True, timeout=300, check=True)
    assert "| INFO" in verbose.stderr and "Stats:" in verbose.stderr


def test_a_failed_task_is_one_line_on_the_console_and_its_traceback_stays_in_the_task_log(tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"id": "a", "text": "Let me check: 2 + 2 = 4."}\n')
    out = tmp_path / "tags"
    failed = subprocess.run([CURATE, "tag", "--input", str(corpus), "--output", str(out), "--classifier",
                             "distilled:" + str(tmp_path / "no-model")], capture_output=True, text=True, timeout=300,
                            check=False)
    assert failed.returncode == 2
    lines = [line for line in failed.stderr.splitlines() if line.strip()]
    assert lines == [line for line in lines if "Traceback" not in line and "| ERROR" not in line]
    assert lines[-1].startswith("error: ") and "is not a distilled model directory" in lines[-1]
    task_log = next((out).glob("*/_logs/logs/task_00000.log")).read_text()
    assert "Traceback" in task_log and "DistilledModelError" in task_log


def test_the_filter_passes_other_errors():
    stream = io.StringIO()
    sink = logger.add(RoutineLogFilter(stream), level="DEBUG",
                      format="{time:YYYY-MM-DD HH:mm:ss.SSS} | {level: <8} | {name}:{function}:{line} - {message}")
    logger.error("a server failed to start")
    logger.remove(sink)
    assert "a server failed to start" in stream.getvalue()


def test_progress_off_a_terminal_is_a_plain_line_every_few_seconds_not_one_per_update(capsys):
    from curate.console import PLAIN_PROGRESS_SECONDS, _PlainProgress

    now = [0.0]
    progress = _PlainProgress("chains", total=1200, unit="chain", clock=lambda: now[0])
    for _ in range(48):  # 48 updates over 12 s
        now[0] += 0.25
        progress.advance(25)
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == int(12 / PLAIN_PROGRESS_SECONDS)
    assert lines[0] == "chains: 500/1,200 chains (100.0/s)"


def test_a_forced_colour_pipe_gets_no_redrawn_bar_and_tqdm_is_slowed_to_match(tmp_path):
    # FORCE_COLOR (CI runners set it) made rich redraw the bar ten times a second into the log.
    script = ("import os, time\n"
              "from curate.console import ProgressBar, plain_progress_off_terminal\n"
              "plain_progress_off_terminal()\n"
              "print(os.environ['TQDM_MININTERVAL'])\n"
              "with ProgressBar('chains', total=200, unit='chain') as bar:\n"
              "    for _ in range(200):\n"
              "        bar.advance(); time.sleep(0.005)\n")
    environment = {**os.environ, "FORCE_COLOR": "1", "PYTHONPATH": str(ROOT)}
    environment.pop("TQDM_MININTERVAL", None)
    done = subprocess.run([sys.executable, "-c", script], env=environment, capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "5\n" and done.stderr == ""  # a 1 s run: under one interval, so no line at all


def test_a_log_file_on_a_full_disk_prints_no_sink_error_but_another_sink_failure_does(monkeypatch):
    stream = io.StringIO()
    monkeypatch.setattr(sys, "stderr", RoutineLogFilter(stream))  # where loguru reports a sink that failed
    full = open("/dev/full", "w")  # noqa: SIM115  every write fails with ENOSPC, as a task log file's on a full disk
    sink = logger.add(full, level="DEBUG")
    logger.error("task 0 failed")
    logger.remove(sink)
    with contextlib.suppress(OSError):
        full.close()  # its flush of what the sink could not write fails again

    def broken(message):
        raise ValueError("a sink with a bug")

    sink = logger.add(broken, level="DEBUG")
    logger.error("task 1 failed")
    logger.remove(sink)
    shown = stream.getvalue()
    # (sinks that earlier tests left on closed streams may add reports of their own)
    assert "--- Logging error in Loguru Handler" in shown and shown.count("ValueError: a sink with a bug") == 1
    assert "No space left on device" not in shown
    sys.stderr.write("the next line passes\n")
    assert stream.getvalue().endswith("the next line passes\n")

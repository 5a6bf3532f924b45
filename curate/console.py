"""What a CLI run prints: progress bars, warnings, errors and curate's summary, not datatrove's INFO log.

datatrove gives every task a loguru sink on `sys.stderr` at INFO (the pipeline, each file opened, the stats
of every task, twice) besides a DEBUG log file per task under the run's `_logs/logs/`. Loguru writes each
message with one `write` call and resolves `sys.stderr` when a sink is added, so a stream in front of
stderr that drops INFO-and-below messages in loguru's format quiets the console while the task log files
keep every line. `--verbose` leaves the stream alone.
"""

from __future__ import annotations

import errno
import os
import re
import sys
import time
from collections.abc import Callable
from typing import Self

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_LOG_HEAD = r"(\[NODE \d+\] )?\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} \| "
_ROUTINE_LOG = re.compile(_LOG_HEAD + r"(TRACE|DEBUG|INFO|SUCCESS)\s*\|")
# datatrove logs a task's exception with its whole traceback (one message, ~190 lines) and then raises it again; the
# command reports it where it surfaces (one line for an error the user can fix, Python's traceback for a bug), and
# the task's log file keeps the traceback.
_TASK_FAILURE_LOG = re.compile(_LOG_HEAD + r"ERROR\s*\| datatrove\.executor\.base:_run_for_rank:")
# When a sink cannot write, loguru prints the record and the sink's traceback between these two lines. On a full disk
# that is the task's log file failing to log the task's own failure: the command reports the full disk itself, and the
# block (~40 lines before its one-line error) is dropped. A sink failing for any other reason is still shown.
_SINK_ERROR_START = "--- Logging error in Loguru Handler"
_SINK_ERROR_END = "--- End of logging error ---"
_DISK_FULL_ERRORS = tuple(f"[Errno {code}]" for code in (errno.ENOSPC, errno.EDQUOT))


class RoutineLogFilter:
    """A text stream that passes everything except routine (INFO and below) loguru messages, the traceback of a
    failed task that datatrove raises again, and loguru's report of a log file that a full disk could not take."""

    def __init__(self, stream):
        self._stream = stream
        self._sink_error: list[str] | None = None  # the lines of a loguru sink error, held until its end line

    def write(self, text: str) -> int:
        if self._sink_error is not None or text.startswith(_SINK_ERROR_START):
            return self._hold_sink_error(text)
        head = _ANSI.sub("", text[:200])
        if _ROUTINE_LOG.match(head) or _TASK_FAILURE_LOG.match(head):
            return len(text)
        return self._stream.write(text)

    def _hold_sink_error(self, text: str) -> int:
        if self._sink_error is None:
            self._sink_error = []
        self._sink_error.append(text)
        if text.startswith(_SINK_ERROR_END):
            report, self._sink_error = "".join(self._sink_error), None
            if not any(code in report for code in _DISK_FULL_ERRORS):
                self._stream.write(report)
        return len(text)

    def __getattr__(self, name):
        return getattr(self._stream, name)


def quiet_routine_logs() -> Callable[[], None]:
    """Puts the filter in front of stderr for this process and the task processes it forks; returns the undo."""
    if isinstance(sys.stderr, RoutineLogFilter):
        return lambda: None
    original = sys.stderr
    sys.stderr = RoutineLogFilter(original)
    _rebind_datatrove_sink()

    def restore() -> None:
        sys.stderr = original
        _rebind_datatrove_sink()

    return restore


def _rebind_datatrove_sink() -> None:
    # datatrove adds its default sink on import, holding whatever stderr was then.
    if "datatrove.utils.logging" in sys.modules:
        sys.modules["datatrove.utils.logging"].setup_default_logger()


# Off a terminal (a log file, a pipe, a scheduler's capture) a progress display writes one plain line this often at
# most: a redrawn bar there is one copy per refresh (rich's ten a second under FORCE_COLOR, tqdm's on every update).
PLAIN_PROGRESS_SECONDS = 5.0


def plain_progress_off_terminal() -> None:
    """Off a terminal, tqdm bars (datatrove's readers' "Document progress", in this process and the task processes it
    starts) write at most every PLAIN_PROGRESS_SECONDS: tqdm reads TQDM_MININTERVAL for its default. A value the user
    set stays."""
    if not sys.stderr.isatty():
        os.environ.setdefault("TQDM_MININTERVAL", f"{PLAIN_PROGRESS_SECONDS:g}")


class ProgressBar:
    """The one progress bar of curate's long jobs (rich, as the CLI's tables and errors): items done, the total when
    known, the rate and time left, and an optional status line (throughput, parse failures). Disabled, it does
    nothing, so callers do not branch on `progress`. Transient: a finished bar leaves the summary, not itself.
    Off a terminal it is a plain line on stderr every PLAIN_PROGRESS_SECONDS at most, never one per update."""

    def __init__(self, label: str, total: int | None = None, enabled: bool = True, unit: str = "doc"):
        self._bar = None
        self._plain: _PlainProgress | None = None
        if enabled and not sys.stdout.isatty():
            self._plain = _PlainProgress(label, total, unit)
        elif enabled:
            # rich.progress is imported only when a bar is drawn: a plain import of curate.console stays cheap.
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            self._bar = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn(f"{unit}s"),
                TimeRemainingColumn(),
                TextColumn("{task.fields[status]}"),
                transient=True,
            )
            self._task = self._bar.add_task(label, total=total, status="")
            self._bar.start()

    def advance(self, n: int = 1) -> None:
        if self._bar is not None:
            self._bar.advance(self._task, n)
        elif self._plain is not None:
            self._plain.advance(n)

    def status(self, text: str) -> None:
        if self._bar is not None:
            self._bar.update(self._task, status=text)
        elif self._plain is not None:
            self._plain.status = text

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
        self._plain = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class _PlainProgress:
    """ProgressBar off a terminal: `label: done/total units (rate/s) status`, a line at most every
    PLAIN_PROGRESS_SECONDS (the first after that long, so a short run writes none)."""

    def __init__(self, label: str, total: int | None, unit: str, clock: Callable[[], float] = time.monotonic):
        self.label, self.total, self.unit, self.status = label, total, unit, ""
        self._clock = clock
        self._start = self._last = clock()
        self.done = 0

    def advance(self, n: int) -> None:
        self.done += n
        now = self._clock()
        if now - self._last < PLAIN_PROGRESS_SECONDS:
            return
        self._last = now
        total = f"/{self.total:,}" if self.total is not None else ""
        rate = self.done / max(now - self._start, 1e-9)
        status = f" {self.status}" if self.status else ""
        sys.stderr.write(f"{self.label}: {self.done:,}{total} {self.unit}s ({rate:,.1f}/s){status}\n")
        sys.stderr.flush()

"""What a CLI run prints: progress bars, warnings, errors and curate's summary, not datatrove's INFO log.

datatrove gives every task a loguru sink on `sys.stderr` at INFO (the pipeline, each file opened, the stats
of every task, twice) besides a DEBUG log file per task under the run's `_logs/logs/`. Loguru writes each
message with one `write` call and resolves `sys.stderr` when a sink is added, so a stream in front of
stderr that drops INFO-and-below messages in loguru's format quiets the console while the task log files
keep every line. `--verbose` leaves the stream alone.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_ROUTINE_LOG = re.compile(r"(\[NODE \d+\] )?\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} \| (TRACE|DEBUG|INFO|SUCCESS)\s*\|")


class RoutineLogFilter:
    """A text stream that passes everything except routine (INFO and below) loguru messages."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text: str) -> int:
        if _ROUTINE_LOG.match(_ANSI.sub("", text[:120])):
            return len(text)
        return self._stream.write(text)

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

"""The labels file: plain JSON lines a user can also write by hand.

One line per read document: `id` and `labels` ({behavior: 0 or 1}; a behavior not given is absent). The review page
adds `stratum` and `stratum_size` (the sampling design, which calibrate weighs by), `spans` (the evidence spans the
reader marked wrong), `seconds` spent and `at` (UTC time). Lines are appended as labels are given and flushed to disk
at once, so a crash or a closed tab loses nothing; a document labeled twice keeps its last line.
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path

from curate.behaviors import BEHAVIOR_NAMES
from curate.errors import CurateError
from curate.files import write_text_atomic


class LabelsFileError(CurateError, ValueError):
    pass


@dataclass(frozen=True)
class UserLabel:
    id: str
    labels: dict[str, int]
    stratum: str | None = None
    stratum_size: int | None = None
    extra: dict = field(default_factory=dict)


def parse_line(line: str, where: str) -> UserLabel:
    try:
        record = json.loads(line)
    except json.JSONDecodeError as error:
        raise LabelsFileError(f"{where}: not a JSON object ({error.msg}); each line is "
                              '{"id": ..., "labels": {"verification": 0 or 1, ...}}') from error
    if not isinstance(record, dict) or "id" not in record or not isinstance(record.get("labels"), dict):
        raise LabelsFileError(f'{where}: a line needs "id" and "labels" ({{"verification": 1, ...}})')
    unknown = sorted(set(record["labels"]) - set(BEHAVIOR_NAMES))
    if unknown:
        raise LabelsFileError(f"{where}: unknown behavior {unknown[0]!r}; the behaviors are "
                              f"{', '.join(BEHAVIOR_NAMES)}")
    labels = {}
    for behavior in BEHAVIOR_NAMES:
        value = record["labels"].get(behavior, 0)
        if value not in (0, 1) or isinstance(value, float):
            raise LabelsFileError(f"{where}: {behavior} is {value!r}; a label is 0 (absent) or 1 (present)")
        labels[behavior] = int(value)
    stratum, size = record.get("stratum"), record.get("stratum_size")
    if (stratum is None) != (size is None) or (size is not None and (not isinstance(size, int) or size < 1)):
        raise LabelsFileError(f"{where}: stratum and stratum_size (a positive count) come together or not at all")
    extra = {k: v for k, v in record.items() if k not in ("id", "labels", "stratum", "stratum_size")}
    return UserLabel(str(record["id"]), labels, stratum, size, extra)


def read_labels(path: Path) -> list[UserLabel]:
    """The labels in `path`, one per document (the last line of an id wins), in the order first given."""
    if not path.exists():
        raise LabelsFileError(f"{path} does not exist: label documents with `curate review`, or write JSON lines "
                              'such as {"id": "doc-1", "labels": {"verification": 1}}')
    by_id: dict[str, UserLabel] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            label = parse_line(line, f"{path}:{number}")
            by_id[label.id] = label
    return list(by_id.values())


class LabelsFile:
    """Appends labels as they are given, one whole line per write, on disk before the call returns."""

    def __init__(self, path: Path):
        self.path = path
        self._lock = threading.Lock()
        self.labeled: dict[str, dict] = {}
        if path.exists():
            # A line cut by a crash mid-write is the only one that can be broken: it is the last, and it is dropped.
            text = path.read_text(encoding="utf-8")
            if text and not text.endswith("\n"):  # a hand-written last line: the next append must start a new one
                write_text_atomic(path, text + "\n")
            lines = text.splitlines()
            for number, line in enumerate(lines, 1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:
                    if number < len(lines):
                        raise LabelsFileError(f"{path}:{number} is not JSON; fix or remove that line to "
                                              "resume") from None
                    write_text_atomic(path, "".join(kept + "\n" for kept in lines[:-1]))
                    continue
                self.labeled[str(record["id"])] = record

    def append(self, record: dict) -> None:
        parse_line(json.dumps(record), str(self.path))  # what is written must read back
        line = json.dumps(record, ensure_ascii=False) + "\n"
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a", encoding="utf-8") as sink:
                sink.write(line)
                sink.flush()
                os.fsync(sink.fileno())
            self.labeled[str(record["id"])] = record

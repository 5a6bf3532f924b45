"""Files that appear whole or not at all: the one atomic write for a single file.

A reader (a rerun, `stats`, a trainer, the hub) must never see half a report, card or record, and a crash must not
leave a file that looks finished. A datatrove writer's shards get the same guarantee from
`curate.pipelines.steps.AtomicOutput`, which names its files with the same PARTIAL suffix.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

PARTIAL = ".partial"  # the name of a file still being written


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yields PATH.partial to write into; renames it to PATH when the block ends and removes it when the block
    raises."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + PARTIAL)
    try:
        yield partial
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    os.replace(partial, path)


def write_text_atomic(path: str | Path, text: str) -> Path:
    with atomic_path(path) as partial:
        partial.write_text(text, encoding="utf-8")
    return Path(path)

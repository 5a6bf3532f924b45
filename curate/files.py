"""Files and folders that appear whole or not at all: the one atomic write.

A reader (a rerun, `stats`, a trainer, the hub) must never see half a report, card, record or data folder, and a
crash must not leave a file that looks finished. Everything is written under a PARTIAL name and renamed once
complete; a datatrove writer's shards get the same guarantee from `curate.pipelines.steps.AtomicOutput`, which names
its files with the same suffix.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

PARTIAL = ".partial"  # the name of a file or folder still being written
REPLACED = ".replaced"  # the name of a folder being swapped out, for the moment between the two renames


def _partial(path: str | Path) -> Path:
    """Where PATH is written until it is whole."""
    path = Path(path)
    return path.with_name(path.name + PARTIAL)


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yields PATH.partial to write into; renames it to PATH when the block ends and removes it when the block
    raises."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = _partial(path)
    try:
        yield partial
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    os.replace(partial, path)


@contextmanager
def atomic_open(path: str | Path, mode: str = "w") -> Iterator[IO]:
    """Yields PATH.partial opened for writing (text as UTF-8 unless MODE is binary); the file is closed before it
    is renamed to PATH, and closed and removed when the block raises."""
    encoding = None if "b" in mode else "utf-8"
    with atomic_path(path) as partial, open(partial, mode, encoding=encoding) as file:
        yield file


@contextmanager
def atomic_open_kept(path: str | Path, mode: str = "w") -> Iterator[IO]:
    """Like atomic_open, except that PATH also takes what was written when the block raises: for records that say
    why a run failed (its rejects), which must outlive the failure. A reader still never sees the file while it is
    being written; a killed process leaves only PATH.partial, which the next run's write replaces."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = _partial(path)
    file = open(partial, mode, encoding=None if "b" in mode else "utf-8")  # noqa: SIM115 - closed in the finally below
    try:
        yield file
    finally:
        file.close()
        os.replace(partial, path)


def write_text_atomic(path: str | Path, text: str) -> Path:
    with atomic_path(path) as partial:
        partial.write_text(text, encoding="utf-8")
    return Path(path)


def replace_folder(new: str | Path, final: str | Path) -> Path:
    """Puts the finished folder NEW where FINAL is: a reader finds the old folder or the new one, never a mix of
    the two. The old one is renamed aside and removed only once NEW has taken its name, so that FINAL is missing for
    no more than the instant between two renames (POSIX has no portable rename that swaps two folders)."""
    new, final = Path(new), Path(final)
    if not new.is_dir():  # checked before FINAL is moved: nothing would take its place
        raise FileNotFoundError(f"no folder {new} to put in place of {final}")
    aside = final.with_name(final.name + REPLACED)
    shutil.rmtree(aside, ignore_errors=True)  # an earlier swap cut short between its two renames
    if final.exists():
        os.replace(final, aside)
    os.replace(new, final)
    shutil.rmtree(aside, ignore_errors=True)
    return final


@contextmanager
def atomic_folder(path: str | Path) -> Iterator[Path]:
    """Yields an empty PATH.partial folder to fill; it takes the place of PATH (replace_folder) when the block ends
    and is removed when the block raises, leaving the earlier PATH (or nothing) as it was."""
    partial = _partial(path)
    shutil.rmtree(partial, ignore_errors=True)  # what an interrupted run had begun
    partial.mkdir(parents=True)
    try:
        yield partial
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    replace_folder(partial, path)

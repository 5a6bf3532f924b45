"""The one dataset-file finder: which files a reader of a dataset path reads.

Every command that reads a built dataset or a folder of data files (export, pass-rate, dedup, decontam, mcqa, the
cards) finds them here, so that what counts as a dataset's files is decided once. A core module: the cards
(data_cards) read it as well as the jobs above them.
"""

from __future__ import annotations

import glob as globlib
import re
from pathlib import Path

DATA = "data"  # a built dataset's rows: DIR/data/SPLIT-NNNNN.parquet
REJECTS = "rejects"  # what a job could not use, with its reason: never read as data
BOOKKEEPING = (".", "_")  # folders a job keeps for itself (.curate, _logs): never read as data
DEFAULT_SPLIT = "train"
# A shard named by its split: curate's SPLIT-NNNNN.parquet, the hub's SPLIT-NNNNN-of-NNNNN.parquet, or either behind
# the counter datatrove puts in front of a rolled-over file (000_SPLIT-NNNNN.parquet).
SHARD_NAME = re.compile(r"^(?:\d+_)?(?P<split>[\w.]+?)-\d{5}(?:-of-\d{5})?\.")


def files_under(folder: str | Path, suffixes: tuple[str, ...] = (".parquet",), nested: bool = True) -> list[Path]:
    """The finished data files in `folder`, sorted, and with `nested` in its folders at any depth: names ending in one
    of `suffixes` (case-insensitive), so a shard still being written (NAME.parquet.partial) never counts, and never a
    file in a rejects/ folder or a bookkeeping folder ('.x', '_x') below `folder`. [] when `folder` is not one."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    found = []
    for file in sorted(folder.rglob("*") if nested else folder.iterdir()):
        folders = file.relative_to(folder).parts[:-1]
        if (file.is_file() and file.suffix.lower() in suffixes
                and not any(part.startswith(BOOKKEEPING) or part == REJECTS for part in folders)):
            found.append(file)
    return found


def dataset_files(path: str | Path, suffixes: tuple[str, ...] = (".parquet",), nested: bool = True,
                  layout: bool = True) -> list[Path]:
    """The data files at `path`, sorted ([] when there is none, or `path` names nothing):

    - a file: itself, whatever its name;
    - a glob ('corpus/**/*.jsonl'): the files it matches, whatever their names;
    - a built dataset, a folder with a data/ folder (curate's layout DIR/data/SPLIT-NNNNN.parquet): the files under
      DIR/data (files_under: never its rejects or bookkeeping);
    - any other folder: files_under it, with `nested` in its folders too.

    Without `layout` a folder is read as it is, every file with one of `suffixes` at any depth: a folder of source
    files that may hold a data/, rejects/ or '_x' folder of its own (mcqa's inputs)."""
    root = Path(str(path)).expanduser()
    if root.is_file():
        return [root]
    if not root.is_dir():
        return sorted(Path(f) for f in globlib.glob(str(root), recursive=True) if Path(f).is_file())
    if not layout:
        return sorted(f for f in root.rglob("*") if f.is_file() and f.suffix.lower() in suffixes)
    if (root / DATA).is_dir():
        return files_under(root / DATA, suffixes)
    return files_under(root, suffixes, nested)


def split_of(file: str | Path) -> str:
    """The split a data file holds, by its name: SPLIT in a shard's name (SHARD_NAME), else "train" (a loose file
    such as corpus.parquet or gsm8k-test.parquet names no split in the layout every reader here writes)."""
    match = SHARD_NAME.match(Path(file).name)
    return match.group("split") if match else DEFAULT_SPLIT

"""Who owns an output folder: one record per dataset folder, so that no command mixes its files with another's.

Every command that writes a dataset claims its output folder first (`claim_output`). The record
(`OUT/.curate-output.json`, beside the dataset rather than in `.curate/`, which builders clear) says which
command wrote the folder, with which parameters, from which input, and whether it finished:

- an empty or new folder is claimed;
- the same command and parameters over the same input, finished and still all there (`output_finished`, the one
  up-to-date rule): nothing to do (an idempotent no-op);
- the same command and parameters over a changed input, or unfinished: the builder runs again (a changed
  input, or a finished dataset missing part of what it wrote, first removes what the stale dataset wrote, except
  what `keep` names, such as reusable tags);
- anything else (another command, other parameters, files curate did not write) is refused unless
  `overwrite`, which first removes what the old dataset wrote. A folder curate did not write is never
  emptied: the user removes those files, or picks another folder.
"""

from __future__ import annotations

import glob as globlib
import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from curate.errors import CurateError
from curate.files import write_text_atomic

OWNER_FILE = ".curate-output.json"
STATE = ".curate"  # every job's own bookkeeping inside its output folder: the one definition


class OutputOccupiedError(CurateError, FileExistsError):
    """The output folder holds another dataset, or files curate did not write."""


@dataclass
class OutputClaim:
    output: Path
    record: dict
    up_to_date: bool  # the same command already finished this dataset from the same input
    fresh: bool = False  # the folder was absent or empty: everything in it is this run's
    created: bool = False  # the folder did not exist before this run
    keep: tuple[str, ...] = ()  # entries that were there before and are not this run's (reusable tags)

    def finish(self) -> None:
        """Marks the dataset complete and lists what it wrote: what a later --overwrite removes."""
        wrote = sorted(p.name for p in self.output.iterdir() if p.name != OWNER_FILE)
        _write_record(self.output, {**self.record, "complete": True, "wrote": wrote})

    def abandon(self) -> None:
        """After a failed run: a folder that was empty before is removed with what the run left in it, so a
        failure leaves nothing behind (no empty data/ or rejects/). A folder that held this dataset keeps its
        unfinished record: the same command again resumes or rewrites it; another is refused without --overwrite."""
        if self.fresh and self.output.is_dir():
            _remove(self.output, [p.name for p in self.output.iterdir() if p.name not in self.keep])
            if self.created and not any(self.output.iterdir()):
                self.output.rmdir()


def write_once(output: str | Path, command: str, parameters: dict, write, inputs=None, overwrite: bool = False,
               keep: tuple[str, ...] = (), abandon: bool = False, refresh: bool = False):
    """`write()` (which returns its result, never None) into `output` under a claim (claim_output): None when the
    folder is up to date, unless `refresh` (a flow whose cached result is stale writes it again); else what `write()`
    returns, once the claim is finished. A failed write leaves the claim unfinished, so the same job resumes it; with
    `abandon`, a failed write into a new folder removes it (an export has nothing to resume). A Slurm submission is
    an exception too: the rerun continues it."""
    claim = claim_output(output, command, parameters, inputs=inputs, overwrite=overwrite, keep=keep)
    if claim.up_to_date and not refresh:
        return None
    try:
        result = write()
    except Exception:
        if abandon:
            claim.abandon()
        raise
    claim.finish()
    return result


def read_record(output: str | Path) -> dict | None:
    """The claim record of `output` (OUT/.curate-output.json), or None where there is none."""
    path = Path(output) / OWNER_FILE
    return json.loads(path.read_text()) if path.is_file() else None


def output_finished(output: str | Path, record: dict | None = None) -> bool:
    """The one up-to-date rule: `output` holds a dataset that its command finished (its claim record says complete)
    and that is still all there (every entry the record lists as written). What makes the same command over the
    same input a no-op (claim_output), and what lets a flow serve its cached result instead of building again.
    `record`: the record already read, else it is read from `output`."""
    record = read_record(output) if record is None else record
    return bool(record and record.get("complete")) and all((Path(output) / name).exists()
                                                           for name in record.get("wrote", []))


def _write_record(output: Path, record: dict) -> None:
    write_text_atomic(output / OWNER_FILE, json.dumps(record, indent=2, sort_keys=True))


def _remove(output: Path, names: list[str]) -> None:
    for name in names:
        path = output / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif path.exists() or path.is_symlink():
            path.unlink()


def folder_signature(path: str | Path) -> list:
    """(relative path, size, mtime) of every file under `path` but bookkeeping: the input of a command that
    reads a built dataset (export, dedup, publish), compared between runs to see whether it changed."""
    root = Path(path)
    if root.is_file():
        stat = root.stat()
        return [[root.name, stat.st_size, stat.st_mtime_ns]]
    files = []
    for file in sorted(root.rglob("*")) if root.is_dir() else []:
        relative = file.relative_to(root)
        if file.is_file() and not any(part.startswith((STATE, "_")) for part in relative.parts):
            stat = file.stat()
            files.append([str(relative), stat.st_size, stat.st_mtime_ns])
    return files


def files_signature(paths) -> list:
    """(absolute path, size, mtime) of each file: the input of a command that reads files it does not tag."""
    return sorted([str(p.resolve()), p.stat().st_size, p.stat().st_mtime_ns] for p in map(Path, paths) if p.is_file())


def claim_output(output: str | Path, command: str, parameters: dict, inputs=None, overwrite: bool = False,
                 keep: tuple[str, ...] = ()) -> OutputClaim:
    """Claims `output` for (command, parameters) over `inputs` (any JSON value describing the input files);
    see the module docstring for the rules. Raises OutputOccupiedError with the fix."""
    output = Path(output)
    if output.exists() and not output.is_dir():
        raise OutputOccupiedError(f"--output {output} is a file, not a folder; pass a folder for the dataset")
    wanted = json.loads(json.dumps({"command": command, "parameters": parameters, "inputs": inputs}, default=str))
    entries = sorted(p.name for p in output.iterdir()) if output.is_dir() else []
    existing = read_record(output)
    if existing is not None and (existing["command"], existing["parameters"]) == (wanted["command"], wanted["parameters"]):
        if existing.get("inputs") == wanted["inputs"] and output_finished(output, existing) and not overwrite:
            return OutputClaim(output, existing, up_to_date=True)
        # A finished dataset missing part of what it wrote has nothing to resume from: it is written afresh.
        damaged = existing.get("complete") and not output_finished(output, existing)
        if existing.get("inputs") != wanted["inputs"] or overwrite or damaged:
            _remove(output, [e for e in entries if e != OWNER_FILE and (overwrite or e not in keep)])
        record = {**wanted, "complete": False}
        _write_record(output, record)
        return OutputClaim(output, record, up_to_date=False)
    # What `keep` names (tags that `curate tag` wrote into OUT/tags for this build) may already be there: not foreign.
    others = [e for e in entries if e != OWNER_FILE and e not in keep]
    fresh, created = not others and existing is None, not output.exists()
    if existing is None and others and STATE not in others:
        shown = ", ".join(others[:8]) + (f" and {len(others) - 8} more" if len(others) > 8 else "")
        raise OutputOccupiedError(
            f"--output {output} holds files curate did not write ({shown}); pass an empty or new folder, "
            "or remove those files yourself")
    if existing is not None or others:
        if not overwrite:
            what = (f"`curate {existing['command']}` with other parameters" if existing and existing["command"] == command
                    else f"a `curate {existing['command']}` dataset" if existing else "an earlier curate dataset")
            changed = ""
            if existing and existing["command"] == command:
                differing = sorted(k for k in {*existing["parameters"], *wanted["parameters"]}
                                   if existing["parameters"].get(k) != wanted["parameters"].get(k))
                changed = f" (differing: {', '.join('--' + k.replace('_', '-') for k in differing)})"
            raise OutputOccupiedError(
                f"--output {output} already holds {what}{changed}; pass another --output, or --overwrite to "
                "remove that dataset and write this one")
        _remove(output, existing.get("wrote") or others if existing else others)
    record = {**wanted, "complete": False}
    _write_record(output, record)
    return OutputClaim(output, record, up_to_date=False, fresh=fresh, created=created, keep=keep)


def path_signature(path: str | Path):
    """The input of a job that reads a file, folder or glob it does not tag (dedup, decontam): each file's size and
    mtime, so that a changed input is another dataset; a hub dataset by its name."""
    text = str(path)
    if text.startswith("hf:"):
        return text
    if Path(text).expanduser().exists():
        return folder_signature(Path(text).expanduser())
    return files_signature(globlib.glob(text, recursive=True))


def in_place(input: str | Path, output: Path) -> bool:
    """dedup/decontam DATASET --output DATASET clean a dataset in place: it stays the dataset its builder wrote
    (and claimed), so the cleaning claims nothing."""
    text = str(input)
    resolved = Path(text).expanduser().resolve()
    return not text.startswith("hf:") and resolved in (output.resolve(), output.resolve() / "data")


def clean_once(input: str | Path, output: str | Path, command: str, parameters: dict, clean, overwrite: bool = False):
    """dedup / decontam: `clean()` into OUTPUT. A dataset cleaned in place stays the dataset its builder wrote and
    claimed, so it is cleaned without a claim of its own; any other OUTPUT is claimed over the input's files
    (write_once: None when up to date)."""
    if in_place(input, Path(output)):
        return clean()
    return write_once(output, command, parameters, clean, inputs=path_signature(input), overwrite=overwrite)

"""What a command prints when it fails: one line for an error the user can fix (a CurateError, an OSError such as a
full disk, which names the folder and how to resume), Python's traceback for a bug."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# A command line on curate's error runner whose commands fail as a bug and as a user error do: `bug` calls a curate
# function with an argument no caller may pass (the plain ValueError of an internal check), `refused` raises the
# error an option check raises.
PROBE = """
import sys
import typer
from curate.cli.app import CurateGroup
from curate.errors import OptionError
from curate.puzzles.countdown import search_leaves

probe = typer.Typer(cls=CurateGroup)

@probe.command()
def bug() -> None:
    list(search_leaves((5,), 5, "dfs"))

@probe.command()
def refused() -> None:
    raise OptionError("--limit must be positive")

probe()
"""


def run_probe(command: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", PROBE, command], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, check=False)


def test_a_bug_shows_its_traceback():
    failed = run_probe("bug")
    assert failed.returncode == 1, failed.stderr
    assert "Traceback" in failed.stderr and "search_leaves" in failed.stderr
    assert "ValueError: Countdown needs at least two numbers" in failed.stderr
    assert "error:" not in failed.stderr


def test_a_curate_error_is_one_line():
    failed = run_probe("refused")
    assert failed.returncode == 2
    assert failed.stderr.strip().splitlines() == ["error: --limit must be positive"]


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs Linux's /dev/full")
def test_a_full_disk_names_the_folder_and_how_to_resume(tmp_path):
    output = tmp_path / "dataset"
    # The tag writer's unfinished shard is /dev/full, on which every write fails with ENOSPC as on a full disk.
    shard = output / "tags" / "cues_ngram_v1" / "000_attributes_00000.parquet.partial"
    shard.parent.mkdir(parents=True)
    shard.symlink_to("/dev/full")
    failed = subprocess.run([sys.executable, "-m", "curate.cli", "build", "--behaviors", "backtracking",
                             "--output", str(output)], cwd=ROOT, capture_output=True, text=True, timeout=300,
                            check=False)
    assert failed.returncode == 2, failed.stderr
    errors = [line for line in failed.stderr.splitlines() if line.startswith("error:")]
    assert errors == [(f"error: no space left on the disk that holds {output} (No space left on device). Free space "
                       "there and run the same command again to resume: finished tasks are kept, and files left "
                       "unfinished under .partial names are replaced.")]
    assert "Traceback" not in failed.stderr and "Logging error" not in failed.stderr

"""The one up-to-date rule (curate.pipelines.state.output_finished): a folder is up to date when its claim record says
its command finished it and everything the record lists as written is still there. The commands (claim_output) and
the flows (whether Prefect may serve a cached result) both ask it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from typer.testing import CliRunner

from curate.cli import app
from curate.pipelines.state import OWNER_FILE, output_finished, read_record, write_once


def write_dataset(output: Path) -> str:
    (output / "data").mkdir(parents=True, exist_ok=True)
    (output / "data" / "train-00000.parquet").write_bytes(b"rows")
    (output / "README.md").write_text("# card\n")
    return "wrote"


def test_finished_means_complete_and_still_all_there(tmp_path: Path):
    output = tmp_path / "out"
    calls = []

    def write():
        calls.append(1)
        return write_dataset(output)

    assert not output_finished(output)  # no record
    assert write_once(output, "build", {"seed": 1}, write, inputs=["a"]) == "wrote"
    assert output_finished(output) and read_record(output)["wrote"] == ["README.md", "data"]
    assert write_once(output, "build", {"seed": 1}, write, inputs=["a"]) is None  # up to date: nothing written
    assert len(calls) == 1
    shutil.rmtree(output / "data")  # what the record says it wrote is gone: not up to date any more
    assert not output_finished(output)
    assert write_once(output, "build", {"seed": 1}, write, inputs=["a"]) == "wrote"
    assert len(calls) == 2 and output_finished(output)
    record = json.loads((output / OWNER_FILE).read_text())
    (output / OWNER_FILE).write_text(json.dumps({**record, "complete": False}))  # a run cut short
    assert not output_finished(output)


def test_a_record_without_a_list_of_what_it_wrote_is_judged_by_complete_alone(tmp_path: Path):
    # Records of curate versions that did not list what they wrote.
    tmp_path.joinpath(OWNER_FILE).write_text(json.dumps({"command": "build", "parameters": {}, "inputs": None,
                                                         "complete": True}))
    assert output_finished(tmp_path)


def test_the_command_rebuilds_a_dataset_whose_data_was_removed(tmp_path: Path):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"id": f"d{i}", "text": f"Plain note {i}."}) + "\n" for i in range(4)))
    out = tmp_path / "D"
    build = ["build", "--behaviors", "none", "--input", str(corpus), "--output", str(out)]
    runner = CliRunner()
    assert runner.invoke(app, build, env={"COLUMNS": "200"}).exit_code == 0
    assert "up to date" in runner.invoke(app, build, env={"COLUMNS": "200"}).output
    shutil.rmtree(out / "data")
    again = runner.invoke(app, build, env={"COLUMNS": "200"})
    assert again.exit_code == 0 and "up to date" not in again.output, again.output
    assert list((out / "data").glob("*.parquet"))

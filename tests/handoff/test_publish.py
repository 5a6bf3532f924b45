"""Publishing: validation, dry-run listing, and uploads against a local stand-in of the Hub's HTTP API.

The stand-in answers the four Hub endpoints an upload uses (create repo, list files, preupload, commit)
and keeps the committed files in memory; huggingface_hub itself does every request, so only the
network boundary is replaced.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import socket
from pathlib import Path

import pytest
from huggingface_hub import DatasetCard

from curate.handoff.jobs import PublishJob
from curate.handoff.publish import InvalidDatasetError, UploadError, publish, validate_dataset
from tests.support.hub import StandInHub, TOKEN, make_dataset







@pytest.fixture
def hub(monkeypatch):
    import huggingface_hub.constants

    # conftest sets HF_HUB_OFFLINE so that nothing reaches the real Hub; every upload here names the
    # stand-in's endpoint explicitly, so lifting it reaches only 127.0.0.1.
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    with StandInHub() as server:
        yield server




def snapshot(directory: Path) -> dict[str, str]:
    return {str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(directory.rglob("*")) if p.is_file()}


def test_validation_lists_the_card_data_images_and_rejects_but_not_bookkeeping(tmp_path):
    plan = validate_dataset(make_dataset(tmp_path / "ds"))
    assert [f.path_in_repo for f in plan.files] == [
        "README.md", "data/train-00000.parquet", "data/train-00001.parquet", "plot.png", "rejects/rejects_00000.jsonl"]
    assert plan.rows == {"default": {"train": 30}}
    assert plan.metadata["license"] == "mit"
    assert [f.path_in_repo for f in validate_dataset(tmp_path / "ds", include_rejects=False).files][-1] == "plot.png"


def test_validation_reports_every_problem(tmp_path):
    directory = make_dataset(tmp_path / "ds", size_categories=["1K<n<10K"],
                             configs=[{"config_name": "default", "data_files": "data/test-*.parquet"}],
                             text="![missing](figures/none.png)\n")
    (directory / "README.md").write_text((directory / "README.md").read_text().replace("license: mit\n", ""))
    with pytest.raises(InvalidDatasetError) as raised:
        validate_dataset(directory)
    problems = "\n".join(raised.value.problems)
    assert "no 'license'" in problems
    assert "no file matches 'data/test-*.parquet'" in problems
    assert "'figures/none.png', which does not exist" in problems


def test_validation_checks_the_size_category_against_the_rows(tmp_path):
    with pytest.raises(InvalidDatasetError, match=r"size_categories says \['1K<n<10K'\] but the data has 30 rows"):
        validate_dataset(make_dataset(tmp_path / "ds", size_categories=["1K<n<10K"]))


def test_validation_rejects_broken_yaml_missing_card_and_unreadable_data(tmp_path):
    directory = make_dataset(tmp_path / "ds")
    card = (directory / "README.md").read_text()
    (directory / "README.md").write_text(card.replace("license: mit", "license: [mit"))
    with pytest.raises(InvalidDatasetError, match="invalid YAML metadata"):
        validate_dataset(directory)
    (directory / "README.md").unlink()
    with pytest.raises(InvalidDatasetError, match="no dataset card"):
        validate_dataset(directory)
    (directory / "README.md").write_text(card)
    (directory / "data" / "train-00001.parquet").write_bytes(b"not parquet at all")
    with pytest.raises(InvalidDatasetError, match="data/train-00001.parquet is not a readable parquet file"):
        validate_dataset(directory)


def test_validation_rejects_patterns_outside_the_directory(tmp_path):
    directory = make_dataset(tmp_path / "ds", configs=[{"config_name": "default", "data_files": "../other/*.parquet"}])
    with pytest.raises(InvalidDatasetError, match="outside the dataset directory"):
        validate_dataset(directory)


def test_dry_run_lists_files_and_needs_no_token_or_network(tmp_path, monkeypatch):
    monkeypatch.delenv("HF_TOKEN", raising=False)
    directory = make_dataset(tmp_path / "ds")
    before = snapshot(directory)
    result = publish(PublishJob(directory=directory, repo_id="my-org/ds", dry_run=True, endpoint="http://127.0.0.1:9"))
    assert result.dry_run and result.commit_url is None
    assert len(result.plan.files) == 5 and result.plan.total_bytes == sum(
        (directory / f.path_in_repo).stat().st_size for f in result.plan.files)
    assert snapshot(directory) == before


def test_dry_run_through_the_cli(tmp_path):
    from typer.testing import CliRunner

    from curate.cli import app

    directory = make_dataset(tmp_path / "ds")
    result = CliRunner().invoke(app, ["publish", str(directory), "--repo-id", "my-org/ds", "--dry-run"])
    assert result.exit_code == 0, result.output
    assert "data/train-00001.parquet" in result.output and "rejects/rejects_00000.jsonl" in result.output
    bad = CliRunner().invoke(app, ["publish", str(directory), "--repo-id", "not-a-repo-id", "--dry-run"])
    assert bad.exit_code == 2 and "ORG/NAME" in bad.output


def test_upload_to_the_stand_in_hub_then_republish_drops_stale_shards(tmp_path, monkeypatch, hub):
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    directory = make_dataset(tmp_path / "ds")
    result = publish(PublishJob(directory=directory, repo_id="my-org/ds", private=True, endpoint=hub.endpoint))
    stored = hub.repos["my-org/ds"]
    assert hub.private["my-org/ds"] is True
    assert set(stored) == {".gitattributes", "README.md", "data/train-00000.parquet", "data/train-00001.parquet",
                           "plot.png", "rejects/rejects_00000.jsonl"}
    assert stored["data/train-00001.parquet"] == (directory / "data" / "train-00001.parquet").read_bytes()
    assert DatasetCard(stored["README.md"].decode()).data.license == "mit"
    assert hub.authorizations == {f"Bearer {TOKEN}"}
    assert result.commit_url.startswith(hub.endpoint)
    record = json.loads((directory / ".curate" / "published.json").read_text())
    assert record["repo_id"] == "my-org/ds" and TOKEN not in json.dumps(record)

    # A rebuild with one shard: the repo must not keep the old second shard in its train split.
    (directory / "data" / "train-00001.parquet").unlink()
    (directory / "README.md").write_text((directory / "README.md").read_text())
    result = publish(PublishJob(directory=directory, repo_id="my-org/ds", endpoint=hub.endpoint))
    assert result.deleted == ["data/train-00001.parquet"]
    assert "data/train-00001.parquet" not in hub.repos["my-org/ds"]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_unreachable_hub_fails_cleanly_and_changes_nothing(tmp_path, monkeypatch):
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    directory = make_dataset(tmp_path / "ds")
    before = snapshot(directory)
    with pytest.raises(UploadError) as raised:
        publish(PublishJob(directory=directory, repo_id="my-org/ds", endpoint=f"http://127.0.0.1:{_closed_port()}"))
    assert "nothing was changed locally" in str(raised.value) and raised.value.transient
    assert TOKEN not in str(raised.value)
    assert snapshot(directory) == before


def test_refused_upload_is_not_transient_and_missing_token_is_clear(tmp_path, monkeypatch, hub):
    directory = make_dataset(tmp_path / "ds")
    monkeypatch.delenv("HF_TOKEN", raising=False)
    with pytest.raises(UploadError, match="HF_TOKEN is not set"):
        publish(PublishJob(directory=directory, repo_id="my-org/ds", endpoint=hub.endpoint))
    assert hub.requests == []
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    hub.failures["/api/repos/create"] = [403]
    with pytest.raises(UploadError) as raised:
        publish(PublishJob(directory=directory, repo_id="my-org/ds", endpoint=hub.endpoint))
    assert not raised.value.transient and TOKEN not in str(raised.value)
    assert not (directory / ".curate" / "published.json").exists()


def test_cli_reports_a_failed_upload_without_the_token(tmp_path, monkeypatch):
    import huggingface_hub.constants
    from typer.testing import CliRunner

    from curate.cli import app

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    directory = make_dataset(tmp_path / "ds")
    result = CliRunner().invoke(app, ["publish", str(directory), "--repo-id", "my-org/ds",
                                      "--endpoint", f"http://127.0.0.1:{_closed_port()}"])
    assert result.exit_code == 1
    assert "upload to my-org/ds" in result.output and TOKEN not in result.output


def test_a_curate_build_output_validates(tmp_path):
    from curate.cli import SAMPLE_CORPUS
    from curate.builders.behavior import run_build
    from curate.pipelines.query import Selection
    from curate.pipelines.readers import InputSpec
    from curate.behaviors import Behavior

    corpus = tmp_path / "corpus"
    shutil.copytree(SAMPLE_CORPUS, corpus)
    output = tmp_path / "built"
    run_build(InputSpec(path=str(corpus / "*.jsonl")), output, Selection(behaviors=[Behavior("backtracking")]),
              progress=False, license="apache-2.0")
    plan = validate_dataset(output)
    uploaded = [f.path_in_repo for f in plan.files]
    assert "README.md" in uploaded and any(p.startswith("data/") for p in uploaded)
    assert not any(p.startswith(("tags/", ".curate/")) for p in uploaded)

"""Prefect flows under prefect_test_harness: every flow on small data, caching, parameter validation,
retries of the I/O task, and every deployment of prefect.yaml."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from prefect import flow
from prefect.client.orchestration import get_client
from prefect.exceptions import ParameterTypeError
from prefect.testing.utilities import prefect_test_harness

from curate.cli import SAMPLE_CORPUS
from curate.flows.build import build_flow
from curate.flows.curate_pipeline import curate_pipeline
from curate.flows.deployments import load_deployments, load_flow
from curate.flows.publish import PublishParameters, publish_flow, push
from curate.flows.tag import tag_flow
from tests.test_publish import TOKEN, StandInHub, make_dataset

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module", autouse=True)
def harness(tmp_path_factory):
    storage = tmp_path_factory.mktemp("prefect-results")
    with pytest.MonkeyPatch.context() as patch:
        # Persisted results and cache records go to a temporary folder, not ~/.prefect.
        patch.setenv("PREFECT_RESULTS_LOCAL_STORAGE_PATH", str(storage))
        with prefect_test_harness():
            yield


@pytest.fixture
def corpus(tmp_path) -> Path:
    shutil.copytree(SAMPLE_CORPUS, tmp_path / "corpus")
    return tmp_path / "corpus"


def task_states(flow_state) -> dict[str, str]:
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    with get_client(sync_client=True) as client:
        runs = client.read_task_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_state.state_details.flow_run_id])))
    return {run.task_key.rsplit("-", 1)[0]: run.state.name for run in runs}


def test_tag_flow_tags_the_corpus_and_a_rerun_is_served_from_cache(corpus, tmp_path):
    params = {"input": str(corpus / "*.jsonl"), "output": str(tmp_path / "tags")}
    state = tag_flow(params=params, return_state=True)
    summary = state.result()
    rows = sum(pq.ParquetFile(p).metadata.num_rows for p in (tmp_path / "tags" / "cues_v1").glob("*.parquet"))
    lines = sum(len(p.read_text().splitlines()) for p in corpus.glob("*.jsonl"))
    assert summary["documents"] == rows == lines - sum(summary["rejects"].values())
    assert summary["classifier"] == "cues_v1"
    assert "Completed" in task_states(state).values()

    again = tag_flow(params=params, return_state=True)
    assert again.result() == summary
    assert list(task_states(again).values()) == ["Cached"]

    # Outputs gone: the cache is refreshed, not trusted.
    shutil.rmtree(tmp_path / "tags")
    third = tag_flow(params=params, return_state=True)
    assert list(task_states(third).values()) == ["Completed"]
    assert third.result()["documents"] == summary["documents"]


def test_the_cache_key_follows_inputs_classifier_and_configuration(corpus, tmp_path):
    from curate.flows.common import cache_key
    from curate.flows.tag import TagParameters

    params = TagParameters(input=str(corpus / "*.jsonl"), output=str(tmp_path / "tags"))
    key = cache_key("tag", params)
    assert cache_key("tag", params) == key
    assert cache_key("tag", params.model_copy(update={"batch_size": 8})) != key
    assert cache_key("build", params) != key
    (corpus / "part2.jsonl").write_text((corpus / "part2.jsonl").read_text() + '{"id": "new", "text": "Wait."}\n')
    assert cache_key("tag", params) != key


def test_invalid_parameters_are_rejected_before_the_run(corpus, tmp_path):
    with pytest.raises(ParameterTypeError, match="does not exist"):
        tag_flow(params={"input": str(tmp_path / "missing.jsonl"), "output": str(tmp_path / "tags")})
    with pytest.raises(ParameterTypeError, match="matches no file"):
        tag_flow(params={"input": str(corpus / "*.parquet"), "output": str(tmp_path / "tags")})
    with pytest.raises(ParameterTypeError, match="classifier"):
        tag_flow(params={"input": str(corpus), "output": str(tmp_path / "tags"), "classifier": "nope_v9"})
    with pytest.raises(ParameterTypeError, match="both required and excluded"):
        build_flow(params={"input": str(corpus), "output": str(tmp_path / "ds"), "behaviors": "backtracking",
                           "exclude_behaviors": "backtracking"})
    with pytest.raises(ParameterTypeError, match="ORG/NAME"):
        publish_flow(params={"directory": str(tmp_path), "repo_id": "no-slash"})
    assert not (tmp_path / "tags").exists() and not (tmp_path / "ds").exists()


def test_build_flow_writes_a_dataset_with_a_card(corpus, tmp_path):
    summary = build_flow(params={"input": str(corpus / "*.jsonl"), "output": str(tmp_path / "ds"),
                                 "behaviors": "backtracking", "license": "apache-2.0"})
    rows = pq.read_table(tmp_path / "ds" / "data").to_pylist()
    assert summary["selected"] == len(rows) > 0
    assert all(row["backtracking"] >= 1 for row in rows)
    assert (tmp_path / "ds" / "README.md").is_file()


def test_publish_flow_dry_run_lists_files(tmp_path):
    directory = make_dataset(tmp_path / "ds")
    summary = publish_flow(params={"directory": str(directory), "repo_id": "my-org/ds", "dry_run": True})
    assert summary["dry_run"] is True
    assert [f["path_in_repo"] for f in summary["files"]][0] == "README.md" and len(summary["files"]) == 5


def test_curate_pipeline_runs_end_to_end_on_the_sample_corpus(corpus, tmp_path, monkeypatch):
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)  # the stand-in is on 127.0.0.1
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    with StandInHub() as hub:
        result = curate_pipeline(params={
            "input": str(corpus / "*.jsonl"), "output": str(tmp_path / "ds"), "behaviors": "backtracking,verification",
            "license": "apache-2.0", "repo_id": "my-org/pipeline", "endpoint": hub.endpoint,
        })
    assert result["tag"]["documents"] > 0
    assert result["build"]["selected"] > 0
    stored = hub.repos["my-org/pipeline"]
    assert "README.md" in stored and any(p.startswith("data/") and p.endswith(".parquet") for p in stored)
    assert not any(p.startswith(("tags/", ".curate/")) for p in stored)
    assert hub.private["my-org/pipeline"] is True
    assert result["publish"]["commit_url"].startswith(hub.endpoint)


def test_a_failing_upload_is_retried_and_a_refused_one_is_not(tmp_path, monkeypatch):
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    directory = make_dataset(tmp_path / "ds")

    @flow
    def publish_now(params: PublishParameters, files: list[dict]):
        # The real task with its real retry count and condition; only the waits between tries are cut.
        return push.with_options(retry_delay_seconds=0)(params, files)

    files = [{"path_in_repo": "README.md", "size": (directory / "README.md").stat().st_size}]
    with StandInHub() as hub:
        hub.failures["/api/repos/create"] = [503, 502]
        params = PublishParameters(directory=str(directory), repo_id="my-org/retried", endpoint=hub.endpoint)
        summary = publish_now(params, files)
        assert hub.requests.count(("POST", "/api/repos/create")) == 3
        assert summary["files"] == 5 and "data/train-00000.parquet" in hub.repos["my-org/retried"]

        hub.failures["/api/repos/create"] = [403, 403, 403, 403]
        refused = PublishParameters(directory=str(directory), repo_id="my-org/refused", endpoint=hub.endpoint)
        state = publish_now(refused, files, return_state=True)
        assert state.is_failed()
        assert hub.failures["/api/repos/create"] == [403, 403, 403]  # one try only


def test_every_deployment_parses_and_points_at_a_flow_that_exists(tmp_path, monkeypatch):
    from prefect.client.schemas.schedules import CronSchedule
    from prefect.flows import Flow

    specs = load_deployments(ROOT / "prefect.yaml")
    assert {"nightly-tag", "weekly-rebuild-publish"} <= {s.name for s in specs}
    # Parameters name paths relative to the project; validate them where such a project exists.
    shutil.copytree(SAMPLE_CORPUS, tmp_path / "corpus")
    monkeypatch.chdir(tmp_path)
    for spec in specs:
        loaded = load_flow(spec, ROOT)
        assert isinstance(loaded, Flow), spec.name
        loaded.validate_parameters(spec.parameters)
        for cron in spec.crons:
            CronSchedule(cron=cron, timezone=spec.timezone)
        assert spec.work_pool == "curate-local"
    assert any(s.crons == ["0 2 * * *"] for s in specs) and any(s.crons == ["0 4 * * 0"] for s in specs)

"""Prefect flows under prefect_test_harness: every flow on small data, caching, parameter validation,
retries of the I/O task, and every deployment of prefect.yaml."""

from __future__ import annotations

import shutil
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from prefect import flow
from prefect.client.orchestration import get_client
from prefect.exceptions import ParameterTypeError
from prefect.testing.utilities import prefect_test_harness
from typer.testing import CliRunner

from curate.cli import SAMPLE_CORPUS, app
from curate.data_cards.cards import check_card
from curate.flows.build import build_flow
from curate.flows.cpt import cpt_flow
from curate.flows.curate_pipeline import curate_pipeline
from curate.flows.deployments import load_deployments, load_flow
from curate.flows.export import export_flow
from curate.flows.mcqa import mcqa_flow
from curate.flows.multihop import multihop_flow
from curate.flows.priming import priming_flow
from curate.flows.publish import PublishParameters, publish_flow, push
from curate.flows.tag import tag_flow
from curate.handoff.publish import validate_dataset
from curate.pipelines.readers import InputSpec
from tests.support.hub import TOKEN, StandInHub, make_dataset
from tests.support.shared import DEFAULT_CUES

ROOT = Path(__file__).resolve().parents[2]
GSM8K_LINE = ('{"question": "Tom has 3 boxes of 4 apples. How many apples?", '
              '"answer": "3 boxes of 4 is 3*4=<<3*4=12>>12.\\n#### 12"}\n')
MCQA_LINE = '{"question": "What is 2 + 3?", "choices": ["4", "5", "6", "7"], "answer": "B"}\n'


def assert_publishable(directory: Path) -> None:
    """The card loads and carries the required metadata, and the dataset loads as the Hub would read it."""
    card = check_card(directory / "README.md")
    assert card.data.license and card.data.configs
    assert validate_dataset(directory).files


@pytest.fixture(scope="module", autouse=True)
def harness(tmp_path_factory):
    storage = tmp_path_factory.mktemp("prefect-results")
    with pytest.MonkeyPatch.context() as patch:
        # Persisted results and cache records go to a temporary folder, not ~/.prefect.
        patch.setenv("PREFECT_RESULTS_LOCAL_STORAGE_PATH", str(storage))
        # A busy 2-core machine can take more than the default 30 s to start the temporary server.
        with prefect_test_harness(server_startup_timeout=180):
            yield


@pytest.fixture
def corpus(tmp_path) -> Path:
    shutil.copytree(SAMPLE_CORPUS, tmp_path / "corpus")
    return tmp_path / "corpus"


def task_runs(flow_state) -> list:
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    with get_client(sync_client=True) as client:
        return client.read_task_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_state.state_details.flow_run_id])))


def task_states(flow_state) -> dict[str, str]:
    return {run.task_key.rsplit("-", 1)[0]: run.state.name for run in task_runs(flow_state)}


def test_tag_flow_tags_the_corpus_and_a_rerun_is_served_from_cache(corpus, tmp_path):
    params = {"input": str(corpus / "*.jsonl"), "output": str(tmp_path / "tags")}
    state = tag_flow(params=params, return_state=True)
    summary = state.result()
    rows = sum(pq.ParquetFile(p).metadata.num_rows for p in (tmp_path / "tags" / DEFAULT_CUES).glob("*.parquet"))
    lines = sum(len(p.read_text().splitlines()) for p in corpus.glob("*.jsonl"))
    assert summary["documents"] == rows == lines - sum(summary["rejects"].values())
    assert summary["classifier"] == DEFAULT_CUES
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


def test_a_change_to_curate_code_invalidates_cached_results(corpus, tmp_path, monkeypatch):
    from curate.flows import common

    package = tmp_path / "package"
    shutil.copytree(common.PACKAGE_ROOT, package, ignore=shutil.ignore_patterns("__pycache__"))
    before = common.code_signature(package)
    (package / "sample_data" / "corpus" / "part1.jsonl").write_text("")  # bundled data is not code
    assert common.code_signature.__wrapped__(package) == before
    prompt = package / "classifiers" / "prompts" / "llm_v1" / "system.txt"
    prompt.write_text(prompt.read_text() + " ")
    assert common.code_signature.__wrapped__(package) != before

    params = {"input": str(corpus / "*.jsonl"), "output": str(tmp_path / "tags")}
    first = tag_flow(params=params, return_state=True)
    assert list(task_states(tag_flow(params=params, return_state=True)).values()) == ["Cached"]
    monkeypatch.setattr(common, "code_signature", lambda: "a patched release")
    rerun = tag_flow(params=params, return_state=True)
    assert list(task_states(rerun).values()) == ["Completed"]
    assert rerun.result()["documents"] == first.result()["documents"]


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
    # The flow runs the command's job: `curate build` with the same options finds the flow's dataset its own.
    again = CliRunner().invoke(app, ["build", "--input", str(corpus / "*.jsonl"), "--output", str(tmp_path / "ds"),
                                     "--behaviors", "backtracking", "--license", "apache-2.0"])
    assert again.exit_code == 0 and "is up to date" in again.output, again.output


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
            "license": "apache-2.0", "repo_id": "my-org/pipeline", "endpoint": hub.endpoint, "export_to": "cpt",
        })
    assert result["tag"]["documents"] > 0
    assert result["build"]["selected"] > 0
    exported = pq.read_table(tmp_path / "ds-cpt" / "data")
    assert sum(result["export"]["rows"].values()) == result["build"]["selected"]
    assert exported.column_names == ["text", "id"]
    assert sorted(exported["id"].to_pylist()) == sorted(pq.read_table(tmp_path / "ds" / "data")["id"].to_pylist())
    for directory in (tmp_path / "ds", tmp_path / "ds-cpt"):
        assert_publishable(directory)
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
    assert {"nightly-tag", "weekly-rebuild-publish", "weekly-priming", "weekly-multihop", "mcqa",
            "export-verl", "cpt"} <= {s.name for s in specs}
    # Parameters name paths relative to the project; validate them where such a project exists.
    shutil.copytree(SAMPLE_CORPUS, tmp_path / "corpus")
    (tmp_path / "problems" / "gsm8k").mkdir(parents=True)
    (tmp_path / "problems" / "gsm8k" / "train.jsonl").write_text(GSM8K_LINE)
    (tmp_path / "problems" / "mcqa").mkdir()
    (tmp_path / "problems" / "mcqa" / "items.jsonl").write_text(MCQA_LINE)
    make_dataset(tmp_path / "datasets" / "multihop")
    (tmp_path / "tags" / DEFAULT_CUES).mkdir(parents=True)  # the cpt deployment reads the nightly-tag output
    pq.write_table(pa.table({"id": ["a"]}), tmp_path / "tags" / DEFAULT_CUES / "attributes_00000.parquet")
    monkeypatch.chdir(tmp_path)
    for spec in specs:
        loaded = load_flow(spec, ROOT)
        assert isinstance(loaded, Flow), spec.name
        loaded.validate_parameters(spec.parameters)
        for cron in spec.crons:
            CronSchedule(cron=cron, timezone=spec.timezone)
        assert spec.work_pool == "curate-local"
    assert any(s.crons == ["0 2 * * *"] for s in specs) and any(s.crons == ["0 4 * * 0"] for s in specs)


def test_priming_flow_builds_each_variant_with_a_valid_card_and_caches_them(tmp_path):
    params = {"variant": "only_backtracking,empty_cot", "output": str(tmp_path / "priming"), "n": 6, "test_n": 2}
    state = priming_flow(params=params, return_state=True)
    summaries = state.result()
    assert [s["variant"] for s in summaries] == ["only_backtracking", "empty_cot"]
    for summary in summaries:
        directory = Path(summary["output"])
        assert directory == tmp_path / "priming" / summary["variant"]
        splits = {s: pq.read_table(directory / "data" / f"{s}-00000.parquet") for s in ("train", "test")}
        assert {s: t.num_rows for s, t in splits.items()} == summary["rows"] == {"train": 6, "test": 2}
        assert set(splits["train"]["variant"].to_pylist()) == {summary["variant"]}
        assert_publishable(directory)
    assert [run.state.name for run in task_runs(state)] == ["Completed", "Completed"]

    again = priming_flow(params=params, return_state=True)
    assert again.result() == summaries and [run.state.name for run in task_runs(again)] == ["Cached", "Cached"]


def test_mcqa_multihop_and_export_flows_on_real_data(shared_data, tmp_path):
    mcqa = mcqa_flow(params={"inputs": [str(shared_data / "aqua" / "dev.json")], "output": str(tmp_path / "mcqa"),
                             "limit": 40})
    rows = pq.read_table(tmp_path / "mcqa" / "data").to_pylist()
    rejects = (tmp_path / "mcqa" / "rejects" / "rejects.jsonl").read_text().splitlines()
    assert mcqa["kept"] == len(rows) > 0 and mcqa["rejected"] == len(rejects) and len(rows) + len(rejects) == 40
    assert all(row["answer"] and row["data_source"] for row in rows)
    assert_publishable(tmp_path / "mcqa")

    multihop = multihop_flow(params={"input": str(shared_data / "gsm8k" / "test.jsonl"),
                                     "output": str(tmp_path / "multihop"), "n": 5, "hops": "2-3"})
    full = pq.read_table(tmp_path / "multihop" / "data" / "full-00000.parquet").to_pylist()
    assert multihop["rows"]["full"] == len(full) == 5 and all(2 <= row["n_hops"] <= 3 for row in full)
    assert_publishable(tmp_path / "multihop")

    export = export_flow(params={"dataset": str(tmp_path / "multihop"), "to": "verl", "output": str(tmp_path / "verl")})
    assert export["rows"] == multihop["rows"] and not export["rejected"]
    verl = pq.read_table(tmp_path / "verl" / "data" / "full-00000.parquet").to_pylist()
    assert [r["reward_model"]["ground_truth"] for r in verl] == [r["answer"] for r in full]
    assert_publishable(tmp_path / "verl")
    assert check_card(tmp_path / "verl" / "README.md").data.license == "mit"  # the source's license carries over


def test_flows_claim_their_output_as_the_commands_do(tmp_path):
    from curate.pipelines.state import OutputOccupiedError

    (tmp_path / "ds" / "data").mkdir(parents=True)
    rows = [{"id": f"q{i}", "question": f"What is {i} + 1?", "completion": f"{i} + 1 = {i + 1}"} for i in range(3)]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "ds" / "data" / "train-00000.parquet")
    params = {"dataset": str(tmp_path / "ds"), "to": "sft", "output": str(tmp_path / "e")}
    first = export_flow(params=params)
    assert first["rows"] == {"train": 3}
    shard = tmp_path / "e" / "data" / "train-00000.parquet"
    written = shard.stat().st_mtime_ns
    assert export_flow(params=params) == first and shard.stat().st_mtime_ns == written
    with pytest.raises(OutputOccupiedError, match="--overwrite"):
        export_flow(params={**params, "to": "cpt"})
    assert shard.stat().st_mtime_ns == written
    export_flow(params={**params, "to": "cpt"}, overwrite=True)
    assert pq.read_table(shard).column_names == ["text", "id"]


def test_new_flows_reject_invalid_parameters_before_the_run(corpus, tmp_path):
    with pytest.raises(ParameterTypeError, match="unknown variant"):
        priming_flow(params={"variant": "nope", "output": str(tmp_path / "p")})
    with pytest.raises(ParameterTypeError, match="tokenizer"):
        priming_flow(params={"variant": "placeholder_cot", "output": str(tmp_path / "p")})
    with pytest.raises(ParameterTypeError, match="does not exist"):
        mcqa_flow(params={"inputs": [str(tmp_path / "missing.json")], "output": str(tmp_path / "m")})
    with pytest.raises(ParameterTypeError, match="unknown format"):
        mcqa_flow(params={"inputs": [str(corpus)], "output": str(tmp_path / "m"), "format": "xml"})
    with pytest.raises(ParameterTypeError, match="hops"):
        multihop_flow(params={"input": str(corpus), "output": str(tmp_path / "h"), "hops": "1"})
    with pytest.raises(ParameterTypeError, match="unknown target"):
        export_flow(params={"dataset": str(corpus), "to": "nemo", "output": str(tmp_path / "e")})
    with pytest.raises(ParameterTypeError, match="no parquet files"):
        export_flow(params={"dataset": str(corpus), "to": "verl", "output": str(tmp_path / "e")})
    with pytest.raises(ParameterTypeError, match="needs export_to"):
        curate_pipeline(params={"input": str(corpus), "output": str(tmp_path / "ds"), "behaviors": "backtracking",
                                "repo_id": "my-org/x", "publish": "export"})
    assert not any((tmp_path / name).exists() for name in ("p", "m", "h", "e", "ds"))


def test_pipeline_can_publish_the_export_as_a_dry_run(corpus, tmp_path):
    result = curate_pipeline(params={
        "input": str(corpus / "*.jsonl"), "output": str(tmp_path / "ds"), "behaviors": "backtracking",
        "export_to": "cpt", "export_output": str(tmp_path / "cpt"), "repo_id": "my-org/cpt", "publish": "export",
        "dry_run": True,
    })
    listed = [f["path_in_repo"] for f in result["publish"]["files"]]
    assert result["publish"]["dry_run"] is True and listed[0] == "README.md"
    assert {p for p in listed if p.startswith("data/")} == {f"data/{Path(f).name}" for f in result["export"]["files"]}


def test_cpt_flow_matches_both_sets_caches_and_validates(corpus, tmp_path):
    from curate.pipelines.tag import run_tagging
    from tests.support.tiny_model import make_tiny_chat_model

    tags = run_tagging(InputSpec(str(corpus / "*.jsonl")), tmp_path / "tags", "cues", progress=False).tags_dir
    params = {"tags": str(tags), "texts": str(corpus / "*.jsonl"), "tokens": "4k", "output": str(tmp_path / "cpt"),
              "tokenizer": str(make_tiny_chat_model(tmp_path / "model")), "seed": 3, "export": False}
    state = cpt_flow(params=params, return_state=True)
    summary = state.result()
    tokens = {v: sum(pq.read_table(tmp_path / "cpt" / v / "data")["n_tokens"].to_pylist()) for v in ("enriched", "minimized")}
    assert tokens == {"enriched": summary["match"]["enriched_tokens"], "minimized": summary["match"]["minimized_tokens"]}
    assert all(abs(t - 4000) <= 40 for t in tokens.values()) and summary["match"]["length_match"] == "best"
    assert "length matching | `best`" in (tmp_path / "cpt" / "enriched" / "README.md").read_text()
    again = cpt_flow(params=params, return_state=True)
    assert again.result() == summary and [run.state.name for run in task_runs(again)] == ["Cached"]

    for bad, match in (({"tokens": "lots"}, "--tokens"), ({"length_match": "exact"}, "--length-match"),
                       ({"behaviors": "nope"}, "nope"), ({"tags": str(corpus)}, "no attribute shards"),
                       ({"require_solution": True, "solution_judge": "llm"}, "needs --model")):
        with pytest.raises(ParameterTypeError, match=match):
            cpt_flow(params={**params, **bad, "output": str(tmp_path / "bad")})
    assert not (tmp_path / "bad").exists()


def test_flows_take_the_executor_and_cleaning_options_their_commands_take(corpus, shared_data, tmp_path):
    # A Slurm dry run is the executor path that needs no cluster: the flow returns the submission, not a failure.
    submitted = build_flow(params={"input": str(corpus / "*.jsonl"), "output": str(tmp_path / "ds"),
                                   "behaviors": "backtracking",
                                   "executor": {"kind": "slurm", "partition": "cpu", "dry_run": True}})
    assert "dry run" in submitted["submitted"] and submitted["scripts"]
    assert all(Path(script).is_file() for script in submitted["scripts"])
    with pytest.raises(ParameterTypeError, match="needs --slurm-partition"):
        tag_flow(params={"input": str(corpus), "output": str(tmp_path / "tags"), "executor": {"kind": "slurm"}})
    with pytest.raises(ParameterTypeError, match="needs --model"):
        mcqa_flow(params={"inputs": [str(shared_data / "aqua" / "dev.json")], "output": str(tmp_path / "m"),
                          "reformulate": True})

    # --dedup on a multi-hop build: the report the command's summary reads is there, and counts what was read.
    multihop_flow(params={"input": str(shared_data / "gsm8k" / "test.jsonl"), "output": str(tmp_path / "mh"),
                          "n": 5, "hops": "2-3", "cleaning": {"dedup": True}})
    report = json.loads((tmp_path / "mh" / ".curate" / "dedup.json").read_text())
    assert report["read"] >= 5
    # A benchmark the decontamination cannot read fails the flow before it builds, as it fails the command.
    with pytest.raises(ParameterTypeError, match="no_such_benchmark"):
        multihop_flow(params={"input": str(shared_data / "gsm8k" / "test.jsonl"), "output": str(tmp_path / "bad"),
                              "cleaning": {"decontam": "no_such_benchmark"}})
    assert not (tmp_path / "bad").exists()

"""audit-verifier, audit-policy, handoff and publish take one job each (issue 16 part 4): the job each command line
makes, the checks that refuse before anything is written, and handoff's claim record, which is what `curate handoff`
recorded before its job (else a rerun would refuse an existing kit as another one)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from curate.cli import app
from curate.flows.publish import PublishParameters
from curate.handoff.jobs import HandoffJob, PolicyAuditJob, PublishJob, VerifierAuditJob
from curate.handoff.passrate import SamplingOptions
from curate.options import offered
from curate.pipelines.llm.options import ServerOptions
from curate.pipelines.state import OWNER_FILE, folder_signature
from tests.support.jobs import job_from


def test_audit_verifier_hands_the_policy_and_its_judge_their_servers():
    job = job_from(VerifierAuditJob, ["--policy", "org/policy", "--problems", "ds", "--k", "4", "--n", "20",
                                      "--reward", "math", "--reward", "last-number", "--backend", "endpoint",
                                      "--endpoint-url", "http://policy:8000/v1", "--temperature", "0.7",
                                      "--judge-model", "org/judge", "--label", "agree", "-o", "audits/op"])
    assert (job.policy, job.problems, job.n, job.reward, job.label, job.output) == (
        "org/policy", Path("ds"), 20, ["math", "last-number"], "agree", Path("audits/op"))
    assert job.server == SamplingOptions(model="org/policy", k=4, backend="endpoint",
                                         endpoint_url="http://policy:8000/v1", temperature=0.7)
    # The judge runs on the policy's server settings (--tp's 1 too), as a plain server of its own model.
    assert job.judge == ServerOptions(model="org/judge", backend="endpoint", endpoint_url="http://policy:8000/v1")
    pairs = job_from(VerifierAuditJob, ["--pairs", "a.jsonl", "--pairs", "b.parquet", "--by-behavior", "cues"])
    assert (pairs.pairs, pairs.by_behavior, pairs.judge, pairs.server.model) == (
        [Path("a.jsonl"), Path("b.parquet")], "cues", None, None)


def test_audit_verifier_refuses_before_it_reads_or_samples(tmp_path):
    for argv, message in (([], "give --pairs FILE"), (["--policy", "m"], "--policy needs --problems"),
                          (["--pairs", "p.jsonl", "--policy", "m"], "give --pairs FILE")):
        refused = CliRunner().invoke(app, ["audit-verifier", "-o", str(tmp_path / "op"), *argv])
        assert refused.exit_code == 2 and message in refused.output, argv
    unreadable = tmp_path / "pairs.jsonl"
    unreadable.write_text('{"id": "a", "gold": "1"}\n')
    refused = CliRunner().invoke(app, ["audit-verifier", "--pairs", str(unreadable)])
    assert refused.exit_code == 2 and f"no valid pairs in {unreadable} (1 rows rejected: " in refused.output
    assert not (tmp_path / "op").exists()


def test_audit_policy_hands_the_sweep_its_sampling_and_judge(tmp_path):
    job = job_from(PolicyAuditJob, ["--checkpoints", "ckpts/step_*", "--prompt-format", "tinyzero", "--k", "2",
                                    "--n", "3", "-c", "llm_v1", "--judge-model", "org/judge", "--judge-backend", "vllm",
                                    "--max-tokens", "64"])
    assert (job.model, job.checkpoints, job.n, job.classifier, job.task) == (None, "ckpts/step_*", 3, "llm_v1", None)
    assert job.server == SamplingOptions(model=None, k=2, prompt_format="tinyzero", max_tokens=64)
    assert job.judge == ServerOptions(model="org/judge", backend="vllm")
    both = CliRunner().invoke(app, ["audit-policy", "--model", "m", "--checkpoints", "ckpts/*", "-o", str(tmp_path)])
    assert both.exit_code == 2 and "give the policy as --model M" in both.output
    assert list(tmp_path.iterdir()) == []


def test_handoff_records_what_it_recorded_before_its_job(tmp_path):
    ds = tmp_path / "ds"
    (ds / "data").mkdir(parents=True)
    rows = [{"id": f"q{i}", "question": f"What is {i} + 1?", "answer": str(i + 1), "data_source": "curate/math"}
            for i in range(3)]
    pq.write_table(pa.Table.from_pylist(rows), ds / "data" / "train-00000.parquet")
    argv = [str(ds), "--trainer", "verl", "-o", str(tmp_path / "kit"), "--system", "Be brief."]
    assert job_from(HandoffJob, argv) == HandoffJob(dataset=ds, trainer="verl", output=tmp_path / "kit",
                                                     system="Be brief.")
    made = CliRunner().invoke(app, ["handoff", *argv])
    assert made.exit_code == 0, made.output
    record = json.loads((tmp_path / "kit" / OWNER_FILE).read_text())
    # What `curate handoff` wrote into OUTPUT/.curate-output.json for these options before its job.
    assert (record["command"], record["complete"], record["inputs"]) == ("handoff", True, folder_signature(ds))
    assert record["parameters"] == {"dataset": str(ds.resolve()), "to": "verl", "instruction": None,
                                    "system": "Be brief."}
    again = CliRunner().invoke(app, ["handoff", *argv])
    assert again.exit_code == 0 and "is up to date" in again.output
    # The dataset itself as the kit's folder is refused before it is claimed: --overwrite would have emptied it.
    into_itself = CliRunner().invoke(app, ["handoff", str(ds), "--trainer", "trl", "-o", str(ds), "--overwrite"])
    assert into_itself.exit_code == 2 and "must not be the dataset itself" in into_itself.output
    assert sorted(p.name for p in ds.rglob("*")) == ["data", "train-00000.parquet"]


def test_the_publish_flow_takes_the_command_job(tmp_path):
    argv = [str(tmp_path), "--repo-id", "my-org/ds", "--private", "--message", "rebuilt", "--no-include-rejects"]
    command = job_from(PublishJob, argv)
    assert command == PublishJob(directory=tmp_path, repo_id="my-org/ds", private=True, include_rejects=False,
                                 commit_message="rebuilt")
    flow = PublishParameters(directory=str(tmp_path), repo_id="my-org/ds", private=True, include_rejects=False,
                             commit_message="rebuilt").job()
    assert dataclasses.replace(flow, directory=Path(flow.directory)) == command
    assert {f.name for f in offered(PublishJob)} == set(PublishParameters.model_fields)
    with pytest.raises(ValidationError, match="is not of the form ORG/NAME"):
        PublishParameters(directory=str(tmp_path), repo_id="no-slash")

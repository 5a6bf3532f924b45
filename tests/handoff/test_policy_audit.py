"""audit-policy over a training run: two tiny checkpoints served by `transformers serve`, the TinyZero completion
prompt through /v1/completions, presence and mean count per behavior, and the behaviors-over-steps figure; llm_v1
labelling the responses in-line on a judge server of its own."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from curate.behaviors import BEHAVIOR_NAMES
from curate.builders.priming import SYSTEM_PREAMBLE, tinyzero_prompt
from curate.classifiers import get_classifier
from curate.cli import app
from curate.handoff.passrate import PassRateError, SamplingOptions
from curate.handoff.policy_audit import BehaviorRow, PolicyAuditError, PolicyAuditResult, checkpoint_dirs, count_row
from curate.rewards import compute_score
from tests.support.fault_server import FaultServer
from tests.support.shared import HAS_SERVE
from tests.support.tiny_model import make_tiny_chat_model

needs_serve = pytest.mark.skipif(not HAS_SERVE, reason="transformers[serving] not installed (pip install 'curate[serve]')")


def test_mean_count_per_response_next_to_presence():
    result = PolicyAuditResult(output=None, model="m", task="countdown", classifier="cues",
                               behaviors={b: BehaviorRow(b) for b in BEHAVIOR_NAMES})
    counts = [3, 0, 1, None]  # verification in four responses; the last could not be labelled
    for i, count in enumerate(counts):
        count_row(result, {"sample": 0, "finish_reason": "stop", "text": "x", "reward": float(i == 0),
                        **{b: (count if b == "verification" else (None if count is None else 0)) for b in BEHAVIOR_NAMES}})
    row = result.behaviors["verification"]
    assert (row.labelled, row.present, row.total) == (3, 2, 4)
    assert row.rate == 2 / 3 and row.mean_count == 4 / 3
    assert row.accuracy_with == 0.5 and row.accuracy_without == 0.0
    assert result.as_dict()["behaviors"]["verification"]["mean_count"] == 4 / 3
    assert result.behaviors["backtracking"].mean_count == 0.0


def test_checkpoints_sort_by_step_number_and_bad_globs_fail(tmp_path):
    for name in ("step_10", "step_2", "step_100", "notes"):
        (tmp_path / name).mkdir()
    (tmp_path / "step_5").write_text("a file, not a checkpoint")
    assert [(s, p.name) for s, p in checkpoint_dirs(str(tmp_path / "step_*"))] == [
        (2, "step_2"), (10, "step_10"), (100, "step_100")]
    with pytest.raises(PolicyAuditError, match="no checkpoint directory"):
        checkpoint_dirs(str(tmp_path / "ckpt-*"))
    (tmp_path / "run_a_step_2").mkdir()
    with pytest.raises(PolicyAuditError, match="same step number"):
        checkpoint_dirs(str(tmp_path / "*step_2"))


def test_prompt_format_is_checked():
    with pytest.raises(PassRateError, match="--prompt-format"):
        SamplingOptions(model="m", k=1, prompt_format="alpaca").validate()
    with pytest.raises(PassRateError, match="--system"):
        SamplingOptions(model="m", k=1, prompt_format="tinyzero", system="Be brief.").validate()
    assert SamplingOptions(model="m", prompt_format="tinyzero").inference_config("/tmp/x").use_chat is False
    assert SamplingOptions(model="m").inference_config("/tmp/x").use_chat is True
    assert tinyzero_prompt("Q?").startswith(SYSTEM_PREAMBLE + "\nUser: Q?\nAssistant:")


@needs_serve
def test_checkpoint_sweep_through_transformers_serve_with_the_tinyzero_prompt(tmp_path):
    run = tmp_path / "ckpts"
    # Two fake checkpoints of one run: two different tiny models, saved under their step directories.
    make_tiny_chat_model(run / "step_20", seed=2)
    make_tiny_chat_model(run / "step_5", seed=1)
    out = tmp_path / "sweep"
    result = CliRunner().invoke(app, [
        "audit-policy", "--checkpoints", str(run / "step_*"), "--task", "countdown", "--n", "2", "--k", "2",
        "--max-tokens", "8", "--device", "cpu", "--prompt-format", "tinyzero", "-o", str(out)])
    assert result.exit_code == 0, result.output
    sweep = json.loads((out / "sweep.json").read_text())
    assert sweep["steps"] == [5, 20] and [p.split("/")[-1] for p in sweep["checkpoints"]] == ["step_5", "step_20"]
    cues = get_classifier("cues")
    for step, audit in zip(sweep["steps"], sweep["audits"]):
        folder = out / f"step_{step}"
        assert audit["model"] == str(run / f"step_{step}") and audit["samples"] == 4
        prompts = pq.read_table(folder / "prompts" / "data" / "train-00000.parquet").to_pylist()
        gold = {p["id"]: p["ground_truth"] for p in prompts}
        samples = pq.read_table(folder / "samples.parquet").to_pylist()
        assert len(samples) == 4
        labelled = [s for s in samples if s["text"] and s["text"].strip()]
        for sample in samples:
            assert sample["finish_reason"] != "error", sample  # /v1/completions answered
            assert sample["reward"] == compute_score("curate/countdown", sample["text"], gold[sample["id"]])
        for behavior in BEHAVIOR_NAMES:
            counts = [cues.classify([s["text"]])[0].counts[behavior] for s in labelled]
            expected_mean = sum(counts) / len(counts) if counts else None
            assert audit["behaviors"][behavior]["mean_count"] == expected_mean
            assert sweep["behaviors"][behavior]["mean_count"][sweep["steps"].index(step)] == expected_mean
        report = json.loads((folder / "report.json").read_text())
        assert report["sampling"]["prompt_format"] == "tinyzero"
    # The same prompts at every step.
    ids = [sorted(r["id"] for r in pq.read_table(out / f"step_{s}" / "prompts" / "data").to_pylist()) for s in (5, 20)]
    assert ids[0] == ids[1]
    figure = out / "behaviors_over_steps.png"
    assert figure.stat().st_size > 10_000 and figure.read_bytes()[:4] == b"\x89PNG"
    readme = (out / "README.md").read_text()
    assert "](behaviors_over_steps.png)" in readme and "| 5 | `step_5` |" in readme and "| 20 | `step_20` |" in readme
    refused = CliRunner().invoke(app, ["audit-policy", "--task", "countdown", "-o", str(tmp_path / "x")])
    assert refused.exit_code != 0 and "--checkpoints" in refused.output


def check_report_against_rows(samples: list[dict], report: dict) -> None:
    """Every sample has a count per behavior or a counted reason, and the report's figures are the rows'."""
    unlabelled = [s for s in samples if any(s[b] is None for b in BEHAVIOR_NAMES)]
    assert all(s["classifier_error"] for s in unlabelled)
    assert report["unlabelled"] == len(unlabelled) == sum(report["unlabelled_reasons"].values())
    for behavior in BEHAVIOR_NAMES:
        counts = [s[behavior] for s in samples if s[behavior] is not None]
        figures = report["behaviors"][behavior]
        assert (figures["labelled"], figures["present"]) == (len(counts), sum(c > 0 for c in counts))
        assert figures["mean_count"] == (sum(counts) / len(counts) if counts else None)


@needs_serve
def test_llm_v1_labels_every_response_in_line_on_a_judge_server_of_its_own(tmp_path):
    tiny = make_tiny_chat_model(tmp_path / "tiny", seed=3)
    # The policy: a stand-in endpoint whose every answer is the text '{"count": 1}' (the tiny random model answers
    # blank lines, which leave llm_v1 nothing to label). The judge: llm_v1 on the tiny model under
    # `transformers serve`, a server of its own on another backend.
    with FaultServer({}, seed=0) as policy, FaultServer({"truncated": 0.3}, seed=3) as stand_in_judge:
        common = ["audit-policy", "--model", "stand-in-policy", "--backend", "endpoint", "--endpoint-url", policy.url,
                  "--task", "countdown", "--n", "3", "--k", "2", "--max-tokens", "16", "--classifier", "llm_v1",
                  "--judge-model", str(tiny)]
        out = tmp_path / "audit"
        result = CliRunner().invoke(app, [*common, "--judge-backend", "transformers", "--device", "cpu", "-o", str(out)])
        assert result.exit_code == 0, result.output
        samples = pq.read_table(out / "samples.parquet").to_pylist()
        report = json.loads((out / "report.json").read_text())
        assert len(samples) == 6 == report["samples"] == policy.outcomes["ok"]
        assert (report["classifier"], report["judge"]) == ("llm_v1", str(tiny))
        tags = [row for path in sorted((out / "tags" / "llm_v1").glob("attributes_*.parquet"))
                for row in pq.read_table(path).to_pylist()]
        # Every response went to the judge, four questions each, and came back by its id.
        assert sorted(t["id"] for t in tags) == sorted(f"{s['key']}#{s['sample']}" for s in samples)
        assert all(len(t["llm_answers"]) == 4 and t["model"] == str(tiny) for t in tags)
        for sample in samples:
            assert sample["classifier"] == "llm_v1" and sample["text"] == '{"count": 1}'
            # The random judge's answers are noise: a count where one parsed, else the parse failure, named.
            for behavior in BEHAVIOR_NAMES:
                assert sample[behavior] is not None or f"{behavior}:" in sample["classifier_error"]
        check_report_against_rows(samples, report)

        # The same judge model on a stand-in endpoint that cuts some answers off: each cut answer is one counted
        # parse failure, every other answer the count it gives.
        out = tmp_path / "audit-stand-in"
        argv = [*common, "--judge-backend", "endpoint", "--judge-endpoint-url", stand_in_judge.url, "-o", str(out)]
        result = CliRunner().invoke(app, argv)
        assert result.exit_code == 0, result.output
        answered = dict(stand_in_judge.outcomes)
        samples = pq.read_table(out / "samples.parquet").to_pylist()
        report = json.loads((out / "report.json").read_text())
        assert sum(answered.values()) == 4 * len(samples) == 24 and answered.get("truncated", 0) > 0
        assert sum(s[b] is None for s in samples for b in BEHAVIOR_NAMES) == answered["truncated"]
        assert all(s[b] in (1, None) for s in samples for b in BEHAVIOR_NAMES)
        assert report["unlabelled_reasons"] == {"parse": report["unlabelled"]}
        check_report_against_rows(samples, report)
        # The same command again resumes both jobs: no sample and no judge request is made twice.
        sampled = policy.outcomes["ok"]
        again = CliRunner().invoke(app, argv)
        assert again.exit_code == 0, again.output
        assert dict(stand_in_judge.outcomes) == answered and policy.outcomes["ok"] == sampled
        assert pq.read_table(out / "samples.parquet").to_pylist() == samples
    refused = CliRunner().invoke(app, ["audit-policy", "--model", str(tiny), "--classifier", "llm_v1", "-o",
                                       str(tmp_path / "x")])
    assert refused.exit_code == 2 and "--judge-model" in refused.output

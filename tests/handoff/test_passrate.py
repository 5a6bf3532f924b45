"""Pass-rate filter and policy audit: band logic, selection over real rate shards, and both end to end on a tiny
random chat model served by `transformers serve` through datatrove's InferenceRunner."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from curate.behaviors import BEHAVIOR_NAMES
from curate.handoff.passrate import (
    PassRateError,
    SamplingOptions,
    band_reason,
    parse_band,
    pass_counts,
    row_key,
    run_passrate_filter,
    select_by_pass_rate,
)
from curate.pipelines.llm.job import JobConfigChangedError
from curate.rewards import compute_score
from tests.support.shared import HAS_SERVE, PASSRATE_ROWS, assert_family_card, write_rates_shard

needs_serve = pytest.mark.skipif(not HAS_SERVE, reason="transformers[serving] not installed (pip install 'curate[serve]')")



@pytest.fixture
def dataset(tmp_path):
    root = tmp_path / "ds"
    (root / "data").mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(PASSRATE_ROWS[:4]), root / "data" / "train-00000.parquet")
    pq.write_table(pa.Table.from_pylist(PASSRATE_ROWS[4:]), root / "data" / "test-00000.parquet")
    return root


def test_band_parsing_and_reasons():
    assert parse_band("0,1") == (0.0, 1.0) and parse_band("0.25, 0.75") == (0.25, 0.75)
    for bad in ("1,0", "0.5", "-0.1,1", "0,1.5", "a,b", "0.3,0.3"):
        with pytest.raises(PassRateError):
            parse_band(bad)
    band = (0.0, 1.0)
    assert band_reason(0.0, band) == "never solved" and band_reason(1.0, band) == "always solved"
    assert band_reason(0.125, band) is None and band_reason(0.875, band) is None
    assert band_reason(None, band).startswith("unscorable")
    assert band_reason(0.25, (0.25, 0.75)) == "pass rate ≤ 0.25" and band_reason(0.75, (0.25, 0.75)) == "pass rate ≥ 0.75"
    assert band_reason(0.5, (0.25, 0.75)) is None
    # Unscorable samples are left out of the rate, not counted as failures.
    assert pass_counts([1.0, 0.0, None, 1.0]) == (3, 2, 2 / 3) and pass_counts([None, None]) == (0, 0, None)




def test_selection_keeps_strictly_inside_the_band_and_rejects_the_rest_with_reasons(dataset, tmp_path):
    out = tmp_path / "filtered"
    # Files sort by name: 0 = test (bad-question, m4), 1 = train (m1, m2, m3, bad-source); bad-* were never prompts.
    write_rates_shard(out, {
        row_key(1, 0): [1.0, 0.0, 1.0, 0.0],  # 0.5: kept
        row_key(1, 1): [1.0, 1.0, 1.0, 1.0],  # always solved
        row_key(1, 2): [None, None, None, None],  # unscorable
        row_key(0, 1): [0.0, 0.0, 0.0, 1.0],  # 0.25
    })
    result = select_by_pass_rate(dataset, out, (0.0, 1.0), progress=False)
    kept = pq.read_table(out / "data" / "train-00000.parquet").to_pylist()
    assert [r["id"] for r in kept] == ["m1"] and kept[0]["pass_rate"] == 0.5 and kept[0]["pass_samples"] == 4
    assert kept[0]["question"] == PASSRATE_ROWS[0]["question"]  # the dataset's own columns travel unchanged
    assert pq.read_table(out / "data" / "test-00000.parquet").column("id").to_pylist() == ["m4"]
    reasons = {r["id"]: r["reason"] for r in map(json.loads, (out / "rejects" / "passrate.jsonl").read_text().splitlines())}
    assert reasons == {"m2": "always solved", "m3": "unscorable: no sample could be scored"}
    assert dict(result.histogram) == {2: 1, 4: 1, 1: 1}

    # Another band over the same samples: reselection only.
    result = select_by_pass_rate(dataset, out, (0.3, 1.0), progress=False)
    assert not (out / "data" / "test-00000.parquet").exists() and result.rejected["pass rate ≤ 0.3"] == 1


def test_options_are_checked_before_any_server_starts(dataset, tmp_path):
    with pytest.raises(PassRateError, match="temperature"):
        SamplingOptions(model="m", k=4, temperature=0.0).validate()
    with pytest.raises(PassRateError, match="endpoint-url"):
        SamplingOptions(model="m", backend="endpoint").validate()
    with pytest.raises(PassRateError, match="itself"):
        run_passrate_filter(dataset, dataset, SamplingOptions(model="m"))


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    from tests.support.tiny_model import make_tiny_chat_model

    return make_tiny_chat_model(tmp_path_factory.mktemp("tiny") / "model")


@needs_serve
def test_filter_end_to_end_through_transformers_serve(dataset, tiny_model, tmp_path):
    out = tmp_path / "pr"
    options = SamplingOptions(model=str(tiny_model), k=2, max_tokens=8, device="cpu", records_per_chunk=2)
    result = run_passrate_filter(dataset, out, options, progress=False)
    rates = [r for f in sorted((out / "rates").glob("rates_*.parquet")) for r in pq.read_table(f).to_pylist()]
    assert sorted(r["id"] for r in rates) == ["m1", "m2", "m3", "m4"]
    source = {r["id"]: r for r in PASSRATE_ROWS}
    for row in rates:
        assert row["k"] == 2 and len(row["samples"]) == 2 and row["completion_tokens"] > 0
        for sample in row["samples"]:
            # Each sample's reward is the registry's verdict on exactly that text.
            assert sample["reward"] == compute_score("curate/math", sample["text"], source[row["id"]]["answer"])
        assert row["pass_rate"] == pass_counts([s["reward"] for s in row["samples"]])[2]
    prompt_rejects = [json.loads(l) for p in (out / "rejects" / "prompts").glob("*.jsonl") for l in p.read_text().splitlines()]
    assert sorted(r["id"] for r in prompt_rejects) == ["bad-question", "bad-source"]
    assert sum(result.kept.values()) + sum(n for r, n in result.rejected.items() if not r.startswith("not a prompt")) == 4
    assert result.rejected["not a prompt: empty question"] == 1
    assert json.loads((out / ".curate" / "passrate.json").read_text())["k"] == 2
    assert_family_card(out / "README.md", "filter-passrate")
    assert not list(out.rglob("*.partial"))

    # Same samples, another band: nothing is sampled again.
    before = {p: p.stat().st_mtime_ns for p in (out / "rates").glob("*.parquet")}
    run_passrate_filter(dataset, out, options, band=(0.0, 0.5), progress=False)
    assert {p: p.stat().st_mtime_ns for p in (out / "rates").glob("*.parquet")} == before
    with pytest.raises(JobConfigChangedError, match=r"another configuration \(k: 2 -> 3; .*pass --overwrite"):
        run_passrate_filter(dataset, out, SamplingOptions(model=str(tiny_model), k=3, device="cpu"), progress=False)


def test_policy_audit_counts_behaviors_and_accuracy_from_labelled_samples():
    from curate.classifiers import get_classifier
    from curate.handoff.policy_audit import BehaviorRow, PolicyAuditResult, count_row, label_rows

    texts = [
        "Let me try 3 * 5 = 15. Let me verify: 15 + 1 = 16, which is the target. <answer>3 * 5 + 1</answer>",
        "First, I'll break this into smaller steps. 20 - 4 = 16. <answer>20 - 4</answer>",
        "This doesn't work. Let me try a different approach. 8 * 2 = 16 <answer>8 * 2</answer>",
        "",
    ]
    rewards = [1.0, 0.0, 1.0, 0.0]
    batch = [{"key": f"0:{i}", "id": f"p{i}", "sample": 0, "data_source": "curate/countdown", "text": t, "reward": r,
              "finish_reason": "stop", "request_error": None} for i, (t, r) in enumerate(zip(texts, rewards))]
    cues = get_classifier("cues")
    rows = label_rows(batch, cues)
    expected = cues.classify(texts[:3])
    for row, label in zip(rows[:3], expected):
        assert {b: row[b] for b in BEHAVIOR_NAMES} == label.counts
    # With its prompt's problem, a response is classified below it, as the labeled sets were read.
    statement = "Numbers: [3, 5, 1], target: 16"
    fresh = {"key": "0:0", "id": "p0", "sample": 0, "data_source": "curate/countdown", "text": texts[0], "reward": 1.0,
             "finish_reason": "stop", "request_error": None}
    below = label_rows([fresh], cues, {"p0": statement})
    assert {b: below[0][b] for b in BEHAVIOR_NAMES} == cues.classify([f"{statement}\n\n{texts[0]}"])[0].counts
    assert below[0]["text"] == texts[0]
    assert all(rows[3][b] is None for b in BEHAVIOR_NAMES) and rows[3]["classifier_error"] == "empty output"
    result = PolicyAuditResult(output=Path("."), model="m", task="countdown", classifier=cues.name,
                               behaviors={b: BehaviorRow(b) for b in BEHAVIOR_NAMES})
    for row in rows:
        count_row(result, row)
    assert (result.samples, result.scored, result.correct, result.unlabelled, result.empty) == (4, 4, 2, 1, 1)
    for behavior, stats in result.behaviors.items():
        with_it = [r for r, label in zip(rewards, expected) if label.counts[behavior]]
        without = [r for r, label in zip(rewards, expected) if not label.counts[behavior]]
        assert stats.labelled == 3 and stats.present == len(with_it)
        assert stats.accuracy_with == (sum(with_it) / len(with_it) if with_it else None)
        assert stats.accuracy_without == (sum(without) / len(without) if without else None)


@needs_serve
def test_policy_audit_end_to_end_on_countdown(tiny_model, tmp_path):
    from curate.classifiers import get_classifier
    from curate.handoff.policy_audit import run_policy_audit

    out = tmp_path / "audit"
    options = SamplingOptions(model=str(tiny_model), k=1, max_tokens=8, device="cpu")
    result = run_policy_audit(out, options, task="countdown", n=3, seed=7, progress=False)
    prompts = pq.read_table(out / "prompts" / "data" / "train-00000.parquet").to_pylist()
    assert len({json.dumps(p["ground_truth"], sort_keys=True) for p in prompts}) == 3
    samples = pq.read_table(out / "samples.parquet").to_pylist()
    assert len(samples) == 3 and result.prompts == 3 and result.samples == 3
    gold = {p["id"]: p["ground_truth"] for p in prompts}
    cues = get_classifier("cues")
    for sample in samples:
        truth = gold[sample["id"]]
        assert sample["reward"] == compute_score("curate/countdown", sample["text"], truth)
        if sample["text"].strip():
            shown = f"Numbers: [{', '.join(map(str, truth['numbers']))}], target: {truth['target']}\n\n{sample['text']}"
            assert {b: sample[b] for b in BEHAVIOR_NAMES} == cues.classify([shown])[0].counts
        else:
            assert all(sample[b] is None for b in BEHAVIOR_NAMES) and sample["classifier_error"] == "empty output"
    report = json.loads((out / "report.json").read_text())
    assert report["samples"] == 3 and report["accuracy"] == result.accuracy and set(report["behaviors"]) == set(BEHAVIOR_NAMES)
    assert report["with_problem"] == sum(bool(s["text"].strip()) for s in samples)
    assert (out / "README.md").read_text().startswith("# Behavior audit of")
    with pytest.raises(ValueError, match="either a task or a dataset"):
        run_policy_audit(out, options, task=None, dataset=None)


def test_problem_statements_come_from_countdown_ground_truths_only(tmp_path):
    from curate.handoff.policy_audit import problem_statements

    rows = [{"id": "a", "ground_truth": json.dumps({"numbers": [3, 5, 2], "target": 16})},
            {"id": "b", "ground_truth": "\\frac{3}{4}"},
            {"id": None, "ground_truth": json.dumps({"numbers": [1, 2], "target": 3})}]
    (tmp_path / "data").mkdir()
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "data" / "train-00000.parquet")
    pq.write_table(pa.Table.from_pylist([{"question": "q"}]), tmp_path / "data" / "other.parquet")
    assert problem_statements(tmp_path) == {"a": "Numbers: [3, 5, 2], target: 16"}
    assert problem_statements(tmp_path / "data" / "other.parquet") == {}

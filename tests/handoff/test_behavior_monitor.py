"""Behavior curves from a GRPO run: `curate audit-policy --rollouts` over the files verl 0.9.1 and TRL 1.16 write
themselves, and the live monitor's metrics in their own logs, each checked against a count made here with the
classifier called directly on the same completions."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from curate.behaviors import BEHAVIOR_NAMES
from curate.classifiers import get_classifier
from curate.cli import app
from curate.rewards import compute_score

TRACES = Path(__file__).resolve().parents[2] / "evals" / "blindset" / "countdown_traces.jsonl"


def countdown_traces(n: int) -> list[dict]:
    rows = [json.loads(line) for line in TRACES.read_text(encoding="utf-8").splitlines() if line.strip()]
    return rows[:n]


def expected_figures(outputs: list[str], problems: list[dict | None], scores: list[float]) -> dict:
    """Share, mean count and accuracy with / without each behavior, counted here: the classifier on each output
    below its problem, written as the labeled sets show it ("Numbers: [..], target: T")."""
    cues = get_classifier("cues")
    texts = [o if p is None else f"Numbers: {json.dumps(p['numbers'])}, target: {p['target']}\n\n{o}"
             for o, p in zip(outputs, problems)]
    counts = [label.counts for label in cues.classify(texts)]
    correct = [s == 1.0 for s in scores]
    figures = {"accuracy": sum(correct) / len(correct)}
    for b in BEHAVIOR_NAMES:
        showing = [c[b] > 0 for c in counts]
        with_it = [ok for ok, shown in zip(correct, showing) if shown]
        without = [ok for ok, shown in zip(correct, showing) if not shown]
        figures[b] = {"rate": sum(showing) / len(showing), "mean_count": sum(c[b] for c in counts) / len(counts),
                      "accuracy_with": sum(with_it) / len(with_it) if with_it else None,
                      "accuracy_without": sum(without) / len(without) if without else None}
    return figures


def test_rollout_sweep_reads_what_verl_writes_to_its_rollout_data_dir(tmp_path):
    from verl.trainer.ppo.ray_trainer import RayPPOTrainer

    traces = countdown_traces(24)
    rollouts = tmp_path / "rollouts"
    by_step = {}
    for step, start in ((1, 0), (2, 8), (10, 16)):  # file names sort as text otherwise: 10 before 2
        chunk = traces[start:start + 8]
        gts = [{"numbers": t["numbers"], "target": t["target"]} for t in chunk]
        outputs = [t["text"] for t in chunk]
        scores = [compute_score("curate/countdown", o, g) for o, g in zip(outputs, gts)]
        # verl's own writer, as its trainer calls it after each step with trainer.rollout_data_dir set; a reward
        # extra (here the monitor's key) rides along as a column.
        RayPPOTrainer._write_generations([f"prompt {i}" for i in range(8)], outputs, gts, scores,
                                         {"behavior_verification": [0] * 8}, str(rollouts), step)
        by_step[step] = (outputs, gts, scores)
    assert sorted(p.name for p in rollouts.iterdir()) == ["1.jsonl", "10.jsonl", "2.jsonl"]

    out = tmp_path / "audit"
    result = CliRunner().invoke(app, ["audit-policy", "--rollouts", str(rollouts), "-o", str(out)])
    assert result.exit_code == 0, result.output
    sweep = json.loads((out / "sweep.json").read_text())
    assert sweep["steps"] == [1, 2, 10] and sweep["layout"] == "verl"
    for index, step in enumerate(sweep["steps"]):
        expected = expected_figures(*by_step[step])
        assert sweep["accuracy"][index] == expected["accuracy"]
        for b in BEHAVIOR_NAMES:
            for figure in ("rate", "mean_count", "accuracy_with", "accuracy_without"):
                assert sweep["behaviors"][b][figure][index] == pytest.approx(expected[b][figure]), (step, b, figure)
        assert sweep["audits"][index]["samples"] == 8 and sweep["audits"][index]["prompts"] == 8
    assert 0 < sweep["accuracy"][0] < 1 and any(v > 0 for v in sweep["behaviors"]["verification"]["rate"])
    samples = pq.read_table(out / "samples.parquet").to_pylist()
    assert [s["step"] for s in samples] == [1] * 8 + [2] * 8 + [10] * 8
    assert [s["text"] for s in samples] == [t["text"] for t in traces]
    assert (out / "behaviors_over_steps.png").read_bytes()[:4] == b"\x89PNG"
    assert "| 10 | `10.jsonl` |" in (out / "README.md").read_text()

    refused = CliRunner().invoke(app, ["audit-policy", "--rollouts", str(tmp_path), "-o", str(tmp_path / "x")])
    assert refused.exit_code != 0 and "no rollout files" in refused.output

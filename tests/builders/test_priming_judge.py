"""The LLM judge of priming traces: its prompt and verdict rule on realistic replies, and the whole path from
`curate priming --judge-model` through a real `transformers serve` of the tests' tiny random model.

A random model's verdicts are noise: the end-to-end test checks the path (every written trace gets a verdict or a
counted failure, the card's numbers are those of the verdict rows, a rerun resumes and another judge is refused),
not what the verdicts say."""

from __future__ import annotations

import json
import re

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from curate.builders.priming import PrimingConfig, PrimingError, run_priming, written_traces
from curate.builders.priming.judge import JudgeOptions, JudgePrompt, judge_traces, verdict
from curate.cli import app
from curate.pipelines.llm.job import JobConfigChangedError
from tests.support.shared import HAS_SERVE

needs_serve = pytest.mark.skipif(
    not HAS_SERVE, reason="transformers[serving] not installed (pip install 'curate[serve]')"
)
WANTED = frozenset({"backtracking", "verification"})


def test_judge_prompt_carries_the_numbers_the_target_and_the_trace_verbatim():
    prompt = JudgePrompt.load()
    think = "Try 8 * 5 = 40 {not a placeholder}. 40 + 5 = 45, not 47.\nBack to 8, 5, 2, 7."
    system, user = prompt.messages(think, [8, 5, 2, 7], 47)
    assert system["role"] == "system" and "Countdown" in system["content"]
    assert "Numbers: 8, 5, 2, 7" in user["content"] and "Target: 47" in user["content"]
    assert think in user["content"]  # braces in a trace are not format fields
    assert prompt.version.startswith("priming_judge_v1-")


def test_verdict_accepts_exactly_the_requested_behaviors_and_never_reads_garbage_as_zero():
    reply = '{"verification": 2, "backtracking": 1, "subgoal_setting": 0, "backward_chaining": 0}'
    assert verdict({"text": reply, "finish_reason": "stop"}, WANTED)["accepted"] is True
    extra = '```json\n{"verification": 1, "backtracking": 2, "subgoal_setting": 1, "backward_chaining": 0}\n```'
    assert verdict({"text": extra}, WANTED)["accepted"] is False  # an unwanted behavior
    missing = "verification: 3\nbacktracking: 0\nsubgoal_setting: 0\nbackward_chaining: 0"
    assert verdict({"text": missing}, WANTED)["accepted"] is False  # a wanted one absent
    for garbage in ("", "The reasoning is careful.", '{"verification": 2}'):
        read = verdict({"text": garbage, "finish_reason": "length"}, WANTED)
        assert read["accepted"] is None and read["error"].startswith("parse:")
    failed = verdict({"error": "TimeoutError: 600 s"}, WANTED)
    assert failed["accepted"] is None and failed["error"].startswith("request:")


def test_judge_options_are_checked_with_the_build():
    with pytest.raises(PrimingError, match="backend"):
        PrimingConfig(variant="only_backtracking", judge={"model": "m", "backend": "nope"}).validate()
    with pytest.raises(PrimingError, match="endpoint-url"):
        PrimingConfig(variant="only_backtracking", judge={"model": "m", "backend": "endpoint"}).validate()


def test_priming_command_passes_the_judge_to_the_build(tmp_path):
    """`--judge-model` reaches the build with the shared server options: an endpoint without its URL is refused
    before anything is written."""
    result = CliRunner().invoke(
        app,
        [
            "priming",
            "--variant",
            "only_backtracking",
            "--n",
            "2",
            "--test-n",
            "0",
            "--judge-model",
            "some/model",
            "--backend",
            "endpoint",
            "-o",
            str(tmp_path / "o"),
        ],
    )
    assert result.exit_code != 0 and "--endpoint-url" in result.output
    assert not (tmp_path / "o" / "data").exists()


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    from tests.support.tiny_model import make_tiny_chat_model

    return make_tiny_chat_model(tmp_path_factory.mktemp("tiny") / "model")


def _written(out):
    """The traces the build wrote, read from its files: kept rows and refused traces."""
    kept = {}
    for path in (out / "data").glob("*.parquet"):
        for row in pq.read_table(path).to_pylist():
            kept[row["id"]] = row
    refused = {
        r["id"]: r
        for r in map(json.loads, (out / "rejects" / "rejects.jsonl").read_text().splitlines())
        if r["think"] is not None
    }
    return kept, refused


@needs_serve
def test_priming_judge_end_to_end_through_a_real_server(tiny_model, tmp_path):
    out = tmp_path / "bv"
    # A short answer budget: the random model always runs to it, and on a CPU each token costs.
    judge = {"model": str(tiny_model), "backend": "transformers", "device": "cpu", "max_tokens": 8}
    run_priming(
        PrimingConfig(variant="backtracking_verification", n=4, test_n=1, seed=3, classifier="cues_v3", judge=judge),
        out,
        progress=False,
    )
    kept, refused = _written(out)
    verdicts = [json.loads(line) for line in (out / "judge" / "verdicts.jsonl").read_text().splitlines()]
    # Every written trace has exactly one verdict: judged, or a counted parse / request failure.
    assert sorted(v["id"] for v in verdicts) == sorted([*kept, *refused])
    for v in verdicts:
        assert v["kept"] == (v["id"] in kept)
        assert (v["accepted"] is None) == (v["error"] is not None)
        assert v["error"] is None or re.match(r"(parse|request): ", v["error"])
        if v["accepted"] is not None:  # the rule, re-derived from the counts
            assert v["accepted"] == all((v["counts"][b] > 0) == (b in WANTED) for b in v["counts"])
    # The card's table is the verdict rows, counted here apart from the builder.
    card = (out / "README.md").read_text()
    for label, rows in (
        ("all written", verdicts),
        ("kept by the classifier", [v for v in verdicts if v["kept"]]),
        ("refused by the classifier", [v for v in verdicts if not v["kept"]]),
    ):
        judged = [v for v in rows if v["accepted"] is not None]
        parse = sum(1 for v in rows if (v["error"] or "").startswith("parse:"))
        request = sum(1 for v in rows if (v["error"] or "").startswith("request:"))
        line = next(x for x in card.splitlines() if x.startswith(f"| {label} |"))
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert cells[1:4] == [str(len(rows)), str(len(judged)), str(sum(1 for v in judged if v["accepted"]))]
        assert cells[5:7] == [str(parse), str(request)]
    judged = [v for v in verdicts if v["accepted"] is not None]
    agreement = [
        sum(1 for v in judged if v["kept"] and v["accepted"]),
        sum(1 for v in judged if v["kept"] and not v["accepted"]),
        sum(1 for v in judged if not v["kept"] and v["accepted"]),
        sum(1 for v in judged if not (v["kept"] or v["accepted"])),
    ]
    stated = re.search(r"both accept (\d+), only the classifier (\d+), only the judge (\d+), neither (\d+)", card)
    assert [int(x) for x in stated.groups()] == agreement
    stats = json.loads((out / ".curate" / "stats.json").read_text())
    without_trace = sum(v for k, v in stats["rejected"].items() if k.startswith("no trace"))
    assert stats["judge"]["all"]["traces"] == len(verdicts) == stats["attempted"] - without_trace
    # The same judge over the same traces resumes: the finished job is not run again. Another judge is refused by
    # the job rule, naming what changed.
    results = sorted((out / "judge" / "results").glob("*.jsonl"))
    stamps = [p.stat().st_mtime_ns for p in results]
    traces = written_traces(out)
    again = judge_traces(traces, WANTED, JudgeOptions(**judge), out)
    assert [(r["id"], r["accepted"], r["error"]) for r in again] == [
        (v["id"], v["accepted"], v["error"]) for v in verdicts
    ]
    assert [p.stat().st_mtime_ns for p in results] == stamps
    with pytest.raises(JobConfigChangedError, match="max_tokens"):
        judge_traces(traces, WANTED, JudgeOptions(**{**judge, "max_tokens": 9}), out)

"""LLM writers: teacher traces for Countdown priming, MCQA reformulation with a judge, and `curate tag
--classifier llm`. Parsers are tested on realistic hand-written replies; the real path runs a tiny random
chat model under `transformers serve` through InferenceRunner, whose garbage must be refused with reasons."""

from __future__ import annotations

import dataclasses
import json

import pyarrow.parquet as pq
import pytest

from curate.behaviors import Behavior
from curate.builders.llm_writers import (
    LLMOptions,
    LLMTrace,
    LLMWriterError,
    Rewrite,
    check_trace,
    parse_rewrite,
    parse_trace,
    parse_verdict,
    review_reformulation,
    run_generation,
    single_rollout,
    trace_requests,
)
from curate.builders.mcqa import stem_reason
from curate.pipelines.llm.job import JobConfigChangedError
from curate.puzzles.countdown import Problem
from tests.support.fault_server import FaultServer
from tests.support.shared import HAS_SERVE

needs_serve = pytest.mark.skipif(not HAS_SERVE, reason="transformers[serving] not installed (pip install 'curate[serve]')")
PROBLEM = Problem(numbers=(25, 3, 7, 2), target=76, solution="(25 - 2) * 3 + 7")

BACKTRACKING_REPLY = """<think>
I need to reach 76 with 25, 3, 7 and 2. Let me try 25 + 7 = 32 first. Then 32 * 2 = 64, and 64 + 3 = 67.
That is not 76, so this doesn't work. Let me go back and try another approach.
25 * 3 = 75. Now 75 + 7 = 82 and 82 - 2 = 80, which is too big.
That path fails too. Let me try a different combination: 25 - 2 = 23, then 23 * 3 = 69, and 69 + 7 = 76.
</think>
<answer> (25 - 2) * 3 + 7 </answer>"""


def _reply(text: str, finish: str = "stop") -> dict:
    return {"text": text, "finish_reason": finish, "completion_tokens": 100}


# --------------------------------------------------------------------------------------------- #
# Teacher traces
# --------------------------------------------------------------------------------------------- #
def test_parse_trace_reads_realistic_replies():
    think, answer = parse_trace("<think>\n25 * 3 = 75.\n75 + 7 - 2 = 80, no.\n</think>\n\n<answer>(25 - 2) * 3 + 7</answer>")
    assert think.startswith("25 * 3 = 75.") and answer == "(25 - 2) * 3 + 7"
    fenced = "```\n<think>Start from 76.</think>\nSo the answer is:\n<answer> 7 + 3 * (25 - 2) </answer>\n```"
    assert parse_trace(fenced) == ("Start from 76.", "7 + 3 * (25 - 2)")
    # The prompt's example answer inside the reasoning does not count; the last answer after </think> does.
    assert parse_trace("<think>Like (1 + 2) / 3.</think><answer>1</answer> <answer>(25 - 2) * 3 + 7</answer>")[1] == "(25 - 2) * 3 + 7"
    for bad, reason in [("", "empty reply"), ("Let me think... (25 - 2) * 3 + 7", "no <think>"),
                        ("<think>ok</think>", "no <answer>"), ("<think> </think><answer>1</answer>", "empty <think>"),
                        ("<think>a</think><think>b</think><answer>1</answer>", "2 <think>"),
                        ("<think>so <answer>1</answer></think><answer>2</answer>", "inside <think>"),
                        ("<think>x</think><answer>  </answer>", "empty <answer>")]:
        with pytest.raises(LLMWriterError, match=reason):
            parse_trace(bad)


def test_check_trace_verifies_answers_and_refuses_with_reasons():
    good = check_trace(_reply(BACKTRACKING_REPLY), PROBLEM, "correct")
    assert isinstance(good, LLMTrace) and good.answer == "(25 - 2) * 3 + 7" and good.completion_tokens == 100
    wrong = "<think>25 * 3 + 7 - 2 = 80, close enough.</think><answer>25 * 3 + 7 - 2</answer>"
    assert check_trace(_reply(wrong), PROBLEM, "correct").startswith("llm answer: '25 * 3 + 7 - 2' is wrong")
    # Incorrect-answer variants want a well-formed expression over the numbers with another value ...
    assert isinstance(check_trace(_reply(wrong), PROBLEM, "incorrect"), LLMTrace)
    # ... and never an unparseable or incomplete one (the reference study's filter kept exactly those).
    for bad in ["25 * 3 + 7", "__import__('os')", "25 ** 3 - 7 - 2", "٢٥ * 3 + 7 - 2", "I could not solve it"]:
        reason = check_trace(_reply(f"<think>trying</think><answer>{bad}</answer>"), PROBLEM, "incorrect")
        assert reason.startswith("llm answer:") and "invalid" in reason
    assert check_trace(_reply(BACKTRACKING_REPLY), PROBLEM, "incorrect").startswith("llm answer:")
    assert check_trace(_reply("<think>25 * 3", "length"), PROBLEM, "correct") == "llm truncated: the reply hit the token limit"
    assert check_trace({"error": "InferenceError: 400 bad request"}, PROBLEM, "correct").startswith("llm request: ")
    assert check_trace(_reply("ĠtheĠofĊ<|endoftext|>"), PROBLEM, "correct").startswith("llm parse: no <think>")


def test_teacher_requests_ask_for_chosen_behaviors_and_forbid_the_others():
    options = LLMOptions(model="teacher", max_tokens=512, temperature=0.6)
    requests = trace_requests([PROBLEM], frozenset({Behavior.BACKTRACKING, Behavior.VERIFICATION}), "incorrect", options)
    (payload,) = requests.values()
    system, user = payload["messages"][0]["content"], payload["messages"][-1]["content"]
    assert payload["max_tokens"] == 512 and payload["temperature"] == 0.6
    shown, _, forbidden = system.partition("Rules:")
    assert "backtracking:" in shown and "verification:" in shown
    assert "plan" in forbidden and "work back from the target" in forbidden and "evaluation" not in forbidden
    assert "arithmetic slip" in system and "[25, 3, 7, 2]" in user and "76" in user


def test_teacher_trace_goes_through_the_behavior_check():
    """A realistic teacher trace with backtracking only: the cue classifier must find backtracking, which
    is what lets the priming builder keep it for only_backtracking and refuse it for negative_control."""
    from curate.classifiers import get_classifier

    trace = check_trace(_reply(BACKTRACKING_REPLY), PROBLEM, "correct")
    (labels,) = get_classifier("cues").classify([trace.think])
    assert labels.error is None and labels.counts["backtracking"] > 0


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    from tests.support.tiny_model import make_tiny_chat_model

    return make_tiny_chat_model(tmp_path_factory.mktemp("tiny") / "model")


@needs_serve
def test_llm_writer_priming_refuses_a_random_teacher_with_reasons(tiny_model, tmp_path):
    from curate.builders.priming import PrimingConfig, PrimingError, run_priming

    config = PrimingConfig(variant="only_backtracking", n=2, test_n=0, writer="llm", max_attempts_factor=2,
                           llm={"model": str(tiny_model), "backend": "transformers", "device": "cpu", "max_tokens": 16})
    with pytest.raises(PrimingError, match="gave up"):
        run_priming(config, tmp_path / "out", progress=False)
    rejects = [json.loads(line) for line in (tmp_path / "out" / "rejects" / "rejects.jsonl").read_text().splitlines()]
    # Every problem sent to the teacher is accounted for, each with a reason from the writer's checks.
    assert len(rejects) == 4 and len({r["id"] for r in rejects}) == 4
    assert all(r["reason"].split(":")[0] in ("llm truncated", "llm parse", "llm answer") for r in rejects)
    assert not list((tmp_path / "out" / "data").glob("*.parquet"))
    results = list((tmp_path / "out" / ".curate" / "llm").rglob("results/*.jsonl"))
    assert sum(len(p.read_text().splitlines()) for p in results) == 4


def test_llm_writer_config_errors_are_clear():
    from curate.builders.priming import PrimingConfig, PrimingError

    with pytest.raises(PrimingError, match="--model"):
        PrimingConfig(variant="only_backtracking", writer="llm").validate()
    with pytest.raises(PrimingError, match="unknown backend"):
        PrimingConfig(variant="only_backtracking", writer="llm", llm={"model": "m", "backend": "ollama"}).validate()
    with pytest.raises(PrimingError, match="endpoint-url"):
        PrimingConfig(variant="only_backtracking", writer="llm", llm={"model": "m", "backend": "endpoint"}).validate()


# --------------------------------------------------------------------------------------------- #
# MCQA reformulation
# --------------------------------------------------------------------------------------------- #
ROW = {
    "id": "aqua/dev:7", "source": "aqua/dev", "answer": "\\frac{3}{4}", "answer_type": "fraction",
    "question": "A bag holds 3 red and 1 blue ball. What is the probability that a ball drawn at random is red? "
                "Express your answer as a common fraction.",
    "original_options": [{"letter": "A", "text": "1/4"}, {"letter": "B", "text": "3/4"}, {"letter": "C", "text": "1/2"}],
    "gold_letter": "B",
}
GOOD_REWRITE = ("<question>A bag holds 3 red balls and 1 blue ball. One ball is drawn at random. What is the probability "
                "that it is red? Express your answer as a common fraction.</question>\n<answer>\\frac{3}{4}</answer>")


def test_parse_rewrite_on_realistic_replies():
    assert parse_rewrite(GOOD_REWRITE) == Rewrite(
        "A bag holds 3 red balls and 1 blue ball. One ball is drawn at random. What is the probability that it is red? "
        "Express your answer as a common fraction.", "\\frac{3}{4}")
    assert parse_rewrite("N/A") == "N/A" and parse_rewrite("  n/a.\n") == "N/A"
    assert parse_rewrite("N/A\nThe question compares the options.") == "N/A"
    assert parse_rewrite("<question>N/A</question><answer>N/A</answer>") == "N/A"
    as_json = parse_rewrite('```json\n{"question": "What is 2 + 2?", "answer": 4}\n```')
    assert as_json == Rewrite("What is 2 + 2?", "4")
    assert parse_rewrite("<think>Hmm.</think>" + GOOD_REWRITE).answer == "\\frac{3}{4}"
    assert parse_rewrite("").startswith("parse: empty")
    assert parse_rewrite("Sure! Here is the question: what is the chance of red?").startswith("parse: no <question>")
    assert parse_rewrite("<question>What is the chance of red?</question>").startswith("parse: no <answer>")


def test_parse_verdict_on_realistic_replies():
    assert parse_verdict('{"verdict": "PASS", "reason": "Same answer, self-contained."}') == (True, "Same answer, self-contained.")
    assert parse_verdict('```json\n{"verdict": "fail", "reason": "Reveals the answer."}\n```')[0] is False
    assert parse_verdict("Verdict: PASS\nThe rewrite keeps every quantity.")[0] is True
    assert parse_verdict("FAIL - the answer changed")[0] is False
    for bad, reason in [("Looks fine to me.", "no verdict"), ("Verdict: PASS ... on reflection, verdict: FAIL", "contradictory")]:
        with pytest.raises(LLMWriterError, match=reason):
            parse_verdict(bad)


def test_review_reformulation_keeps_only_same_answer_rewrites_the_judge_passes():
    judge_pass = _reply('{"verdict": "PASS", "reason": "ok"}')
    kept = review_reformulation(ROW, {"rewrite": _reply(GOOD_REWRITE), "judge": judge_pass}, stem_reason)
    assert isinstance(kept, Rewrite) and kept.question.startswith("A bag holds")
    decimal = GOOD_REWRITE.replace("\\frac{3}{4}</answer>", "0.75</answer>")
    assert isinstance(review_reformulation(ROW, {"rewrite": _reply(decimal), "judge": judge_pass}, stem_reason), Rewrite)
    changed = GOOD_REWRITE.replace("\\frac{3}{4}</answer>", "\\frac{1}{4}</answer>")
    cases = {
        "reformulate_na": {"rewrite": _reply("N/A")},
        "reformulate_answer_changed": {"rewrite": _reply(changed), "judge": judge_pass},
        "reformulate_depends_on_options": {"rewrite": _reply(
            "<question>Which of the following is the probability of red?</question><answer>3/4</answer>"), "judge": judge_pass},
        "reformulate_judge": {"rewrite": _reply(GOOD_REWRITE), "judge": _reply('{"verdict": "FAIL", "reason": "hint"}')},
        "reformulate_parse": {"rewrite": _reply("ĠtheĠofĊ")},
        "reformulate_request": {"rewrite": {"error": "InferenceError: timeout"}},
    }
    for code, result in cases.items():
        verdict = review_reformulation(ROW, result, stem_reason)
        assert isinstance(verdict, str) and verdict.split(":")[0] == code, (code, verdict)
    unreadable = review_reformulation(ROW, {"rewrite": _reply(GOOD_REWRITE), "judge": _reply("Looks fine.")}, stem_reason)
    assert unreadable.startswith("reformulate_judge: unreadable verdict")


@needs_serve
def test_mcqa_reformulate_with_a_random_model_rejects_every_rewrite(tiny_model, tmp_path, shared_data):
    from curate.builders.jobs import McqaJob
    from curate.builders.mcqa import run_mcqa
    from curate.options import ServerFields
    from curate.pipelines.cleaning import Cleaning

    job = McqaJob(inputs=[str(shared_data / "aqua" / "dev.json")], output=tmp_path / "llm", limit=5, reformulate=True,
                  model=str(tiny_model), server=ServerFields(backend="transformers", device="cpu"), max_tokens=8,
                  cleaning=Cleaning())
    result = run_mcqa(job, progress=False)
    assert result.kept == 0 and result.rejected == 5
    # The rules keep some of these five items; the random model's rewrites lose every one of them.
    reformulate_reasons = {k: v for k, v in result.by_reason.items() if k.startswith("reformulate_")}
    assert sum(reformulate_reasons.values()) >= 1
    assert result.by_source["aqua/dev"]["kept"] == 0
    rejects = [json.loads(line) for line in (tmp_path / "llm" / "rejects" / "rejects.jsonl").read_text().splitlines()]
    assert len(rejects) == 5 and len({r["id"] for r in rejects}) == 5
    table = pq.read_table(tmp_path / "llm" / "data" / "train-00000.parquet")
    assert table.num_rows == 0 and {"rule_question", "reformulated_by"} <= set(table.schema.names)
    card = (tmp_path / "llm" / "README.md").read_text()
    assert "LLM reformulation" in card and "reformulate_" in card
    parameters = json.loads((tmp_path / "llm" / ".curate" / "parameters.json").read_text())
    assert parameters["reformulate"]["prompt_version"].startswith("reformulate_v1-")


# --------------------------------------------------------------------------------------------- #
# curate tag --classifier llm
# --------------------------------------------------------------------------------------------- #
def test_tag_classifier_llm_needs_a_model(tmp_path):
    from typer.testing import CliRunner

    from curate.cli import app

    result = CliRunner().invoke(app, ["tag", "--classifier", "llm", "--output", str(tmp_path / "tags")])
    assert result.exit_code == 2 and "--model" in result.output
    result = CliRunner().invoke(app, ["tag", "--model", "m", "--output", str(tmp_path / "tags")])
    assert result.exit_code == 2 and "--classifier llm" in result.output


@needs_serve
def test_tag_classifier_llm_routes_to_llm_tagging(tiny_model, tmp_path):
    from typer.testing import CliRunner

    from curate.cli import app

    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"id": f"doc-{i}", "text": f"We check that {i} + 1 = {i + 1}.\nSo it works."}) + "\n"
                              for i in range(2)))
    result = CliRunner().invoke(app, ["tag", "--classifier", "llm", "--model", str(tiny_model), "--backend", "transformers",
                                      "--device", "cpu", "--mode", "joint", "--max-doc-tokens", "32",
                                      "--input", str(corpus), "--output", str(tmp_path / "tags")])
    assert result.exit_code == 0, result.output
    rows = [r for f in sorted((tmp_path / "tags" / "llm_v1").glob("attributes_*.parquet")) for r in pq.read_table(f).to_pylist()]
    assert sorted(r["id"] for r in rows) == ["doc-0", "doc-1"]
    assert all(r["classifier"] == "llm_v1" and r["llm_answers"] for r in rows)
    # A random model's answers are null with a parse error, never a fabricated 0.
    for row in rows:
        assert row["error"] is None or row["error"].startswith("parse: ")


# --------------------------------------------------------------------------------------------- #
# The writers' job: curate.pipelines.llm.job's rule for a folder that holds a run
# --------------------------------------------------------------------------------------------- #
def test_a_writer_job_resumes_refuses_another_config_and_overwrite_starts_over(tmp_path):
    workdir = tmp_path / "job"
    requests = {f"{i:06d}": {"messages": [{"role": "user", "content": f"Reach {20 + i} with 3, 5, 7."}],
                             "max_tokens": 8, "temperature": 0.7} for i in range(3)}
    with FaultServer({}, seed=0) as server:  # a stand-in endpoint that answers every request and counts them
        options = LLMOptions(model="stand-in", backend="endpoint", endpoint_url=server.url, max_tokens=8)
        first = run_generation(requests, single_rollout, options, workdir, "teacher traces", progress=False)
        assert set(first) == set(requests) and server.outcomes["ok"] == 3
        assert all(r["text"] == '{"count": 1}' and r["finish_reason"] == "stop" for r in first.values())
        results = {p: p.stat().st_mtime_ns for p in (workdir / "results").glob("*.jsonl")}

        # The same job again: read back, no request sent, nothing rewritten.
        assert run_generation(requests, single_rollout, options, workdir, "teacher traces", progress=False) == first
        assert server.outcomes["ok"] == 3
        assert {p: p.stat().st_mtime_ns for p in (workdir / "results").glob("*.jsonl")} == results

        # Another sampling setting, or other requests, in the same folder: refused with the fix, nothing removed.
        greedy = dataclasses.replace(options, temperature=0.0)
        with pytest.raises(JobConfigChangedError, match=r"temperature: 0.7 -> 0.0.*pass --overwrite"):
            run_generation(requests, single_rollout, greedy, workdir, "teacher traces", progress=False)
        fewer = dict(list(requests.items())[:2])
        with pytest.raises(JobConfigChangedError, match=r"documents: 3 -> 2; requests: "):
            run_generation(fewer, single_rollout, options, workdir, "teacher traces", progress=False)
        assert server.outcomes["ok"] == 3 and set(results) == set((workdir / "results").glob("*.jsonl"))

        # --overwrite: the old run is removed and the new one sends every request.
        again = run_generation(fewer, single_rollout, greedy, workdir, "teacher traces", progress=False, overwrite=True)
        assert set(again) == set(fewer) and server.outcomes["ok"] == 5
    record = json.loads((workdir / "job.json").read_text())
    assert (record["temperature"], record["documents"]) == (0.0, 2)

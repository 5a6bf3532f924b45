"""On-policy verifier audit (issue 24, part 4): the strict judge against math-verify called directly, the LLM judge's
tolerant parsing, how the reference label is chosen, and `curate audit-verifier --policy` end to end on a tiny random
chat model served by `transformers serve` (sampling and the LLM judge through the same job runner)."""

from __future__ import annotations

import json
import logging

import pytest
from typer.testing import CliRunner

from curate.cli import app
from curate.cli.groups import judge_server
from curate.handoff.onpolicy_audit import judge_options, labeled_pairs, llm_judge, parse_judge_verdict, strict_verdict
from curate.handoff.passrate import SamplingOptions
from curate.pipelines.llm.job import JobConfigChangedError
from tests.support.fault_server import FaultServer
from tests.support.shared import HAS_SERVE

needs_serve = pytest.mark.skipif(not HAS_SERVE, reason="transformers[serving] not installed (pip install 'curate[serve]')")

PROBLEMS = [
    {"pid": "p1", "q": "What is 1/2 + 1/4?", "gold": "\\frac{3}{4}"},
    {"pid": "p2", "q": "How many primes are below 10?", "gold": "4"},
    {"pid": "p3", "q": "Name the interval where x^2 < 4.", "gold": "(-2, 2)"},
]


def last_box(text: str) -> str | None:
    """The last \\boxed{...} with balanced braces, found here without curate's extractor."""
    start = text.rfind("\\boxed{")
    if start < 0:
        return None
    depth, i = 0, start + len("\\boxed")
    for j in range(i, len(text)):
        depth += {"{": 1, "}": -1}.get(text[j], 0)
        if depth == 0:
            return text[i + 1:j]
    return None


def math_verify_directly(text: str | None, gold: str) -> bool:
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify

    logging.getLogger("math_verify").setLevel(logging.ERROR)
    answer = last_box(text or "")
    if answer is None or not answer.strip():
        return False
    config = [LatexExtractionConfig(boxed_match_priority=0), ExprExtractionConfig()]
    parsed = parse("\\boxed{" + answer.strip() + "}", extraction_config=config)
    return bool(parsed) and bool(verify(parse("\\boxed{" + gold + "}", extraction_config=config), parsed, strict=True))


@pytest.mark.parametrize(("text", "gold"), [
    ("So the sum is \\boxed{3/4}.", "\\frac{3}{4}"),
    ("First \\boxed{1}; wait, that is wrong: \\boxed{0.75}", "\\frac{3}{4}"),  # the last box is the answer
    ("\\boxed{0.75} no, actually \\boxed{1}", "\\frac{3}{4}"),
    ("The answer is 4.", "4"),  # unmarked: the strict judge needs the box the prompt asked for
    ("\\boxed{(-2, 2)}", "(-2, 2)"),
    ("\\boxed{[-2, 2]}", "(-2, 2)"),
    ("\\boxed{[-2, 5]}", "[-2, 5]"),  # an interval gold is an interval, as the rewards read it, not a list's last item
    ("\\boxed{\\pm 8}", "\\pm 8"),
    ("\\boxed{x = 4}", "4"),
])
def test_strict_judge_is_math_verify_on_the_last_box(text, gold):
    assert strict_verdict(text, gold)["verdict"] is math_verify_directly(text, gold)


def test_strict_judge_without_gold_is_undecided():
    assert strict_verdict("\\boxed{1}", "")["verdict"] is None
    assert strict_verdict("\\boxed{1}", ["3", "5"])["answer"] == "1"  # a multihop list: its last hop is the gold


@pytest.mark.parametrize(("output", "verdict"), [
    ('{"correct": true}', True),
    ('<think>it says {"correct": true}</think>\n{"correct": false}', False),
    ('```json\n{"correct": "yes"}\n```', True),
    ("The final answer matches.\nVerdict: correct", True),
    ("incorrect", False),
    ('{"correct": maybe}', None),
    ("I think it is probably correct but not sure", None),
    ("", None),
    ("__import__('os').system('true')", None),  # read as text, never evaluated
])
def test_judge_verdict_is_parsed_tolerantly_and_never_guessed(output, verdict):
    value, error = parse_judge_verdict(output)
    assert value is verdict
    assert (error is None) == (verdict is not None)


def test_reference_label_strict_llm_and_agree():
    records = [{"id": f"0:{i}#0", "key": f"0:{i}", "gold": "1", "text": t, "error": e}
               for i, (t, e) in enumerate([("\\boxed{1}", None), ("\\boxed{2}", None), ("x", None), (None, "timeout")])]
    strict = [{"id": r["id"], "verdict": v, "reason": None} for r, v in zip(records, [True, False, None, None])]
    judged = [{"id": r["id"], "verdict": v, "error": None} for r, v in zip(records, [True, True, False, None])]
    by_strict = labeled_pairs(records, strict, judged, "strict")
    assert [(p.id, p.equivalent) for p in by_strict.pairs] == [("0:0#0", True), ("0:1#0", False)]
    assert len(by_strict.pairs) + len(by_strict.rejects) == len(records)
    assert [p.equivalent for p in labeled_pairs(records, strict, judged, "llm").pairs] == [True, True, False]
    agree = labeled_pairs(records, strict, judged, "agree")
    assert [p.id for p in agree.pairs] == ["0:0#0"]
    assert {r["reason"] for r in agree.rejects} >= {"the judges disagree"}
    assert agree.reference["agreement"] == {"both_decided": 2, "agree": 1, "disagree": 1, "rate": 0.5}
    with pytest.raises(ValueError, match="judge-model"):
        labeled_pairs(records, strict, None, "agree")


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    from tests.support.tiny_model import make_tiny_chat_model

    return make_tiny_chat_model(tmp_path_factory.mktemp("tiny") / "model")


@needs_serve
def test_onpolicy_audit_end_to_end_through_transformers_serve(tiny_model, tmp_path):
    problems = tmp_path / "problems.jsonl"
    problems.write_text("".join(json.dumps(p) + "\n" for p in PROBLEMS))
    out, report_path = tmp_path / "audit", tmp_path / "audit" / "report.json"
    argv = ["audit-verifier", "--policy", str(tiny_model), "--problems", str(problems), "--question-key", "q",
            "--answer-key", "gold", "--id-key", "pid", "--k", "2", "--max-tokens", "8", "--device", "cpu",
            "--judge-model", str(tiny_model), "--judge-max-tokens", "8", "--reward", "math",
            "--reward", "mathverify-plain", "--bootstrap", "200", "-o", str(out), "--show", "0"]
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 0, result.output
    report = json.loads(report_path.read_text())
    responses = [json.loads(line) for line in (out / "responses.jsonl").read_text().splitlines()]
    assert len(responses) == len(PROBLEMS) * 2 == report["samples"] and report["k"] == 2 and report["problems"] == 3
    # Every response is either an audited pair or left out with its reason: problems × k in all.
    assert report["pairs"] + report["rejected"] == len(PROBLEMS) * 2
    gold = {p["pid"]: p["gold"] for p in PROBLEMS}
    assert {r["row_id"] for r in responses} == set(gold)
    strict = {v["id"]: v for v in map(json.loads, (out / "judges" / "strict-v1.jsonl").read_text().splitlines())}
    for response in responses:
        # The reference label is what math-verify says on exactly this response.
        assert strict[response["id"]]["verdict"] is math_verify_directly(response["text"], gold[response["row_id"]])
    labels = [strict[r["id"]]["verdict"] for r in responses if r["error"] is None]
    assert report["positives"] == sum(v is True for v in labels) and report["negatives"] == sum(v is False for v in labels)
    for name in ("curate/math", "curate/mathverify-plain"):
        figures = report["rewards"][name]
        assert figures["overall"]["n"] == report["pairs"]
        assert sum(figures["overall"][c] for c in ("tp", "fp", "fn", "tn")) == report["pairs"]
        for behavior in figures["by_behavior"].values():
            assert behavior["present"]["n"] + behavior["absent"]["n"] + behavior["unlabelled"] == report["pairs"]
        assert sum(figures["by_length"][q]["n"] for q in ("Q1", "Q2", "Q3", "Q4")) == report["pairs"]
    # The LLM judge answered every response it was sent, its verdict read from its own output.
    judge_files = sorted((out / "judges").glob("judge_v1-*.jsonl"))
    assert len(judge_files) == 1
    verdicts = [json.loads(line) for line in judge_files[0].read_text().splitlines()]
    assert [v["id"] for v in verdicts] == [r["id"] for r in responses]
    for verdict in verdicts:
        if verdict["output"] is not None:
            assert (verdict["verdict"], verdict["error"]) == parse_judge_verdict(verdict["output"])
    assert report["reference"]["label"] == "strict" and "agreement" in report["reference"]
    assert not list(out.rglob("*.partial"))

    # The rerun reads the samples and verdicts: no file is rewritten, no server is started.
    kept = {p: p.stat().st_mtime_ns for p in [out / "responses.jsonl", *(out / "judges").glob("*.jsonl")]}
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 0, result.output
    assert "reused from" in result.output
    assert {p: p.stat().st_mtime_ns for p in kept} == kept


def test_the_llm_judge_resumes_refuses_another_config_and_overwrite_judges_again(tmp_path):
    out = tmp_path / "audit"
    records = [{"id": f"0:{i}#0", "key": f"0:{i}", "question": p["q"], "gold": p["gold"], "error": None,
                "text": f"So the answer is \\boxed{{{p['gold']}}}."} for i, p in enumerate(PROBLEMS)]
    records.append({**records[0], "id": "0:0#1", "text": "  "})  # empty: judged incorrect without a request
    out.mkdir()
    (out / "responses.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    with FaultServer({}, seed=0) as server:  # a stand-in endpoint: answers every request, counts them
        policy = SamplingOptions(model="policy", backend="endpoint", endpoint_url=server.url, k=2)
        # The judge takes the policy's server settings, its own model, greedy; it could name another backend.
        judge = judge_options(policy, judge_server(policy, "stand-in-judge"), max_tokens=16)
        assert (judge.endpoint_url, judge.temperature, judge.k, judge.model) == (server.url, 0.0, 1, "stand-in-judge")
        assert judge_server(policy, "j", backend="vllm").endpoint_url is None
        verdicts, name = llm_judge(records, out, judge, progress=False)
        assert server.outcomes["ok"] == 3 and [v["id"] for v in verdicts] == [r["id"] for r in records]
        # The stand-in's answer holds no verdict: an error with its reason, never a guess; the empty one is False.
        assert [v["verdict"] for v in verdicts] == [None, None, None, False]
        assert all(v["error"].startswith("no verdict") for v in verdicts[:3])

        assert llm_judge(records, out, judge, progress=False) == (verdicts, name)  # the same: read back
        assert server.outcomes["ok"] == 3
        with pytest.raises(JobConfigChangedError, match=r"max_tokens: 16 -> 64.*pass --overwrite to judge again"):
            llm_judge(records, out, judge_options(policy, judge_server(policy, "stand-in-judge"), 64), progress=False)
        resampled = [{**r, "text": "\\boxed{1}"} for r in records]  # same ids, other responses
        with pytest.raises(JobConfigChangedError, match=r"responses: "):
            llm_judge(resampled, out, judge, progress=False)
        assert server.outcomes["ok"] == 3
        (out / "responses.jsonl").write_text("".join(json.dumps(r) + "\n" for r in resampled))  # as sampling does
        again, _ = llm_judge(resampled, out, judge, progress=False, overwrite=True)
        assert server.outcomes["ok"] == 7 and [v["verdict"] for v in again] == [None] * 4

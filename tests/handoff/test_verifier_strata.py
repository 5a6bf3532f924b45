"""Verifier audit by behavior and length: constructed pairs whose true per-stratum precision and recall are known,
the bootstrap (seeded, group-resampled), the report layout, the pair sources (any table, and the real GSM8K,
Sky-T1 and PRM800K files), the baseline rewards, and the command end to end."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from curate.behaviors import BEHAVIOR_NAMES
from curate.classifiers import get_classifier
from curate.cli import app
from curate.handoff.behavior_audit import Bootstrap, audit_report, plot_report, run_stratified_audit, stratified
from curate.handoff.pair_sources import Columns, PairSourceError, read_pair_source
from curate.handoff.verifier_audit import Pair, json_lines
from curate.rewards import DEFAULT, get_reward, registered_rewards

CHECK = "Adding the numbers gives {a} + 4 = {s}. Let me double-check: {s} - 4 = {a}, which matches. "
PLAIN = "Adding the numbers gives {a} + 4 = {s}. "
CELLS = ("n", "tp", "fp", "fn", "tn", "precision", "recall", "ci_low", "ci_high")


def constructed_pairs() -> list[Pair]:
    """boxed-exact verdicts fixed by construction. With verification: 10 correct responses, 6 boxed (TP) and 4 not
    (FN), 5 wrong ones of which 1 boxes the gold (FP). Without: 10 correct, 9 TP and 1 FN, 5 wrong, 0 FP."""
    pairs = []

    def add(template, correct, boxed_gold, n):
        for _ in range(n):
            i = len(pairs)
            a = 10 + i
            gold = str(a + 4)
            body = template.format(a=a, s=a + 4)
            if correct:
                end = f"The answer is \\boxed{{{gold}}}." if boxed_gold else f"The answer is {gold}."
            else:
                end = f"The answer is \\boxed{{{gold}}}." if boxed_gold else f"The answer is \\boxed{{{a + 5}}}."
            pairs.append(Pair(f"p{i}", gold, body + end, correct, "integer", DEFAULT))

    add(CHECK, True, True, 6)
    add(CHECK, True, False, 4)
    add(CHECK, False, True, 1)
    add(CHECK, False, False, 4)
    add(PLAIN, True, True, 9)
    add(PLAIN, True, False, 1)
    add(PLAIN, False, False, 5)
    return pairs


@pytest.fixture(scope="module")
def audit():
    pairs = constructed_pairs()
    # The strata are what the registry's classifier says; these texts were written so that it says exactly this.
    labels = get_classifier("cues").classify([p.candidate for p in pairs])
    assert [bool(x.counts["verification"]) for x in labels] == [True] * 15 + [False] * 15
    assert all(not x.counts[b] for x in labels for b in BEHAVIOR_NAMES if b != "verification")
    return run_stratified_audit(pairs, ["boxed-exact"], classifier="cues", resamples=1000, seed=3, progress=False)


def test_per_behavior_figures_equal_the_constructed_truth(audit):
    report = audit.report
    assert report["reward"] == "curate/boxed-exact" and report["classifier"] == get_classifier("cues").name
    verification = report["by_behavior"]["verification"]
    present, absent = verification["present"], verification["absent"]
    assert {k: present[k] for k in ("n", "tp", "fp", "fn", "tn")} == {"n": 15, "tp": 6, "fp": 1, "fn": 4, "tn": 4}
    assert {k: absent[k] for k in ("n", "tp", "fp", "fn", "tn")} == {"n": 15, "tp": 9, "fp": 0, "fn": 1, "tn": 5}
    assert present["recall"] == pytest.approx(0.6) and absent["recall"] == pytest.approx(0.9)
    assert present["precision"] == pytest.approx(6 / 7) and absent["precision"] == 1.0
    # The four misses say "The answer is 14." without a box: marked in the source's format, misjudged by the reward.
    assert present["correct_without_marked_answer"] == 0
    for stratum in (present, absent):
        assert set(CELLS) <= set(stratum)
        assert 0 <= stratum["ci_low"] <= stratum["recall"] <= stratum["ci_high"] <= 1
        assert stratum["precision_ci_low"] <= stratum["precision"] <= stratum["precision_ci_high"]
    difference = verification["difference"]["recall"]
    assert difference["value"] == pytest.approx(-0.3)
    assert difference["ci_low"] <= -0.3 <= difference["ci_high"]
    assert difference["excludes_zero"] == (difference["ci_high"] < 0 or difference["ci_low"] > 0)
    # A behavior no response shows: everything is in "absent", "present" has nothing to measure.
    backtracking = report["by_behavior"]["backtracking"]
    assert backtracking["present"]["n"] == 0 and backtracking["present"]["recall"] is None
    assert backtracking["present"]["ci_low"] is None and backtracking["difference"]["recall"]["excludes_zero"] is None
    assert backtracking["absent"]["recall"] == pytest.approx(15 / 20)
    assert report["overall"]["recall"] == pytest.approx(15 / 20) and report["behavior_prevalence"]["verification"] == 0.5
    assert report["rewards"]["curate/boxed-exact"]["by_behavior"] == report["by_behavior"]


def test_bootstrap_is_seeded_and_reproducible(audit):
    pairs = constructed_pairs()
    verdicts = {"curate/boxed-exact": [v.verdict for v in audit.results["curate/boxed-exact"].verdicts]}
    again = audit_report(pairs, verdicts, audit.tags, resamples=1000, seed=3)
    assert json.dumps(again["by_behavior"], sort_keys=True) == json.dumps(audit.report["by_behavior"], sort_keys=True)
    other = audit_report(pairs, verdicts, audit.tags, resamples=1000, seed=4)
    assert other["by_behavior"]["verification"]["present"]["recall"] == 0.6
    assert (other["by_behavior"]["verification"]["present"]["ci_low"],
            other["by_behavior"]["verification"]["difference"]["recall"]["ci_low"]) != (
            audit.report["by_behavior"]["verification"]["present"]["ci_low"],
            audit.report["by_behavior"]["verification"]["difference"]["recall"]["ci_low"])
    with pytest.raises(ValueError, match="at least 100"):
        Bootstrap(["a"], resamples=10)


def test_length_quartiles_with_known_recall():
    # 40 correct responses, 10 per length quartile; the reward misses 0, 1, 2 and 5 of them, longest last.
    misses = {0: 0, 1: 1, 2: 2, 3: 5}
    pairs, verdicts = [], []
    for q in range(4):
        for j in range(10):
            pairs.append(Pair(f"q{q}-{j}", "1", "x" * (100 * (q + 1) + j), True, "integer"))
            verdicts.append(j >= misses[q])
    report = audit_report(pairs, {"r": verdicts}, None, resamples=1000, seed=0)
    by_length = report["by_length"]
    assert [by_length[q]["recall"] for q in ("Q1", "Q2", "Q3", "Q4")] == pytest.approx([1.0, 0.9, 0.8, 0.5])
    assert [by_length[q]["n"] for q in ("Q1", "Q2", "Q3", "Q4")] == [10, 10, 10, 10]
    assert by_length["Q1"]["chars_max"] < by_length["Q2"]["chars_min"] and by_length["Q4"]["chars_max"] == 409
    difference = by_length["difference_q4_q1"]["recall"]
    assert difference["value"] == pytest.approx(-0.5) and difference["excludes_zero"] is True
    assert "by_behavior" not in report and report["classifier"] is None
    assert by_length["Q1"]["precision"] == 1.0 and by_length["Q1"]["ci_low"] == by_length["Q1"]["ci_high"] == 1.0


def test_groups_are_resampled_together():
    """Four responses per problem with one verdict per problem: treating them as independent narrows the interval;
    resampling problems does not."""
    verdicts = [i % 3 != 0 for i in range(30) for _ in range(4)]
    labels = [True] * 120
    grouped = Bootstrap([f"g{i}" for i in range(30) for _ in range(4)], 2000, seed=1)
    single = Bootstrap([f"p{i}" for i in range(120)], 2000, seed=1)
    (g,), _, _ = stratified(verdicts, labels, [0] * 120, 1, grouped)
    (s,), _, _ = stratified(verdicts, labels, [0] * 120, 1, single)
    assert g["recall"] == s["recall"] == pytest.approx(20 / 30)
    assert (g["ci_high"] - g["ci_low"]) > 1.5 * (s["ci_high"] - s["ci_low"])
    assert grouped.groups == 30 and single.groups == 120


def test_report_plot_is_written(audit, tmp_path):
    path = plot_report(audit.report, tmp_path / "audit.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and not list(tmp_path.glob("*.partial*"))


def test_baseline_rewards():
    assert {"curate/mathverify-plain", "curate/boxed-exact", "curate/last-number"} <= set(registered_rewards())
    boxed, last, plain = get_reward("boxed-exact"), get_reward("last-number"), get_reward("mathverify-plain")
    assert boxed.score("first \\boxed{3}, then \\boxed{ \\dfrac{1}{2} }", "\\frac{1}{2}") == 1.0
    assert boxed.score("\\boxed{0.5}", "\\frac{1}{2}") == 0.0  # text equality, not math: the baseline's weakness
    assert boxed.score("no box: 7", "7") == 0.0 and boxed.score("\\boxed{7}", "") is None
    assert last.score("We get 1,234 apples, so 1,234.", "1234") == 1.0 and last.score("so 12 then 13", "12") == 0.0
    assert last.score("x = 1/2", "\\frac{1}{2}") is None  # a non-numeric gold cannot be scored this way
    assert last.score("it is 18.\nA: 18", {"answer": "18"}) == 1.0
    assert plain.score("Thus the answer is $\\frac{1}{2}$.", "0.5") == 1.0
    assert plain.score("Thus the answer is $3$.", "4") == 0.0


def test_table_sources_with_column_options_and_rejects(tmp_path):
    rows = [
        {"qid": "a", "out": "so \\boxed{3}", "ans": "3", "ok": 1},
        {"qid": "a", "out": "so \\boxed{4}", "ans": "3", "ok": "false"},
        {"qid": "b", "out": "so \\boxed{5}", "ans": "5", "ok": "maybe"},
        {"qid": "c", "ans": "5", "ok": True},
    ]
    path = tmp_path / "mine.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n{broken\n")
    columns = Columns(response="out", gold="ans", label="ok", group="qid")
    result = read_pair_source([path], "auto", columns)
    assert result.format == "table" and [p.equivalent for p in result.pairs] == [True, False]
    assert [p.group for p in result.pairs] == ["a", "a"] and result.pairs[0].id == "mine/1"
    reasons = [r["reason"] for r in result.rejects]
    assert "is not a true/false label" in reasons[0] and "missing column(s) out" in reasons[1]
    assert "--response-key" in reasons[1] and reasons[2] == "not JSON" and result.rejects[2]["line"] == 5
    parquet = tmp_path / "mine.parquet"
    pq.write_table(pa.Table.from_pylist([{"response": "\\boxed{2}", "gold": "2", "label": True, "id": "x"}] * 2), parquet)
    again = read_pair_source([parquet], "table", Columns(id="id"))
    assert [p.id for p in again.pairs] == ["x"] and again.rejects[0]["reason"] == "duplicate id x"
    hand_built = Path(__file__).resolve().parents[2] / "evals" / "verifier_pairs" / "pairs.jsonl"
    with pytest.raises(PairSourceError, match="different formats"):
        read_pair_source([path, hand_built], "auto")
    with pytest.raises(PairSourceError, match="does not exist"):
        read_pair_source([tmp_path / "missing.jsonl"])


def test_real_gsm8k_solutions_reader(shared_data):
    result = read_pair_source([shared_data / "gsm8k" / "example_model_solutions.jsonl"])
    rows = [json.loads(line) for line in (shared_data / "gsm8k" / "example_model_solutions.jsonl").open()]
    assert result.format == "gsm8k" and not result.rejects and len(result.pairs) == 4 * len(rows)
    keys = ("175b_finetuning", "175b_verification", "6b_finetuning", "6b_verification")
    assert sum(p.equivalent for p in result.pairs) == sum(r[k]["is_correct"] for r in rows for k in keys)
    assert len({p.group for p in result.pairs}) == len(rows)
    first = result.pairs[:4]
    assert {p.gold for p in first} == {rows[0]["ground_truth"].rsplit("A:", 1)[-1].strip()}
    math = get_reward("math")
    # The answer is the solution's final "A: N" line, read with the pair's own extraction.
    assert [math.score(p.candidate, p.gold, None, p.extraction) == 1.0 for p in first] == [
        rows[0][k]["is_correct"] for k in keys]


def test_real_skythought_and_prm800k_readers(shared_data):
    folder = shared_data / "longcot_skythought"
    files = sorted(folder.glob("*.jsonl"))
    result = read_pair_source(files)
    rows = [json.loads(line) for f in files for line in f.open()]
    assert result.format == "skythought" and len(result.pairs) + len(result.rejects) == len(rows) == 570
    assert all(r["reason"].startswith("empty gt") for r in result.rejects)
    kept = [r for r in rows if str(r["gt"]).strip()]
    assert [p.equivalent for p in result.pairs] == [bool(r["score"][0]) for r in kept]
    assert all(p.candidate.startswith("<|begin_of_thought|>") or p.candidate for p in result.pairs)
    prm = read_pair_source([shared_data / "prm800k" / "phase1_test.stepwise-critic.parquet"])
    solutions = pq.read_table(shared_data / "prm800k" / "phase1_test.stepwise-critic.parquet").to_pylist()
    assert prm.format == "prm800k" and len(prm.pairs) == sum(bool(r["is_solution"]) for r in solutions)
    assert all(p.equivalent for p in prm.pairs)  # positives only: recall is measurable, precision is not


def test_command_writes_the_report_plot_and_rejects(tmp_path):
    pairs = constructed_pairs()
    path = tmp_path / "pairs.jsonl"
    lines = [json.dumps({"id": p.id, "response": p.candidate, "gold": p.gold, "label": p.equivalent,
                         "problem": p.id[:2]}) for p in pairs]
    path.write_text("\n".join(lines) + "\n" + json.dumps({"id": "bad", "gold": "1", "label": True}) + "\n")
    report = tmp_path / "out" / "audit.json"
    result = CliRunner().invoke(app, [
        "audit-verifier", "--pairs", str(path), "--id-key", "id", "--group-key", "problem", "--by-behavior", "cues",
        "--reward", "boxed-exact", "--reward", "last-number", "--report", str(report), "--bootstrap", "500",
        "--show", "0"])
    assert result.exit_code == 0, result.output
    figures = json.loads(report.read_text())
    assert list(figures["rewards"]) == ["curate/boxed-exact", "curate/last-number"]
    assert figures["by_behavior"]["verification"]["present"]["recall"] == pytest.approx(0.6)
    assert figures["rewards"]["curate/last-number"]["by_behavior"]["verification"]["present"]["tp"] == 10
    assert set(figures["by_length"]) >= {"Q1", "Q2", "Q3", "Q4", "difference_q4_q1", "edges_chars"}
    assert figures["bootstrap"] == {"resamples": 500, "seed": 0, "unit": "group", "groups": 10,
                                    "interval": "percentile 95 %"}
    assert figures["rejected"] == 1 and (tmp_path / "out" / "audit.png").is_file()
    assert "missing column(s) response" in (tmp_path / "out" / "audit.rejects.jsonl").read_text()
    assert "WARNING" in result.output  # boxed-exact misses 5 of 20 correct answers
    bad = CliRunner().invoke(app, ["audit-verifier", "--pairs", str(path), "--by-behavior", "nope"])
    assert bad.exit_code != 0 and "unknown classifier" in bad.output


def test_json_lines_numbers_every_line_and_hands_a_bad_one_back(tmp_path):
    path = tmp_path / "mixed.jsonl"
    path.write_text('{"a": 1}\n\n   \nnot json\n[2]\n"text"\n', encoding="utf-8")
    read = list(json_lines(path))
    assert [(number, line) for number, line, _ in read] == [(1, '{"a": 1}'), (4, "not json"), (5, "[2]"), (6, '"text"')]
    values = [value for _, _, value in read]
    assert values[0] == {"a": 1} and values[2:] == [[2], "text"]
    assert isinstance(values[1], json.JSONDecodeError)

import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from curate.handoff.verifier_audit import Metrics, answer_type, read_pairs, run_audit, write_verdicts
from curate.rewards import BARE, Extraction, compute_score, extract_answer, get_reward, score, trl_reward
from curate.rewards.equivalence import MathEquivalence
from curate.rewards.registry import UnknownRewardError

PAIRS = Path(__file__).resolve().parents[2] / "evals" / "verifier_pairs" / "pairs.jsonl"


@pytest.mark.parametrize(
    "text, expected",
    [
        ("so x = 2, then \\boxed{\\frac{1}{2}} and finally \\boxed{\\frac{3}{4}}.", "\\frac{3}{4}"),
        ("<answer> 5 </answer>", "5"),
        ("The answer is $\\frac{1}{2}$.", "\\frac{1}{2}"),
        ("**Final Answer:** \\boxed{\\{1, 2\\}}", "\\{1, 2\\}"),
        ("Thus the answer is \\boxed{42}. Wait, no: the answer is 43", "42"),
        ("no answer here", None),
    ],
)
def test_extraction(text, expected):
    assert extract_answer(text) == expected


def test_extraction_is_configurable():
    text = "Step 1 ... #### 18"  # mid-line: not GSM8K's answer line, which a pattern can still read
    assert extract_answer(text) is None
    assert extract_answer(text, Extraction(patterns=(r"####\s*(.+)",))) == "18"
    assert extract_answer("Step 1\n#### 18") == "18"
    assert extract_answer("Step 1\n#### 18", Extraction(markers=("boxed",))) is None
    assert extract_answer("<answer>7</answer> \\boxed{8}", Extraction(markers=("answer_tag",))) == "7"
    assert extract_answer("The area is $351$ units.", BARE) == "351"
    with pytest.raises(ValueError, match="unknown answer marker"):
        Extraction(markers=("smoke_signals",))


@pytest.mark.parametrize(
    "solution, gold, expected",
    [
        ("\\boxed{315}", "\\frac{7!}{16}", 1.0),
        ("\\boxed{-8, 8}", "\\pm 8", 1.0),
        ("\\boxed{8}", "\\pm 8", 0.0),
        ("\\boxed{0 \\le x < 3}", "[0, 3)", 1.0),
        ("\\boxed{(0, 3)}", "[0, 3)", 0.0),
        ("\\boxed{3, 1, 2}", "1, 2, 3", 1.0),
        ("\\boxed{25\\%}", "0.25", 1.0),
        ("\\boxed{137}", "137^\\circ", 1.0),
        ("The answer is 72 clips.", "72", 1.0),
        ("\\boxed{864\\,000}", "864,000", 1.0),
        ("\\boxed{LQSX}", "QXLS", 0.0),
        ("\\boxed{\\text{Tuesday}}", "Tuesday", 1.0),
        ("I give up.", "5", 0.0),
        ("\\boxed{5}", "", None),
    ],
)
def test_math_reward_hand_checked(solution, gold, expected):
    assert score("curate/math", solution, gold) == expected


@pytest.mark.parametrize("solution, gold, expected", [
    # An open answer converted from an MCQA option keeps its value; the unit is asked for in the question, and
    # the reward grades the number whether or not the solver repeats the unit.
    ("\\boxed{9.8}", "9.8", 1.0),
    ("\\boxed{9.8 m/s^2}", "9.8", 1.0),
    ("\\boxed{9.8\\ \\text{m/s}^2}", "9.8", 1.0),
    ("\\boxed{9.8 m/s2}", "9.8", 1.0),
    ("\\boxed{20 cm^3}", "20", 1.0),
    ("\\boxed{20 cm3}", "20", 1.0),
    ("\\boxed{72 km/h}", "72", 1.0),
    ("\\boxed{25}", "25\\%", 1.0),
    ("\\boxed{25\\%}", "25\\%", 1.0),
    ("\\boxed{9.7 m/s^2}", "9.8", 0.0),
    ("\\boxed{2 x^2}", "2", 0.0),  # a variable, not a unit
    # SI prefixes and units of the MMLU physics options, the power spaced as MathQA writes it
    ("\\boxed{1200 m ^ 2}", "1200", 1.0),
    ("\\boxed{50 μN}", "50", 1.0),
    ("\\boxed{50 µN}", "50", 1.0),  # the micro sign, not the Greek letter
    ("\\boxed{7 kΩ}", "7", 1.0),
    ("\\boxed{0.115 M}", "0.115", 1.0),
    ("\\boxed{51 μN}", "50", 0.0),
    ("\\boxed{2 H}", "2", 0.0),  # hydrogen (or henry), not hours: no single-letter unit in upper case but SI's
])
def test_units_are_graded_with_or_without_them(solution, gold, expected):
    assert score("mcqa_open", solution, gold) == expected


@pytest.mark.parametrize("solution, gold, expected", [
    # Digit-group commas inside a larger answer, and the unicode fraction slash (math-verify reads "5⁄3" as 5): each
    # scored 0 against its own value before
    ("\\boxed{1/40,000}", "1 / 40000", 1.0),
    ("\\boxed{3/40,000}", "1 / 40000", 0.0),
    ("\\boxed{(3,034, 3,466)}", "(3034, 3466)", 1.0),
    ("\\boxed{(3,034, 3,467)}", "(3034, 3466)", 0.0),
    ("\\boxed{(1,234)}", "(1, 234)", 1.0),  # read as a pair first
    ("\\boxed{5⁄3}", "\\frac{5}{3}", 1.0),
    ("\\boxed{5⁄4}", "\\frac{5}{3}", 0.0),
])
def test_digit_groups_and_fraction_slash(solution, gold, expected):
    assert score("mcqa_open", solution, gold) == expected


def test_mcqa_multihop_and_countdown():
    assert score("mcqa", "Eliminating B, the answer is (C).", "C") == 1.0
    assert score("mcqa", "\\boxed{B}", "C") == 0.0
    assert score("mcqa", "\\boxed{B}", "not a letter at all") is None
    assert score("multihop", "hop 1: 4, hop 2: \\boxed{16}", ["4", "16"]) == 1.0
    assert score("multihop", "\\boxed{4}", {"final_answer": "16", "hops": ["4", "16"]}) == 0.0
    assert score("mcqa_open", "\\boxed{5(\\sqrt{3}+1)}", "5\\sqrt{3}+5") == 1.0
    truth = {"numbers": [3, 5, 2], "target": 16}
    assert compute_score("curate/countdown", "<answer>(3 + 5) * 2</answer>", truth) == 1.0
    assert compute_score("curate/countdown", "<answer>3 + 5 + 2</answer>", json.dumps(truth)) == 0.0
    with pytest.raises(UnknownRewardError, match="registered"):
        get_reward("curate/poetry")


def test_verl_signature_and_trl_batch():
    assert compute_score("curate/math", "\\boxed{\\frac{1}{2}}", "0.5", extra_info={"index": 0}) == 1.0
    assert compute_score("curate/math", "\\boxed{1}", "") == 0.0  # unscorable: verl needs a number
    reward = trl_reward()
    completions = [[{"role": "assistant", "content": "\\boxed{2}"}], [{"role": "assistant", "content": "\\boxed{3}"}],
                   "<answer>A</answer>", "\\boxed{9}"]
    values = reward(prompts=[None] * 4, completions=completions, solution=["2", "2", "A", ""],
                    data_source=["curate/math", "curate/math", "curate/mcqa", "curate/math"])
    assert values == [1.0, 0.0, 1.0, None]
    assert trl_reward("curate/math")(completions=["\\boxed{4}"], solution=["4"]) == [1.0]


def test_rewards_in_threads_agree_with_serial():
    cases = [("\\boxed{%d/4}" % k, str(k / 4)) for k in range(1, 25)] + [("\\boxed{%d}" % k, "7") for k in range(24)]
    serial = [score("math", s, g) for s, g in cases]
    with ThreadPoolExecutor(8) as pool:
        threaded = list(pool.map(lambda c: score("math", *c), cases))
    assert threaded == serial
    assert serial[:24] == [1.0] * 24 and sum(serial[24:]) == 1.0


def test_time_bound_on_pathological_input():
    checker = MathEquivalence(timeout=1.0, workers=1)
    try:
        checker.warm()
        started = time.perf_counter()
        verdict = checker.equivalent("5", "9^{9^{9^{9^{9}}}}")
        elapsed = time.perf_counter() - started
        assert verdict is None and checker.timeouts == 1
        assert elapsed < 4.0
        # The killed worker is replaced: the next check still works.
        assert checker.equivalent("\\frac{1}{2}", "0.5") is True
    finally:
        checker.close()


def test_pair_set_is_large_and_covers_hard_cases():
    pairs, rejects = read_pairs(PAIRS)
    assert not rejects and len(pairs) >= 200
    kinds = {p.type for p in pairs}
    assert {"factorial", "plus-minus", "equation", "units", "percentage", "interval", "set/tuple"} <= kinds
    assert 0.3 < sum(p.equivalent for p in pairs) / len(pairs) < 0.7


def test_audit_metrics_and_verdicts(tmp_path):
    lines = [
        {"id": "a", "gold": "\\frac{1}{2}", "candidate": "0.5", "equivalent": True},
        {"id": "b", "gold": "\\pm 2", "candidate": "\\boxed{2, -2}", "equivalent": True},
        {"id": "c", "gold": "3", "candidate": "The answer is 4.", "equivalent": False},
        {"id": "d", "gold": "12.5\\%", "candidate": "\\boxed{12.5}", "equivalent": True},
        {"id": "e", "gold": "[0,1]", "candidate": "\\boxed{(0,1)}", "equivalent": False},
    ]
    path = tmp_path / "pairs.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\nnot json\n" + json.dumps({"id": "z", "gold": "1"}) + "\n")
    pairs, rejects = read_pairs(path)
    assert [r["line"] for r in rejects] == [6, 7] and "not JSON" in rejects[0]["reason"]
    result = run_audit(pairs, progress=False, threads=2)
    by_id = {v.id: v.verdict for v in result.verdicts}
    assert by_id["a"] is True and by_id["b"] is True and by_id["c"] is False and by_id["e"] is False
    m = result.overall
    assert (m.tp + m.fn, m.fp + m.tn) == (3, 2)
    assert m.recall == m.tp / 3 and m.precision == 1.0
    assert result.recall_warning == (m.recall < 0.95)
    written = [json.loads(x) for x in write_verdicts(result, tmp_path / "v.jsonl").read_text().splitlines()]
    assert [w["id"] for w in written] == ["a", "b", "c", "d", "e"] and set(written[0]) >= {"id", "verdict"}


def test_metrics_count_undecided_as_misses():
    m = Metrics()
    for verdict, label in [(True, True), (None, True), (False, False), (True, False), (None, False)]:
        m.add(verdict, label)
    assert (m.tp, m.fn, m.fp, m.tn, m.undecided) == (1, 1, 1, 2, 2)
    assert m.recall == 0.5 and m.precision == 0.5 and m.accuracy == 0.6


def test_answer_types():
    assert answer_type("\\pm 8") == "plus-minus"
    assert answer_type("[0, 3)") == "interval"
    assert answer_type("x + y = 1") == "equation"
    assert answer_type("1,234") == "integer"
    assert answer_type("25\\%") == "percentage"


def test_real_labels_gsm8k_agree(shared_data):
    rows = [json.loads(x) for x in (shared_data / "gsm8k" / "example_model_solutions.jsonl").open().readlines()[:15]]
    gsm = Extraction(markers=(), patterns=(r"^A:\s*(.+)$",))
    agree = total = 0
    for row in rows:
        gold = extract_answer(row["ground_truth"], gsm)
        for key in ("6b_finetuning", "175b_verification"):
            verdict = get_reward("math").score(row[key]["solution"], gold, None, gsm)
            agree += (verdict == 1.0) == row[key]["is_correct"]
            total += 1
    assert agree / total >= 0.9


def test_countdown_format_score_is_configurable_and_validated():
    from curate.rewards.registry import countdown_reward_fn, score

    truth = {"numbers": [6, 4, 3], "target": 30}
    right, wrong, broken = "<answer> (6 + 4) * 3 </answer>", "<answer> 6 + 4 + 3 </answer>", "<answer> 6 + 4 </answer>"
    tinyzero = countdown_reward_fn(0.1)  # TinyZero's format score
    assert tinyzero([right, wrong, broken, "no tags"], [truth] * 4) == [1.0, 0.1, 0.0, 0.0]
    assert countdown_reward_fn()([right, wrong], [truth] * 2) == [1.0, 0.0]  # default 0, as before
    assert score("curate/countdown", wrong, truth) == 0.0
    assert score("curate/countdown", wrong, truth, {"format_score": 0.1}) == 0.1  # a verl row can carry it
    for bad in (-0.1, 1.0, "x"):
        with pytest.raises(ValueError, match="format_score"):
            countdown_reward_fn(bad)


def test_same_is_the_mcqa_builders_comparison_under_the_bound():
    from curate.rewards.equivalence import parse_latex, verify_parsed

    checker = MathEquivalence(timeout=10.0, workers=1)
    try:
        assert checker.same("\\frac{3}{4}", "0.75") is True and checker.same("\\frac{3}{4}", "\\frac{1}{4}") is False
        assert checker.same("", "1") is None and checker.same("2", "") is False
        # the worker's verdict is the in-process one the builder compares options with
        assert verify_parsed(parse_latex("25\\%"), parse_latex("0.25")) == checker.same("25\\%", "0.25")
    finally:
        checker.close()


def test_trl_reward_reads_each_rows_format_score_as_grpo_passes_columns():
    """GRPOTrainer._calculate_rewards calls a reward with prompts, completions, completion_ids and every other dataset
    column as a list (one value per completion), plus trainer_state / log_extra / log_metric: a row's format_score
    column, or its verl extra_info, then scores a well-formed wrong equation as it does under verl."""
    from curate.rewards.registry import RewardInputError

    truth = {"numbers": [6, 4, 3], "target": 30}
    right, wrong, broken = "<answer> (6 + 4) * 3 </answer>", "<answer> 6 + 4 + 3 </answer>", "<answer> 6 + 4 </answer>"
    rows = [
        {"prompt": "p", "solution": truth, "data_source": "curate/countdown", "format_score": 0.1,
         "extra_info": {"split": "train", "format_score": 0.1}},
        {"prompt": "p", "solution": truth, "data_source": "curate/countdown", "format_score": 0.0,
         "extra_info": {"split": "train", "format_score": 0.0}},
        {"prompt": "p", "solution": "4", "data_source": "curate/math", "format_score": 0.1, "extra_info": None},
    ]
    completions = [wrong, wrong, "\\boxed{4}"]
    keys = [k for k in rows[0] if k not in ("prompt", "completion", "completion_ids")]  # as GRPOTrainer does
    kwargs = {k: [row[k] for row in rows] for k in keys}
    kwargs.update(trainer_state=None, log_extra=lambda *a, **k: None, log_metric=lambda *a, **k: None)
    values = trl_reward()(prompts=[r["prompt"] for r in rows], completions=completions, completion_ids=[[1]] * 3, **kwargs)
    assert values == [0.1, 0.0, 1.0]
    # Each equals verl's score of the same row.
    assert values[:2] == [compute_score(r["data_source"], wrong, r["solution"], r["extra_info"]) for r in rows[:2]]
    # The format score alone in extra_info (an export that keeps verl's column) counts as well; right and broken
    # answers are unaffected by it.
    only_extra = trl_reward("curate/countdown")(completions=[wrong, right, broken], solution=[truth] * 3,
                                                extra_info=[{"format_score": 0.1}] * 3)
    assert only_extra == [0.1, 1.0, 0.0]
    assert trl_reward("curate/countdown")(completions=[wrong], solution=[truth]) == [0.0]  # no column: 0, as before
    # A verl-layout dataset (priming) has no `solution` column: the ground truth is reward_model's.
    verl_row = {"reward_model": [{"style": "rule", "ground_truth": truth}], "format_score": [0.1]}
    assert trl_reward()(completions=[wrong], data_source=["curate/countdown"], **verl_row) == [0.1]
    with pytest.raises(RewardInputError, match="differs"):
        trl_reward()(completions=[wrong], solution=[truth], data_source=["curate/countdown"], format_score=[0.1],
                     extra_info=[{"format_score": 0.0}])
    with pytest.raises(ValueError, match="format_score"):
        trl_reward()(completions=[wrong], solution=[truth], data_source=["curate/countdown"], format_score=[1.5])
    with pytest.raises(RewardInputError, match="ground truth"):
        trl_reward()(completions=[wrong], data_source=["curate/countdown"])

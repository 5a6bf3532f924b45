"""The answer formats models write and the equivalences the math reward owes them (issue 38).

Cases marked [math-verify] are adapted from the regression suite of HuggingFace's math-verify
(https://github.com/huggingface/Math-Verify, tests/test_all.py, test_open_thoughts.py, test_yujianll.py; MIT License,
Copyright (c) 2024 The HuggingFace Team): its (gold, prediction, expected) triples, the prediction scored as a model's
whole response. Cases marked [GSM8K] are model solutions of openai/grade-school-math's example_model_solutions.jsonl.
"""

import json

import pytest

from curate.rewards import extract_answer, score
from curate.rewards.equivalence import close_in_value, decimal_comma


@pytest.mark.parametrize("response, expected", [
    # several boxes written one after another are one answer in parts [math-verify test_open_thoughts]
    ("\\boxed{1},\\boxed{2},\\boxed{3}", "1, 2, 3"),
    ("$$\\boxed{(2, 2)} \\quad \\text{and} \\quad \\boxed{(6, 2)}$$", "(2, 2), (6, 2)"),
    ("are: \\[ \\boxed{-2} \\quad \\text{and} \\quad \\boxed{1}. \\]", "-2, 1"),
    # ... but a box of an earlier step is not a part of the final one
    ("so x = 2, then \\boxed{\\frac{1}{2}} and finally \\boxed{\\frac{3}{4}}.", "\\frac{3}{4}"),
    ("\\boxed{5} so the answer is \\boxed{5}", "5"),
    # a closing statement wins over an intermediate box [math-verify test_all, "Decimal handling 3"]
    ("... = \\boxed{200}$ ... = \\boxed{255}$ So ... $10,455. Final Answer: The final answer is $10,455$. I hope it is "
     "correct.", "10,455"),
    ("Final Answer: The largest $n$ is 34.", "34"),  # [math-verify test_all]
    ("Final Answer: The volume of $ABCDEFGH$ is 120. I hope it is correct.", "120"),  # [math-verify test_all]
    # a statement runs on past its sentence (a line of over 1,000 characters) [math-verify test_all]
    ("Final Answer: The final answer is $14 {, }916$. I hope it is correct. Note: " + "It is correct. " * 80,
     "14 {, }916"),
    ("**Answer:** 5", "5"),
    ("Thus the answer is \\boxed{42}. Wait, no: the answer is 43", "42"),
    ("The answer is (B).", "(B)"),
    # an escaped dollar does not end a math span [math-verify test_all]
    ("The answer is $\\$16,\\!386.20$. I hope it is correct.", "\\$16,\\!386.20"),
    # GSM8K's own answer lines [GSM8K]
    ("She makes 9 * 2 = $<<9*2=18>>18 every day.\nA: 18", "18"),
    ("Janet sells 16 - 3 - 4 = <<16-3-4=9>>9 duck eggs a day.\n#### 18", "18"),
    # a last line that is a bare value; a last line of prose is not one
    ("Adding them up:\n$\\frac{10}{9}$", "\\frac{10}{9}"),
    ("Adding them up gives 18 apples.\nThat is all.", None),
])
def test_extraction_of_model_formats(response, expected):
    assert extract_answer(response) == expected


@pytest.mark.parametrize("response, gold, expected", [
    ("\\boxed{1}, \\boxed{2}, \\boxed{3}", "\\{1,2,3\\}", 1.0),
    ("\\boxed{1} and \\boxed{2} and \\boxed{3}", "1,2,3", 1.0),
    ("\\boxed{1}, \\boxed{2}", "\\{1,2,3\\}", 0.0),
    # two different values boxed together do not answer a one-part gold with either of them
    ("\\boxed{-2} and \\boxed{1}", "1", 0.0),
    ("\\boxed{-2} and \\boxed{1}", "1, -2", 1.0),
    ("Final Answer: The final answer is $10,455$.", "10455", 1.0),
    ("A: 18", "18", 1.0),
    ("#### 18", "18", 1.0),
    ("#### 19", "18", 0.0),
    # percentages, in the MCQA->open golds (`40\%`) and written out [math-verify test_all]
    ("\\boxed{40%}", "40\\%", 1.0),
    ("\\boxed{40\\%}", "40\\%", 1.0),
    ("\\boxed{41%}", "40\\%", 0.0),
    ("The answer is 28 percent.", "28\\%", 1.0),
    ("\\boxed{20 \\%}", "20", 1.0),
    ("\\boxed{28}", "28\\%", 1.0),
    ("\\boxed{0.28}", "28", 0.0),
    # decimal commas: one comma with one, two or four-plus digits after it, or led by 0 [math-verify test_all]
    ("\\boxed{2,74}", "2.74", 1.0),
    ("\\boxed{1000,99}", "1000.99", 1.0),
    ("\\boxed{1.22}", "1,22", 1.0),
    ("\\boxed{0,111}", "0.111", 1.0),
    ("\\boxed{2,75}", "2.74", 0.0),
    ("\\boxed{2,740}", "2.74", 0.0),  # three digits: a thousands group, 2740
    ("\\boxed{2,740}", "2740", 1.0),
    # tiny values compare in relative terms, exact ones exactly [math-verify test_yujianll]
    ("\\boxed{\\frac{1}{2006!}}", "\\frac{1}{2004!}", 0.0),
    ("\\boxed{\\frac{1}{2^{98}}}", "\\frac{1}{2^{99}}", 0.0),
    ("\\boxed{2 \\cdot 10^{-9}}", "10^{-9}", 0.0),
    ("\\boxed{\\frac{1}{2^{99}}}", "2^{-99}", 1.0),
    ("\\boxed{0.0833333333333333}", "\\frac{1}{12}", 1.0),  # [math-verify test_all, qwen parser cases]
    ("\\boxed{$16,\\!386.20}", "16386.20", 1.0),
])
def test_math_reward_on_model_formats(response, gold, expected):
    assert score("curate/math", response, gold) == expected


def test_decimal_comma_rule():
    assert [decimal_comma(x) for x in ("2,74", "-1000,99", "0,111", "1,234", "1,2,3", "2.74")] == \
        ["2.74", "-1000.99", "0.111", None, None, None]


def test_close_in_value_vetoes_only_rounding():
    import sympy

    assert not close_in_value(1 / sympy.factorial(2004), 1 / sympy.factorial(2006))
    assert close_in_value(sympy.Rational(1, 4), sympy.Integer(25))  # far apart: another rule's verdict (percent)
    assert close_in_value(sympy.sqrt(2) / 2, 1 / sympy.sqrt(2))
    assert close_in_value(sympy.Symbol("x"), sympy.Symbol("x"))


def test_gsm8k_model_solutions_as_training_scores_them(shared_data):
    """[GSM8K] The model solutions, each scored as a trainer scores it (default extraction, the gold's final
    `#### N`), agree with OpenAI's is_correct labels: their `A: N` lines are read."""
    rows = [json.loads(x) for x in (shared_data / "gsm8k" / "example_model_solutions.jsonl").open().readlines()[:40]]
    agree = total = 0
    for row in rows:
        gold = row["ground_truth"].strip().splitlines()[-1].removeprefix("A:").strip()
        for key in ("6b_finetuning", "6b_verification", "175b_finetuning", "175b_verification"):
            agree += (score("curate/math", row[key]["solution"], gold) == 1.0) == row[key]["is_correct"]
            total += 1
    assert agree == total


def test_audit_reports_recall_and_false_accepts_per_answer_format():
    """Part 4: the audit's by_format strata, against counts built here by hand: three boxed responses (two right, one
    wrong and paid), two GSM8K lines (one right and missed), one unmarked right response (missed)."""
    from curate.handoff.behavior_audit import audit_report
    from curate.handoff.verifier_audit import Pair
    from curate.rewards import DEFAULT

    rows = [  # response, label, verdict
        ("so \\boxed{3}", True, True), ("\\boxed{4}", True, True), ("\\boxed{5}", False, True),
        ("Step\n#### 3", True, False), ("Step\nA: 6", False, False), ("I think three.", True, False),
        ("\\boxed{1}, \\boxed{2}", True, True),
    ]
    pairs = [Pair(str(i), "3", text, label, "integer", DEFAULT) for i, (text, label, _) in enumerate(rows)]
    report = audit_report(pairs, {"r": [verdict for _, _, verdict in rows]}, None, resamples=200, seed=0)
    by_format = report["by_format"]
    assert list(by_format) == ["boxed", "boxes", "gsm8k", "unmarked"]
    assert (by_format["boxed"]["tp"], by_format["boxed"]["fp"], by_format["boxed"]["recall"]) == (2, 1, 1.0)
    assert by_format["boxed"]["false_accept_rate"] == 1.0
    assert (by_format["gsm8k"]["recall"], by_format["gsm8k"]["false_accept_rate"]) == (0.0, 0.0)
    assert by_format["unmarked"]["correct_without_marked_answer"] == 1 and by_format["boxes"]["n"] == 1


@pytest.mark.parametrize("response, gold, expected", [
    # Sky-T1 MATH-500 traces (NovaSky-AI), false negatives of the behavior audit read one by one
    ("**Final Answer**\n\n\\[ \\boxed{12^{\\text{th}}\\text{ grade}} \\]", "12", 1.0),
    ("**Final Answer**\n\n\\[ \\boxed{11^{\\text{th}}\\text{ grade}} \\]", "12", 0.0),
    ("I'm confident that the answer is three boxes contain neither pens nor pencils.", "3", 1.0),
    ("I'm confident that the answer is four boxes contain neither pens nor pencils.", "3", 0.0),
    # a remark on an answer is not one: the boxed answer before it stands
    ("So \\boxed{284}. I think that's the final answer.", "284", 1.0),
    ("So the answer is \\boxed{18}, and I checked that the answer is correct.", "18", 1.0),
])
def test_audit_false_negatives_fixed(response, gold, expected):
    assert score("curate/math", response, gold) == expected


@pytest.mark.parametrize("response, gold, expected", [
    ("Therefore, the answer should be 210.", "210", 1.0),  # [Sky-T1 MATH-500 trace 111]
    ("Therefore, the answer should be 211.", "210", 0.0),
    ("\\boxed{0.\\overline{7}}", "\\frac{7}{9}", 1.0),
    ("\\boxed{1.2\\overline{36}}", "\\frac{68}{55}", 1.0),
    ("\\boxed{0.\\overline{6}}", "\\frac{7}{9}", 0.0),
])
def test_answer_should_be_and_repeating_decimals(response, gold, expected):
    assert score("curate/math", response, gold) == expected


def test_a_dollar_sign_is_not_a_math_span_across_lines():
    # [Sky-T1 MATH-500 trace 273]: money written with a lone "$" ends its sentence at the line's end
    response = "I think the answer is $1250.\n\nWait a minute, but is there any other factor? No, it costs $3."
    assert extract_answer(response) == "1250"
    assert score("curate/math", response, "1250") == 1.0

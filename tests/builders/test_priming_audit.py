"""A fresh priming build of every behavior variant and answer mode, read back from its files by a reader written
apart from the writer (issue 19 parts 1, 3 and 8).

The reader has its own tokenizer and a shunting-yard evaluator over exact fractions, and its own word lists for
the reference definitions of the behaviors; it knows nothing of the writer's phrase banks or helpers. It reads the
rows as a user would, from data/*.parquet, and checks:
- every stated equation `expression = number` is true, except one deliberate slip in an incorrect-answer row
  whose failure is a slip (carry, borrow, swapped digits), and a slip is a plausible one;
- no check sentence states a false equation;
- variants without verification never compare anything with the target (or with any goal);
- a number is used only once it is given (the numbers, the target) or derived by an earlier equation, and the target
  is reasoned from only where backward chaining is on;
- each behavior that is off leaves none of its marks.

CURATE_PRIMING_AUDIT_ROWS sets the rows per (variant, answers) build (default 4, 72 traces; 56 gives the 1,008 of
the README figures); the figures are written to BASETEMP/priming_audit.json.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from fractions import Fraction

import pyarrow.parquet as pq
import pytest

from curate.builders.priming import PrimingConfig, run_priming
from curate.builders.trace_phrases import VARIANTS

ROWS = int(os.environ.get("CURATE_PRIMING_AUDIT_ROWS", "4"))
ANSWER_MODES = ("correct", "incorrect", "any")
SLIP_FAILURES = {"carry", "borrow", "swapped_digits"}
TOKEN = re.compile(r"\d+|[-+*/()=]|[×÷−]|[A-Za-z']+|[^\sA-Za-z\d]")
PRECEDENCE = {"+": 1, "-": 1, "*": 2, "/": 2}

# The reference definitions, as words a reader would look for (not the writer's sentences).
COMPARISON = re.compile(
    r"\b(closest|nearest|close|none of|not (?:the|equal|it)|doesn'?t|does not|equals?|match(?:es)?|exactly|off by|"
    r"short|misses|miss|works|correct|wrong|right|verify|verif\w+|check\w*|confirm\w*|recheck|recompute\w*|redo\w*|"
    r"as required|what i wanted|yes|ok|nope|best|settle|target)\b|✓",
    re.IGNORECASE,
)
ABANDON = re.compile(
    r"\b(back|again|another|instead|different|scrap\w*|start(?:ing)? over|abandon\w*|return\w*|"
    r"retry|else)\b",
    re.IGNORECASE,
)
PLANNING = re.compile(
    r"\b(plan\w*|sub-?goals?|mini-goal|goals?|stages?|part|first|then fold|break\w*|split)\b", re.IGNORECASE
)
FROM_GOAL = re.compile(
    r"\b(backwards?|work(?:ing)? back|from the end|must (?:make|produce|give)|ha(?:s|ve) to make|"
    r"would have to|need(?:s|ed)?|last|peel\w*|goes last|used last|ends? with)\b",
    re.IGNORECASE,
)
APPROVES = re.compile(
    r"\b(verify\w*|check\w*|confirm\w*|recheck|recompute\w*|redo\w*|ok|yes|yep|fine|right|"
    r"consistent|sure|good|matches|works|as it should be)\b|✓",
    re.IGNORECASE,
)
MARKS = {
    "verification": COMPARISON,
    "backtracking": ABANDON,
    "subgoal_setting": PLANNING,
    "backward_chaining": FROM_GOAL,
}


# ----------------------------------------------------------------------------------------------- the reader
def evaluate(tokens: list[str]) -> Fraction:
    """Exact value of an arithmetic token list (shunting-yard); ValueError when it is not one expression."""
    output: list[Fraction] = []
    operators: list[str] = []

    def reduce() -> None:
        op = operators.pop()
        if len(output) < 2:
            raise ValueError("missing operand")
        b, a = output.pop(), output.pop()
        if op == "/" and b == 0:
            raise ValueError("division by zero")
        output.append({"+": a + b, "-": a - b, "*": a * b, "/": a / b if b else None}[op])

    expect_operand = True
    for token in tokens:
        if token.isdigit():
            if not expect_operand:
                raise ValueError("two operands in a row")
            output.append(Fraction(int(token)))
            expect_operand = False
        elif token == "(":
            operators.append(token)
        elif token == ")":
            while operators and operators[-1] != "(":
                reduce()
            if not operators:
                raise ValueError("unbalanced )")
            operators.pop()
        elif token in PRECEDENCE:
            if expect_operand:
                raise ValueError("operator without a left operand")
            while operators and operators[-1] != "(" and PRECEDENCE[operators[-1]] >= PRECEDENCE[token]:
                reduce()
            operators.append(token)
            expect_operand = True
        else:
            raise ValueError(f"not arithmetic: {token!r}")
    while operators:
        if operators[-1] == "(":
            raise ValueError("unbalanced (")
        reduce()
    if len(output) != 1:
        raise ValueError("not one expression")
    return output[0]


def tokens_of(text: str) -> list[str]:
    return [{"×": "*", "÷": "/", "−": "-"}.get(t, t) for t in TOKEN.findall(text)]


def stated_equations(sentence: str) -> list[tuple[list[str], Fraction, Fraction]]:
    """(left tokens, true value of the left side, stated value) of every `expression = number` in a sentence; the
    left side is the longest run of arithmetic tokens before '=' that reads as one expression."""
    tokens = tokens_of(sentence)
    found = []
    for k, token in enumerate(tokens):
        if token != "=":
            continue
        assert k + 1 < len(tokens) and tokens[k + 1].isdigit(), f"'=' without a number after it: {sentence!r}"
        start = k
        while start > 0 and (tokens[start - 1].isdigit() or tokens[start - 1] in "+-*/()"):
            start -= 1
        run = tokens[start:k]
        while run:  # an opening parenthesis of the surrounding prose is not part of the equation
            try:
                value = evaluate(run)
                break
            except ValueError:
                run = run[1:]
        assert run and any(t in PRECEDENCE for t in run), f"unreadable equation in {sentence!r}"
        found.append((run, value, Fraction(int(tokens[k + 1]))))
    return found


def sentences(line: str) -> list[str]:
    return [s for s in re.split(r"(?<=[.;!?])\s+", line) if s.strip()]


def plausible_slip(stated: Fraction, true: Fraction) -> bool:
    """A dropped carry or forgotten borrow moves the result by a power of ten; swapped digits permute them."""
    if stated.denominator != 1 or true.denominator != 1 or stated == true:
        return False
    gap = abs(stated - true)
    return str(int(gap)).rstrip("0") == "1" and gap >= 10 or sorted(str(stated)) == sorted(str(true))


def read_row(row: dict) -> dict:
    """Everything the reader finds in one row: its false equations, approvals of them, isolation marks, values
    named before they exist."""
    think = re.fullmatch(r"<think>\n(.*)\n</think>\n<answer> (.*) </answer>", row["completion"], re.DOTALL)
    assert think, row["completion"][:200]
    text, answer = think.group(1), think.group(2)
    numbers, target = row["numbers"], row["target"]
    requested = set(row["requested_behaviors"])
    lines = text.splitlines()
    found = {"false": [], "approvals": [], "isolation": [], "before_derived": [], "target_reasoned": [], "equations": 0}
    known = {Fraction(n) for n in numbers}
    target_known = "verification" in requested or "backward_chaining" in requested
    false_equations = set()
    for number, line in enumerate(lines):
        for sentence in sentences(line):
            equations = stated_equations(sentence)
            found["equations"] += len(equations)
            for left, value, stated in equations:
                if value != stated:
                    found["false"].append((" ".join(left), value, stated))
                    false_equations.add((" ".join(left), stated))
                    if APPROVES.search(sentence):
                        found["approvals"].append(sentence)
            # Values in reading order: a left side uses only what exists; a result exists from then on.
            tokens, k = tokens_of(sentence), 0
            while k < len(tokens):
                if tokens[k].isdigit():
                    value = Fraction(int(tokens[k]))
                    is_result = k > 0 and tokens[k - 1] == "="
                    if is_result:
                        known.add(value)
                        if value == target:
                            target_known = True
                    elif number > 0 and value == target and value not in known and not target_known:
                        found["target_reasoned"].append(sentence)
                    elif number > 0 and value not in known and value != target:
                        found["before_derived"].append(f"{tokens[k]} in {sentence!r}")
                k += 1
        if number > 0:  # the first line states the problem
            for behavior, mark in MARKS.items():
                if behavior not in requested and (hit := mark.search(line)):
                    found["isolation"].append(f"{behavior} off, {hit.group()!r} in {line!r}")
    # A later check must never restate an equation that was stated falsely.
    for line in lines:
        for left, stated in false_equations:
            if f"{left} = {stated}" in line.replace("  ", " ") and APPROVES.search(line):
                found["approvals"].append(line)
    found["answer_value"] = evaluate(tokens_of(answer))
    found["answer_numbers"] = sorted(int(t) for t in tokens_of(answer) if t.isdigit())
    found["text"] = text
    return found


def distinct_4gram_rate(texts) -> float:
    grams = []
    for text in texts:
        words = re.sub(r"\d+", "N", text).split()
        grams += [tuple(words[k : k + 4]) for k in range(len(words) - 3)]
    return len(set(grams)) / len(grams)


# ----------------------------------------------------------------------------------------------- the build
@pytest.fixture(scope="module")
def build(tmp_path_factory):
    root = tmp_path_factory.mktemp("priming_audit")
    rows, stats = [], {}
    for variant in VARIANTS:
        for answers in ANSWER_MODES:
            out = root / f"{variant}-{answers}"
            run_priming(
                PrimingConfig(variant=variant, answers=answers, n=ROWS, test_n=0, seed=11, classifier="cues_v3"),
                out,
                progress=False,
            )
            for path in sorted((out / "data").glob("*.parquet")):
                rows += pq.read_table(path).to_pylist()
            stats[(variant, answers)] = json.loads((out / ".curate" / "stats.json").read_text())
    return root, rows, stats


def test_every_stated_equation_is_true_except_one_plausible_unapproved_slip(build):
    root, rows, stats = build
    assert len(rows) == len(VARIANTS) * len(ANSWER_MODES) * ROWS
    figures = {
        "traces": len(rows),
        "equations_checked": 0,
        "false_outside_slips": 0,
        "slips_by_type": Counter(),
        "false_by_failure": Counter(),
        "approvals_of_false": 0,
        "isolation_violations": Counter(),
        "values_before_derived": 0,
        "target_reasoned_without_backward_or_verification": 0,
        "failures": Counter(),
    }
    problems = []
    for row in rows:
        read = read_row(row)
        figures["equations_checked"] += read["equations"]
        where = f"{row['variant']}/{row['answers']} {row['numbers']}->{row['target']}"
        figures["failures"][row["failure"] or "none (correct)"] += 1
        slip_row = row["failure"] in SLIP_FAILURES
        for left, value, stated in read["false"]:
            figures["false_by_failure"][row["failure"]] += 1
            if not (slip_row and len(read["false"]) == 1 and plausible_slip(stated, value)):
                figures["false_outside_slips"] += 1
                problems.append(f"{where}: false {left} = {stated} (true {value}), failure {row['failure']}")
        if slip_row and len(read["false"]) == 1:
            figures["slips_by_type"][row["failure"]] += 1
        figures["approvals_of_false"] += len(read["approvals"])
        problems += [f"{where}: a check approves a false equation: {a!r}" for a in read["approvals"]]
        figures["isolation_violations"][row["variant"]] += len(read["isolation"])
        problems += [f"{where}: {v}" for v in read["isolation"]]
        figures["values_before_derived"] += len(read["before_derived"])
        problems += [f"{where}: used before given or derived: {v}" for v in read["before_derived"]]
        figures["target_reasoned_without_backward_or_verification"] += len(read["target_reasoned"])
        problems += [f"{where}: the target is used before it is reached: {v!r}" for v in read["target_reasoned"]]
        # The row's own claims, re-derived: the answer's value and numbers decide answer_correct.
        correct = read["answer_value"] == row["target"] and read["answer_numbers"] == sorted(row["numbers"])
        assert correct == row["answer_correct"], where
        if row["answers"] == "correct":
            assert correct and row["failure"] is None, where
        if row["answers"] == "incorrect":
            assert not correct and row["failure"], where
    for variant in VARIANTS:
        figures["isolation_violations"].setdefault(variant, 0)
    by_voice: dict[str, list[str]] = {}
    for row in rows:
        by_voice.setdefault(row["voice"], []).append(row["completion"])
    figures["distinct_4gram_rate"] = {
        voice: round(distinct_4gram_rate(texts), 3) for voice, texts in sorted(by_voice.items())
    }
    figures["acceptance"] = {f"{v}/{a}": round(s["acceptance_rate"], 3) for (v, a), s in stats.items()}
    figures["acceptance_by_variant"] = {
        v: round(
            sum(stats[(v, a)]["kept"] for a in ANSWER_MODES) / sum(stats[(v, a)]["attempted"] for a in ANSWER_MODES), 3
        )
        for v in VARIANTS
    }
    figures["no_trace_by_reason"] = Counter()
    for s in stats.values():
        for reason, count in s["rejected"].items():
            if reason.startswith("no trace"):
                figures["no_trace_by_reason"][reason] += count
    (root.parent / "priming_audit.json").write_text(json.dumps(figures, indent=2, default=dict))
    print(json.dumps(figures, indent=2, default=dict))
    assert not problems, "\n".join(problems[:15])
    assert figures["false_outside_slips"] == 0 and figures["approvals_of_false"] == 0
    assert figures["equations_checked"] >= 5 * len(rows)  # the reader read the traces' arithmetic, not nothing


def test_the_reader_catches_what_it_is_meant_to_catch():
    """The reader is only worth something if it fails on bad rows."""
    base = {"numbers": [8, 5, 2, 7], "target": 45, "requested_behaviors": []}

    def row(think, requested=()):
        return {
            **base,
            "requested_behaviors": list(requested),
            "completion": f"<think>\n{think}\n</think>\n<answer> (7 + 8) * (5 - 2) </answer>",
        }

    clean = read_row(row("Numbers 8, 5, 2, 7; make 45.\n7 + 8 = 15, leaving 15, 5, 2.\n5 - 2 = 3. 15 * 3 = 45."))
    assert not any(clean[k] for k in ("false", "approvals", "isolation", "before_derived", "target_reasoned"))
    assert clean["answer_value"] == 45
    slipped = read_row(row("Make 45 from 8, 5, 2, 7.\n7 + 8 = 16. 5 - 2 = 3.\nCheck: 7 + 8 = 16, ok."))
    assert slipped["false"] and slipped["approvals"]
    compared = read_row(row("Make 45.\n7 + 8 = 15. 15 * 2 = 30, not the target."))
    assert any("verification off" in v for v in compared["isolation"])
    oracle = read_row(row("Make 45.\nI would be done with 62 because 62 - 17 = 45."))
    assert oracle["before_derived"]
    from_goal = read_row(row("Make 45.\n45 / 3 = 15, so 7 and 8 must make 15.\n7 + 8 = 15."))
    assert from_goal["target_reasoned"] and any("backward_chaining off" in v for v in from_goal["isolation"])
    assert not read_row(row("Make 45.\n45 / 3 = 15, so 7 and 8 must make 15.\n7 + 8 = 15.", ["backward_chaining"]))[
        "target_reasoned"
    ]
    assert plausible_slip(Fraction(16), Fraction(26)) and plausible_slip(Fraction(54), Fraction(45))
    assert not plausible_slip(Fraction(47), Fraction(45))

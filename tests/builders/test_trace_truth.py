"""Symbolic Countdown traces read independently of the writer.

Nothing here comes from the writer's helpers: equations are found in the prose by their own parser and
checked with exact fractions; isolation is judged by marker lists written from the reference definitions
of the four behaviors (not from the writer's phrase banks); values must be given or derived before use.
"""

import random
import re
import zlib
from fractions import Fraction

import pytest

from curate.behaviors import Behavior
from curate.builders.trace_phrases import VARIANTS
from curate.builders.trace_templates import TraceError, write_trace
from curate.puzzles.countdown import generate_problem

EXPR_CHARS = set("0123456789 +-*/()×÷−")
NUMBER = re.compile(r"\d+")
SLIPS = {"carry", "borrow", "swapped_digits"}

# Reference definitions (Gandhi et al.): verification = checking a result against the goal or by
# recomputation; backtracking = abandoning an approach for another; subgoal setting = a plan or
# intermediate stages/targets; backward chaining = reasoning from the goal towards the givens.
MARKERS = {
    Behavior.VERIFICATION: re.compile(
        r"\b(target|closest|nearest|close|match\w*|check\w*|verif\w*|confirm\w*|correct|right|wrong|"
        r"exactly|equals?|sure|consistent|ok|yes|nope|none|not|no|works|hit|miss\w*|best|settle|off by|"
        r"precisely|required|wanted)\b|✓|≠", re.IGNORECASE),
    Behavior.BACKTRACKING: re.compile(
        r"\b(back|backtrack\w*|again|another|different|else|instead|start over|abandon\w*|scrap\w*|return\w*|"
        r"retry|other way|dead end|give up|fail\w*)\b", re.IGNORECASE),
    Behavior.SUBGOAL_SETTING: re.compile(
        r"\b(plan|sub-?goals?|mini-goal|goal|stages?|parts?|steps?|first|second|third|break\w*|split|"
        r"intermediate)\b", re.IGNORECASE),
    Behavior.BACKWARD_CHAINING: re.compile(
        r"\b(backwards?|work(ing)? back|from the end|would have to|ha(s|ve) to make|must (make|produce)|"
        r"needs?|needed|last|peel\w*|reverse)\b", re.IGNORECASE),
}
APPROVAL = re.compile(r"✓|\b(check\w*|verif\w*|confirm\w*|sure|ok|right|consistent|recomput\w*|good|yep|fine)\b",
                      re.IGNORECASE)


# ----------------------------------------------------------------------------------- a small exact parser
def tokens(text):
    out, k = [], 0
    text = text.replace("×", "*").replace("÷", "/").replace("−", "-")
    while k < len(text):
        c = text[k]
        if c.isspace():
            k += 1
        elif c.isdigit():
            m = NUMBER.match(text, k)
            out.append(Fraction(int(m.group())))
            k = m.end()
        elif c in "+-*/()":
            out.append(c)
            k += 1
        else:
            raise ValueError(f"unexpected {c!r}")
    return out


def evaluate(text):
    """Value and the multiset of literals of an arithmetic expression (+ - * / and parentheses), exact."""
    toks, pos, literals = tokens(text), 0, []

    def peek():
        return toks[pos] if pos < len(toks) else None

    def take():
        nonlocal pos
        pos += 1
        return toks[pos - 1]

    def atom():
        t = take()
        if t == "(":
            v = expr()
            if take() != ")":
                raise ValueError("unbalanced")
            return v
        if isinstance(t, Fraction):
            literals.append(int(t))
            return t
        raise ValueError(f"bad token {t!r}")

    def term():
        v = atom()
        while peek() in ("*", "/"):
            op, r = take(), atom()
            if op == "/" and r == 0:
                raise ZeroDivisionError
            v = v * r if op == "*" else v / r
        return v

    def expr():
        v = term()
        while peek() in ("+", "-"):
            op, r = take(), term()
            v = v + r if op == "+" else v - r
        return v

    value = expr()
    if pos != len(toks):
        raise ValueError("trailing tokens")
    return value, literals


def equations(text):
    """Every '=' in the text as (line number, left text, left value, stated value, position of the stated value).
    An '=' whose two sides cannot both be read is an error: every stated equation must be checkable."""
    found = []
    for line_no, line in enumerate(text.splitlines()):
        for m in re.finditer("=", line):
            k = m.start()
            while k > 0 and line[k - 1] in EXPR_CHARS:
                k -= 1
            left, depth = line[k:m.start()], 0
            for j in range(len(left) - 1, -1, -1):  # cut at an opening parenthesis the equation is inside
                depth += {")": 1, "(": -1}.get(left[j], 0)
                if depth < 0:
                    left = left[j + 1:]
                    break
            depth = 0
            for j, c in enumerate(left):  # and after a closing one that belongs to text before it
                depth += {"(": 1, ")": -1}.get(c, 0)
                if depth < 0:
                    left, depth = left[j + 1:], 0
                    break
            left = left.strip()
            right = re.match(r"\s*(\d+)", line[m.end():])
            assert left and right and re.search(r"[+\-*/]", left), f"unreadable equation in {line!r}"
            value, _ = evaluate(left)
            found.append((line_no, left, value, Fraction(int(right.group(1))), m.end() + right.start(1), line))
    return found


def subexpression_values(answer):
    """Values of every parenthesised part of the answer and the answer itself."""
    values = {evaluate(answer)[0]}
    stack = []
    for k, c in enumerate(answer):
        if c == "(":
            stack.append(k)
        elif c == ")":
            values.add(evaluate(answer[stack.pop() + 1:k])[0])
    return values


def plausible_slip(stated, true):
    if stated.denominator != 1 or true.denominator != 1 or stated == true:
        return False
    gap = abs(int(stated) - int(true))
    return (gap >= 10 and str(gap).strip("0") == "1" and set(str(gap)[1:]) <= {"0"}) or \
        sorted(str(int(stated))) == sorted(str(int(true)))


def audit(trace, problem, behaviors, answers):
    """Every violation found in one trace, as readable strings (empty when the trace is clean)."""
    problems = []
    text, T = trace.text, Fraction(problem.target)
    eqs = equations(text)
    lines = text.splitlines()
    false = [e for e in eqs if e[2] != e[3]]
    if answers == "correct" and false:
        problems.append(f"false equation in a correct trace: {false[0][1]} = {false[0][3]}")
    if len(false) > 1:
        problems.append(f"{len(false)} false equations")
    for line_no, left, value, stated, _, line in false:
        if not plausible_slip(stated, value):
            problems.append(f"implausible slip {left} = {stated} (true {value})")
        if trace.failure not in SLIPS:
            problems.append(f"false equation {left} = {stated} without a slip failure ({trace.failure})")
    for line_no, left, value, stated, _, line in eqs:
        for sentence in re.split(r"(?<=[.;!?])\s+", line):
            if left in sentence and APPROVAL.search(sentence) and value != stated:
                problems.append(f"a check approves the false {left} = {stated}: {sentence!r}")
    # No value before it is given or derived.
    known = {Fraction(n) for n in problem.numbers} | {T}
    derived_at = {(e[0], e[4]) for e in eqs}
    for line_no, line in enumerate(lines):
        for m in NUMBER.finditer(line):
            value = Fraction(int(m.group()))
            if (line_no, m.start()) in derived_at:
                known.add(value)
            elif value not in known:
                problems.append(f"{m.group()} used before it is given or derived: {line!r}")
    # Magnitude: values off the answer's own path stay within ten times the problem's scale.
    on_path = subexpression_values(trace.answer)
    scale = 10 * max(problem.target, *problem.numbers)
    for e in eqs:
        if e[3] > scale and e[3] not in on_path:
            problems.append(f"dead end of implausible size: {e[1]} = {e[3]}")
    # Isolation: an absent behavior leaves no trace; a present one is visible.
    body = "\n".join(lines[1:])
    for behavior, marker in MARKERS.items():
        hit = marker.search(body)
        if behavior not in behaviors and hit:
            line = next(x for x in lines[1:] if marker.search(x))
            problems.append(f"{behavior.value} is off but {hit.group()!r} appears: {line!r}")
        if behavior in behaviors and not hit:
            problems.append(f"{behavior.value} is on but not visible")
    # The target as a value to compare with or to reason from: only once derived (a result on the table),
    # unless verification (comparison) or backward chaining (reasoning from it) is on.
    given = {Fraction(n) for n in problem.numbers}
    if T not in given:
        derived = False
        for line_no, line in enumerate(lines[1:], 1):
            for m in NUMBER.finditer(line):
                if Fraction(int(m.group())) != T:
                    continue
                if (line_no, m.start()) in derived_at:
                    derived = True
                elif not derived and Behavior.VERIFICATION not in behaviors and \
                        Behavior.BACKWARD_CHAINING not in behaviors:
                    problems.append(f"the target is named before it is derived, without verification: {line!r}")
        for e in eqs:
            uses_target = any(Fraction(int(n)) == T for n in NUMBER.findall(e[1]))
            earlier = any((x[0], x[4]) < (e[0], e[4]) and x[3] == T for x in eqs)
            if uses_target and not earlier and not behaviors & {Behavior.BACKWARD_CHAINING, Behavior.VERIFICATION}:
                problems.append(f"reasoning from the target without backward chaining: {e[1]} = {e[3]}")
    if Behavior.BACKTRACKING not in behaviors and trace.failure != "number_used_twice":
        # One path: each equation takes its operands from the values on the table; several equations on one
        # line are the options of one pair, tried side by side, and the last of them is kept.
        pool = [Fraction(n) for n in problem.numbers]
        for line_no in sorted({e[0] for e in eqs}):
            start, after = list(pool), None
            for e in (x for x in eqs if x[0] == line_no):
                after = list(start)
                for v in (Fraction(int(n)) for n in NUMBER.findall(e[1])):
                    if v in after:
                        after.remove(v)
                    else:
                        problems.append(f"a second path without backtracking: {e[1]} uses {v} again")
                after.append(e[3])
            pool = after
    # The answer.
    value, literals = evaluate(trace.answer)
    valid = sorted(literals) == sorted(problem.numbers)
    if answers == "correct" and not (valid and value == T):
        problems.append(f"the answer {trace.answer} is not correct")
    if answers == "incorrect" and valid and value == T:
        problems.append(f"the answer {trace.answer} is correct in an incorrect trace")
    if trace.answer not in text:
        problems.append("the answer is not in the trace")
    return problems


# ----------------------------------------------------------------------------------- tests
@pytest.mark.parametrize("answers", ["correct", "incorrect", "any"])
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_traces_state_true_arithmetic_and_show_only_their_behaviors(variant, answers):
    rng = random.Random(zlib.crc32(f"{variant}/{answers}".encode()))
    behaviors = VARIANTS[variant]
    failures, audited = [], 0
    refused = 0
    for k in range(15):
        problem = generate_problem(rng)
        try:
            trace = write_trace(problem, behaviors, random.Random(k), answers)
        except TraceError:  # the builder draws another problem; the rate is bounded below
            refused += 1
            continue
        audited += 1
        failures += [f"{problem.numbers}->{problem.target}: {p}" for p in audit(trace, problem, behaviors, answers)]
        if answers == "incorrect":
            assert not trace.answer_correct and trace.failure
        if answers == "correct":
            assert trace.answer_correct and trace.failure is None
    assert refused <= 3, f"{refused} of 15 problems got no trace"
    assert not failures, "\n".join(failures[:10])


def test_incorrect_answers_come_from_several_natural_failures():
    rng = random.Random(3)
    kinds = {}
    for variant in ("negative_control", "only_backtracking", "backtracking_verification"):
        for k in range(30):
            trace = write_trace(generate_problem(rng), VARIANTS[variant], random.Random(k), "incorrect")
            kinds.setdefault(variant, set()).add(trace.failure)
    assert {"near_miss", "carry", "swapped_digits", "number_left_out"} <= kinds["negative_control"] | kinds["only_backtracking"]
    assert len(kinds["backtracking_verification"]) >= 2


def test_auditor_catches_what_it_is_meant_to_catch():
    """The checker is only worth something if it fails on bad traces."""
    from dataclasses import replace

    problem = generate_problem(random.Random(1))
    trace = write_trace(problem, VARIANTS["negative_control"], random.Random(0), "correct")
    assert audit(trace, problem, VARIANTS["negative_control"], "correct") == []
    first = equations(trace.text)[0]
    wrong = trace.text.replace(f"= {first[3]}", f"= {first[3] + 1}", 1)
    found = audit(replace(trace, text=wrong), problem, VARIANTS["negative_control"], "correct")
    assert any("false equation" in p for p in found)
    compared = trace.text + f"\nThat is the target, {problem.target}."
    assert any("verification is off" in p for p in audit(replace(trace, text=compared), problem,
                                                          VARIANTS["negative_control"], "correct"))
    oracle = trace.text.splitlines()[0] + "\nI would be done if I had 9999.\n" + "\n".join(trace.text.splitlines()[1:])
    assert any("used before" in p for p in audit(replace(trace, text=oracle), problem,
                                                  VARIANTS["negative_control"], "correct"))
    approved = trace.text + "\nCheck: 47 + 38 = 75 ✓"
    assert any("approves" in p for p in audit(replace(trace, text=approved), problem,
                                              VARIANTS["negative_control"], "incorrect"))

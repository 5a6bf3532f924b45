"""The pieces every symbolic trace is told with: the Trace itself, how values and equations are said, a plausible
arithmetic slip, the pool of built expressions, the narrator that renders events in a voice, and the opening, dead
ends and ending that forward and backward searches share."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from fractions import Fraction

from curate.behaviors import Behavior
from curate.builders.trace_phrases import BANKS, COUNT_WORDS, ORDINALS, C, S, V
from curate.puzzles.countdown import Problem, apply, check_expression


@dataclass
class Trace:
    text: str  # the reasoning inside <think> … </think>
    answer: str  # the expression inside <answer> … </answer>
    behaviors: frozenset[Behavior]
    strategy: str
    dead_ends: int
    answer_correct: bool
    failure: str | None = None  # why an incorrect answer is incorrect (one of FAILURES)
    voice: str = "explanatory"
    notes: list[str] = field(default_factory=list)


class TraceError(ValueError):
    """The search cannot give the trace that was asked for (e.g. no natural failure is reachable)."""


def number_text(value) -> str:
    value = Fraction(value)
    return str(value.numerator) if value.denominator == 1 else f"{value.numerator}/{value.denominator}"


def listing(values) -> str:
    return ", ".join(number_text(v) for v in values)


def equation(a, op, b, r) -> str:
    return f"{number_text(a)} {op} {number_text(b)} = {number_text(r)}"


def difference(c, goal) -> tuple[str, str]:
    """The equation that states how far c is from goal, and the distance."""
    big, small = (c, goal) if c >= goal else (goal, c)
    return equation(big, "-", small, big - small), number_text(big - small)

# ------------------------------------------------------------------------------------------ slips
def slip_value(kind: str, a: Fraction, op: str, b: Fraction, r: Fraction, rng: random.Random) -> Fraction | None:
    """A plausible wrong result for a op b = r: a dropped carry (+, *), a forgotten borrow (-), two
    swapped digits; None when the kind does not apply to this equation."""
    if any(Fraction(v).denominator != 1 or v < 0 for v in (a, b, r)):
        return None
    a, b, r = int(a), int(b), int(r)
    if kind == "carry" and op in "+*":
        if op == "*":  # a carry dropped while multiplying by a one-digit number
            if b >= 10 and a < 10:
                a, b = b, a
            if b >= 10:
                return None
        columns, carry, place, choices = a, 0, 1, []
        while columns or carry:
            digit = columns % 10 * (b if op == "*" else 1) + (0 if op == "*" else b // place % 10) + carry
            carry = digit // 10
            if carry:
                choices.append(carry * place * 10)
            columns //= 10
            place *= 10
        choices = [c for c in choices if r - c > 0]
        return Fraction(r - rng.choice(choices)) if choices else None
    if kind == "borrow" and op == "-":
        choices, borrow, place = [], 0, 1
        x, y = a, b
        while x or y:
            top, bottom = x % 10 - borrow, y % 10
            borrow = 1 if top < bottom else 0
            if borrow and (x // 10):
                choices.append(place * 10)
            x, y, place = x // 10, y // 10, place * 10
        return Fraction(r + rng.choice(choices)) if choices else None
    if kind == "swapped_digits":
        digits = list(str(r))
        pairs = [k for k in range(len(digits) - 1) if digits[k] != digits[k + 1] and not (k == 0 and digits[1] == "0")]
        if not pairs:
            return None
        k = rng.choice(pairs)
        digits[k], digits[k + 1] = digits[k + 1], digits[k]
        return Fraction(int("".join(digits)))
    return None


SLIPS_FOR = {"+": ("carry", "swapped_digits"), "-": ("borrow", "swapped_digits"), "*": ("carry", "swapped_digits"),
             "/": ("swapped_digits",)}


# ------------------------------------------------------------------------------------------ expression pool
class ExpressionPool:
    """Values on the table with the expression each one was built from (claimed values, as the trace says)."""

    def __init__(self, numbers):
        self.items = [(Fraction(n), str(n)) for n in numbers]

    def take(self, value):
        k = next(i for i, item in enumerate(self.items) if item[0] == value)
        return self.items.pop(k)

    def combine(self, a, op, b, r) -> None:
        left, right = self.take(a), self.take(b)
        self.items.append((Fraction(r), f"({left[1]} {op} {right[1]})"))

    def expr_of(self, value) -> str:
        return next(item[1] for item in self.items if item[0] == value)


def without_outer_parens(expr: str) -> str:
    if expr.startswith("("):
        depth = 0
        for k, c in enumerate(expr):
            depth += c == "("
            depth -= c == ")"
            if depth == 0:
                return expr[1:-1] if k == len(expr) - 1 else expr
    return expr

# ------------------------------------------------------------------------------------------ the writer
class Narrator:
    def __init__(self, problem: Problem, behaviors, voice: str, rng: random.Random):
        self.problem, self.behaviors, self.voice, self.rng = problem, behaviors, voice, rng
        self.lines: list[str] = []
        self.stage_form = rng.choice(BANKS[voice]["stage"])  # one label style per trace

    def say(self, key: str, **kw) -> None:
        self.lines.append(self.rng.choice(BANKS[self.voice][key]).format(**kw))

    def step(self, a, op, b, r, rest, index: int) -> None:
        text = self.rng.choice(BANKS[self.voice]["step"]).format(a=number_text(a), b=number_text(b),
                                                                 eq=equation(a, op, b, r), rest=listing(rest))
        if S in self.behaviors and index < len(ORDINALS):
            ordinal = ORDINALS[index]
            label = self.stage_form.format(num=COUNT_WORDS[index + 1], Ord=ordinal.capitalize())
            text = label + (text[0].lower() + text[1:] if label.endswith(", ") else text)
        self.lines.append(text)

    def check_step(self, a, op, b, r) -> None:
        inverse = {"+": ("-", b), "-": ("+", b), "*": ("/", b), "/": ("*", b)}[op]
        if op in "*/" and b == 0:
            return
        self.say("check_step", inv=equation(r, inverse[0], inverse[1], a))

    def options(self, x, y, tried) -> str:
        return ", ".join(equation(p, op, q, r) for p, op, q, r in tried)


def value_bound(problem: Problem) -> Fraction:
    return Fraction(3 * max(problem.target, *problem.numbers))


def finish_trace(problem, behaviors, narrator: Narrator, expr: str, strategy: str, dead_ends: int, failure, voice):
    expr = without_outer_parens(expr)
    narrator.say("conclude", expr=expr)
    check = check_expression(expr, problem.numbers, problem.target)
    if failure is None and check.status != "correct":
        raise TraceError(f"the written answer {expr!r} is not correct: {check.reason or check.value}")
    if failure is not None and check.status == "correct":
        raise TraceError("the failure still reached the target")
    if failure in ("number_used_twice", "number_left_out") and check.status != "invalid":
        raise TraceError("the answer does not miss or repeat a number")
    if failure not in (None, "number_used_twice", "number_left_out") and check.status != "wrong":
        raise TraceError(f"the written answer {expr!r} is not well-formed: {check.reason}")
    return Trace(text="\n".join(narrator.lines), answer=expr, behaviors=behaviors, strategy=strategy,
                 dead_ends=dead_ends, answer_correct=check.status == "correct", failure=failure, voice=voice)


def sensible_finals(x, y, goal, bound, integer_division, rng):
    """Last operations on (x, y) whose results are positive and within bound, in a seeded order."""
    out = []
    for p, q in ((x, y), (y, x)):
        for op in "+-*/":
            if op in "+*" and (p, q) != (x, y):
                continue
            r = apply(op, p, q, integer_division)
            if r is not None and 0 < r <= bound:
                out.append((p, op, q, r))
    rng.shuffle(out)
    return out


def leaf_lines(finals, goal, rng, hit: bool):
    """The options a leaf lists: up to three tried ones, the hit (when there is one) last."""
    hits = [f for f in finals if f[3] == goal]
    misses = [f for f in finals if f[3] != goal]
    tried = misses[: rng.randint(1, 3)] if not hit else misses[: rng.randint(0, 2)]
    return tried + hits[:1] if hit else tried


def _as_tuple(step):
    return (step.left, step.op, step.right, step.result) if hasattr(step, "left") else tuple(step)


def shared_steps(a, b) -> int:
    k = 0
    while k < len(a) and k < len(b) and _as_tuple(a[k]) == _as_tuple(b[k]):
        k += 1
    return k


def state_text(problem: Problem, path) -> str:
    if not path:
        return f"the start ({listing(problem.numbers)})"
    return listing(path[-1].remaining)


def open_narration(problem: Problem, behaviors, voice: str, rng: random.Random) -> Narrator:
    narrator = Narrator(problem, behaviors, voice, rng)
    narrator.say("open", nums=listing(problem.numbers), T=problem.target)
    if S in behaviors:
        narrator.say("plan_backward" if C in behaviors else "plan_forward")
    if C in behaviors:
        narrator.say("backward_intro", T=problem.target)
    return narrator


def narrate_dead_ends(narrator, problem, dead, T, bound, integer_division, behaviors, rng) -> None:
    previous = ()
    for attempt, leaf in enumerate(dead):
        start = shared_steps(previous, leaf.path)
        if attempt:
            narrator.say("abandon", state=state_text(problem, leaf.path[:start]))
        if S in behaviors and start < len(leaf.path):
            s = leaf.path[start]
            narrator.say("subgoal_pair", a=number_text(s.left), b=number_text(s.right))
        for k in range(start, len(leaf.path)):
            s = leaf.path[k]
            narrator.step(s.left, s.op, s.right, s.result, s.remaining, k)
            if V in behaviors and rng.random() < 0.25:
                narrator.check_step(s.left, s.op, s.right, s.result)
        x, y = leaf.values
        tried = leaf_lines(sensible_finals(x, y, T, bound, integer_division, rng), T, rng, hit=False)
        narrator.say("finals", x=number_text(x), y=number_text(y), options=narrator.options(x, y, tried))
        if V in behaviors:
            c = min((f[3] for f in tried), key=lambda r: abs(r - T))
            diff, d = difference(c, T)
            narrator.say("compare_fail", goal=number_text(T), c=number_text(c), diff=diff, d=d)
        previous = leaf.path

"""Symbolic trace writer: narrates a Countdown search with each behavior switched on or off.

A search decides what happens; the narration only decides how it is said. A trace is first a list of
events (a step taken, the results of a last pair, a comparison with the goal, a return to an earlier
state, ...), and a voice then renders each event in one of several sentence forms. Events of a behavior
are emitted only when that behavior is on, under the reference definitions:
- verification: a result compared with the target (or with a value the backward search needs), a step
  re-derived by its inverse, the final expression recomputed. Without it the trace states results and
  the answer, and never compares anything with the target;
- backtracking: dead ends the search really visited (all values within a few times the target), each
  followed by a return to an earlier state. Without it there is one attempt and nothing is abandoned;
- subgoal setting: a plan that says what the search will do, and stages the search then follows;
- backward chaining: the search itself works from the target: a last operation is chosen, joining a given
  number (or the stated value of a pair of them, for solutions shaped (a op b) op (c op d)) with what the
  other numbers must make, that value is derived from the target, and so on down to a last pair.

Arithmetic is exact: every equation a trace states is true, except, in an incorrect-answer trace, one
plausible slip (a dropped carry, a forgotten borrow, two swapped digits). Other incorrect answers come
from natural failures with true arithmetic: stopping at a near miss when the search budget runs out,
using a number twice, or leaving one out. No check ever re-states a slipped equation; with
verification on, a near miss is said to be a near miss.

A value is named only after it is given (the numbers, the target) or derived by a stated equation.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from fractions import Fraction
from itertools import islice
from typing import NamedTuple

from curate.behaviors import Behavior
from curate.puzzles.countdown import Problem, apply, check_expression, search_leaves

V, B, S, C = Behavior.VERIFICATION, Behavior.BACKTRACKING, Behavior.SUBGOAL_SETTING, Behavior.BACKWARD_CHAINING

VARIANTS: dict[str, frozenset[Behavior]] = {
    "all_strategies": frozenset({V, B, S, C}),
    "only_backtracking": frozenset({B}),
    "backtracking_verification": frozenset({B, V}),
    "backtracking_subgoal": frozenset({B, S}),
    "backtracking_backward": frozenset({B, C}),
    "negative_control": frozenset(),
}
VOICES = ("terse", "explanatory", "conversational")
STRATEGIES = ("dfs", "best_first")
FAILURES = ("near_miss", "carry", "borrow", "swapped_digits", "number_used_twice", "number_left_out")
ANSWERS = ("correct", "incorrect", "any")
ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth")
COUNT_WORDS = ("no", "one", "two", "three", "four", "five", "six")

# ------------------------------------------------------------------------------------------------ voices
# Each voice has its own banks; a move is said in one of several forms. Placeholders are filled only with
# given or derived values.
BANKS: dict[str, dict[str, list[str]]] = {
    "terse": {
        "open": ["{nums} -> {T}.", "nums {nums}, want {T}.", "Have {nums}. Make {T}."],
        "step": ["{eq}. left {rest}.", "{eq} ({rest})", "{eq}; {rest} remain."],
        "finals": ["{x}, {y}: {options}.", "{options}."],
        "conclude": ["answer: {expr}", "so {expr}.", "-> {expr}"],
        "compare_fail": ["none is {goal}. nearest {c}: {diff}.", "no {goal}. best {c} ({diff})."],
        "confirm": ["{goal}. yes.", "{goal}, matches.", "that's {goal}. ok."],
        "check_step": ["check {inv}. ok.", "({inv}, ok)"],
        "final_check": ["verify: {chain}. ok.", "recheck {chain}. fine."],
        "give_up": ["out of tries. {c} is nearest ({diff}). going with it.",
                    "stop here with {c}; {diff}."],
        "recompute": ["recompute: {chain}.", "redo: {chain}."],
        "back_abandon": ["back to {need} from {pool}.", "again: {pool} -> {need}."],
        "abandon": ["back to {state}.", "try again from {state}.", "scrap that. {state} again."],
        "plan_forward": ["plan: pair two, then fold in the rest one at a time.",
                         "plan: merge two numbers, repeat until one is left."],
        "plan_backward": ["plan: pick the last operation, derive what the rest must make, repeat down to a pair.",
                          "plan: peel operations off the end until a pair is left."],
        "subgoal_pair": ["sub-goal: {a} and {b} into one number.", "sub-goal now: merge {a}, {b}."],
        "stage": ["[{num}] ", "{num}: "],
        "backward_intro": ["from {T} backwards.", "work back from {T}."],
        "back_need": ["{n} last ({form}): {eq}. need {need} from {pool}.",
                      "say {form}: {eq}, so {pool} -> {need}."],
        "back_split": ["{side_eq}; {form} last: {eq}. need {need} from {pool}.",
                       "pair off {c}, {d}: {side_eq}. say {form}: {eq}, so {pool} -> {need}."],
        "back_subgoal": ["sub-goal: {need} from {pool}.", "goal: {pool} -> {need}."],
    },
    "explanatory": {
        "open": ["We are given the numbers {nums} and must combine all of them to make {T}.",
                 "The task is to reach {T} using each of {nums} exactly once.",
                 "I have {nums}, and every one of them has to be used once to get {T}."],
        "step": ["Combining {a} and {b}: {eq}, which leaves {rest}.",
                 "I take {eq}; the numbers still available are {rest}.",
                 "With {eq}, what remains is {rest}.",
                 "Let me compute {eq}. That leaves {rest}."],
        "finals": ["From {x} and {y} I can get {options}.",
                   "The remaining two, {x} and {y}, give {options}.",
                   "Now only {x} and {y} are left: {options}."],
        "conclude": ["So the expression is {expr}.", "The final expression is {expr}.",
                     "Putting it together: {expr}."],
        "compare_fail": ["None of these equals {goal}; the nearest is {c}, since {diff}.",
                         "No result here is {goal}. The closest is {c}: {diff}, so it misses by {d}.",
                         "That does not produce {goal}: the best is {c}, and {diff}."],
        "confirm": ["That is exactly {goal}, as required.", "This equals {goal}, which is what I wanted.",
                    "{goal} is precisely the value asked for."],
        "check_step": ["To confirm that result, {inv}.", "Checking it with the inverse operation: {inv}, as it should be.",
                       "A quick check of that result: {inv}."],
        "final_check": ["Let me verify the whole expression: {chain}.",
                        "To double-check, I recompute it: {chain}.",
                        "Verifying from the beginning: {chain}. Everything is consistent."],
        "give_up": [("I have not found an exact solution, and {c} is the closest I reached ({diff}), so I will stop "
                    "there and give that expression."),
                    "Since no attempt has hit it exactly, I will settle for {c}; {diff}, so it is off by {d}."],
        "recompute": ["Recomputing that expression: {chain}.", "Working it through once more: {chain}."],
        "back_abandon": ["Let me return to the problem of making {need} from {pool} and try another option.",
                         "Going back to making {need} from {pool}.",
                         "I will try a different last operation for {need} from {pool}."],
        "abandon": ["Let me go back to {state} and try a different combination.",
                    "I will return to {state} and choose another pair this time.",
                    "Starting again from {state} with a different choice.",
                    "Let me abandon this line and go back to {state}."],
        "plan_forward": [("My plan is to combine two numbers into one, then bring in the remaining numbers one at a "
                         "time until a single value is left."),
                         ("I will break this into stages: merge a pair first, and then fold in each of the other "
                         "numbers in turn.")],
        "plan_backward": [("My plan is to decide which operation comes last, work out what the others must then "
                          "make, and repeat that until only a pair is left."),
                          ("I will split the problem from the end: choose the final operation, derive the value the "
                          "rest must produce, and solve that smaller problem the same way.")],
        "subgoal_pair": ["The sub-goal now is to turn {a} and {b} into a single number.",
                         "Sub-goal for this stage: merge {a} with {b}."],
        "stage": ["Stage {num}: ", "{Ord} stage: "],
        "backward_intro": ["I will reason backward, starting at {T}.",
                           "Let me work backwards, starting from {T}."],
        "back_need": ["If {n} is used last, as in {form}, then {eq}, so {pool} would have to make {need}.",
                      ("Suppose the last operation is {form}. Then {eq}, and the remaining {pool} must produce "
                      "{need}."),
                      "Taking {form} as the final operation means {eq}; so {pool} need to give {need}."],
        "back_split": [("Another possible ending pairs {c} with {d}: {side_eq}. If the last operation is {form}, "
                       "then {eq}, so {pool} would have to make {need}."),
                       ("Suppose {c} and {d} are combined on their own, {side_eq}, and the final operation is "
                       "{form}. Then {eq}, and {pool} must produce {need}.")],
        "back_subgoal": ["That gives a smaller sub-goal: make {need} from {pool}.",
                         "New sub-goal: obtain {need} using {pool}."],
    },
    "conversational": {
        "open": ["Okay, so I've got {nums} and I need {T}.", "Hmm, {nums}, and the goal is {T}. Let's see.",
                 "Alright: numbers {nums}, target {T}."],
        "step": ["Let me try {eq}. Then I've got {rest}.", "What about {eq}? That leaves {rest}.",
                 "How about {eq}, so now {rest}.", "Maybe {eq}. Now I have {rest}."],
        "finals": ["With {x} and {y} I can do {options}.", "So {x} and {y}: {options}.",
                   "Hmm, {x} and {y}: {options}."],
        "conclude": ["So my answer is {expr}.", "That gives the expression {expr}.", "So it's {expr}."],
        "compare_fail": ["Hmm, none of those is {goal}. The closest is {c}, but {diff}.",
                         "Nope, no {goal} there. {c} is the nearest, and {diff}.",
                         "That doesn't hit {goal}; {c} is nearest, and {diff}, so it's off by {d}."],
        "confirm": ["Oh nice, that's {goal}!", "Yes, that's exactly {goal}.", "That works, {goal}."],
        "check_step": ["Let me double-check: {inv}. Right.", "Sanity check, {inv}. Good."],
        "final_check": ["Let me check the whole thing again: {chain}. Yep.",
                        "Just to be sure: {chain}. Looks right."],
        "give_up": ["I'm not finding it exactly. {c} is the best I've got ({diff}), so I'll go with that.",
                    "Okay, I'll stop here with {c}, even though {diff}."],
        "recompute": ["Let me work it out again: {chain}.", "Redoing it: {chain}."],
        "back_abandon": ["Let me go back to making {need} from {pool}.", "Hmm, back to getting {need} out of {pool}.",
                         "Okay, {need} from {pool} again, some other way."],
        "abandon": ["Let me go back to {state} and try something else.", "Hmm, back to {state}.",
                    "Okay, let me start over from {state}.", "Let me try a different pair from {state}."],
        "plan_forward": ["Let me plan this: first squash two numbers together, then add in the others one by one.",
                         "Plan: combine a pair first, then deal with the rest one number at a time."],
        "plan_backward": [("Here's my plan: pick what goes last, figure out what the rest has to make, and keep "
                          "going down until there's a pair."),
                          "Plan: work out the last step first, then the one before it, down to two numbers."],
        "subgoal_pair": ["Mini-goal: get {a} and {b} into one number.", "Sub-goal: combine {a} and {b}."],
        "stage": ["Part {num}: ", "{Ord} part: "],
        "backward_intro": ["Let me work backwards from {T}.", "Maybe go backwards from {T}."],
        "back_need": ["What if {n} goes last, like {form}? Then {eq}, so {pool} has to make {need}.",
                      "If it ends with {form}, then {eq}. So I'd need {need} out of {pool}."],
        "back_split": [("What if {c} and {d} go together, {side_eq}, and it ends with {form}? Then {eq}, so {pool} "
                        "has to make {need}."),
                       ("Or pair up {c} and {d}: {side_eq}, and finish with {form}. Then {eq}, so I'd need {need} "
                        "out of {pool}.")],
        "back_subgoal": ["So the sub-goal is {need} from {pool}.", "Mini-goal: {pool} to {need}."],
    },
}


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


def _n(value) -> str:
    value = Fraction(value)
    return str(value.numerator) if value.denominator == 1 else f"{value.numerator}/{value.denominator}"


def _listing(values) -> str:
    return ", ".join(_n(v) for v in values)


def _eq(a, op, b, r) -> str:
    return f"{_n(a)} {op} {_n(b)} = {_n(r)}"


def _diff(c, goal) -> tuple[str, str]:
    """The equation that states how far c is from goal, and the distance."""
    big, small = (c, goal) if c >= goal else (goal, c)
    return _eq(big, "-", small, big - small), _n(big - small)


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
class _Pool:
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


def _strip(expr: str) -> str:
    if expr.startswith("("):
        depth = 0
        for k, c in enumerate(expr):
            depth += c == "("
            depth -= c == ")"
            if depth == 0:
                return expr[1:-1] if k == len(expr) - 1 else expr
    return expr


# ------------------------------------------------------------------------------------------ the writer
class _Narrator:
    def __init__(self, problem: Problem, behaviors, voice: str, rng: random.Random):
        self.problem, self.behaviors, self.voice, self.rng = problem, behaviors, voice, rng
        self.lines: list[str] = []
        self.stage_form = rng.choice(BANKS[voice]["stage"])  # one label style per trace

    def say(self, key: str, **kw) -> None:
        self.lines.append(self.rng.choice(BANKS[self.voice][key]).format(**kw))

    def step(self, a, op, b, r, rest, index: int) -> None:
        text = self.rng.choice(BANKS[self.voice]["step"]).format(a=_n(a), b=_n(b), eq=_eq(a, op, b, r),
                                                                 rest=_listing(rest))
        if S in self.behaviors and index < len(ORDINALS):
            ordinal = ORDINALS[index]
            label = self.stage_form.format(num=COUNT_WORDS[index + 1], Ord=ordinal.capitalize())
            text = label + (text[0].lower() + text[1:] if label.endswith(", ") else text)
        self.lines.append(text)

    def check_step(self, a, op, b, r) -> None:
        inverse = {"+": ("-", b), "-": ("+", b), "*": ("/", b), "/": ("*", b)}[op]
        if op in "*/" and b == 0:
            return
        self.say("check_step", inv=_eq(r, inverse[0], inverse[1], a))

    def options(self, x, y, tried) -> str:
        return ", ".join(_eq(p, op, q, r) for p, op, q, r in tried)


def _bound(problem: Problem) -> Fraction:
    return Fraction(3 * max(problem.target, *problem.numbers))


def write_trace(
    problem: Problem,
    behaviors: frozenset[Behavior] | set[Behavior],
    rng: random.Random,
    answers: str = "correct",
    strategy: str | None = None,
    max_dead_ends: int = 3,
    integer_division: bool = True,
    voice: str | None = None,
) -> Trace:
    """Narrate a search for `problem` with exactly `behaviors` on, in one of VOICES.

    answers="correct": the search reaches the target. "incorrect": the trace ends in one natural failure
    (see FAILURES; slips, a number used twice and a number left out only without verification, whose
    checks would catch them). "any": the search has a budget of attempts (one without backtracking) and
    answers the nearest miss when the budget runs out, so accuracy is the search's own."""
    if answers not in ANSWERS:
        raise ValueError(f"answers must be one of {', '.join(ANSWERS)}, got {answers!r}")
    behaviors = frozenset(behaviors)
    voice = voice or rng.choice(VOICES)
    if voice not in VOICES:
        raise ValueError(f"unknown voice {voice!r}; use {', '.join(VOICES)}")
    strategy = strategy or rng.choice(STRATEGIES)
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown search strategy {strategy!r}; use {' or '.join(STRATEGIES)}")
    budget = rng.randint(1, max_dead_ends) if B in behaviors else 0
    if answers == "correct":
        outcomes = ["correct"]
    elif answers == "any":
        outcomes = ["budget"]
    else:
        slips = ["carry", "borrow", "swapped_digits"]
        outcomes = ["near_miss"] + (slips if C not in behaviors or V not in behaviors else [])
        if C not in behaviors and V not in behaviors:
            outcomes += ["number_used_twice", "number_left_out"]
        rng.shuffle(outcomes)
    last_error = None
    for outcome in outcomes:
        for _ in range(6 if outcome in ("correct", "budget") else 2):
            search_rng = random.Random(rng.random())
            try:
                if C in behaviors:
                    return _backward(problem, behaviors, rng, search_rng, outcome, budget, voice, integer_division)
                return _forward(problem, behaviors, rng, search_rng, outcome, strategy, budget, voice,
                                integer_division)
            except TraceError as error:
                last_error = error
    raise TraceError(str(last_error))


def _finish(problem, behaviors, narrator: _Narrator, expr: str, strategy: str, dead_ends: int, failure, voice):
    expr = _strip(expr)
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


def _sensible_finals(x, y, goal, bound, integer_division, rng):
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


def _leaf_lines(finals, goal, rng, hit: bool):
    """The options a leaf lists: up to three tried ones, the hit (when there is one) last."""
    hits = [f for f in finals if f[3] == goal]
    misses = [f for f in finals if f[3] != goal]
    tried = misses[: rng.randint(1, 3)] if not hit else misses[: rng.randint(0, 2)]
    return tried + hits[:1] if hit else tried


def _forward(problem, behaviors, rng, search_rng, outcome, strategy, budget, voice, integer_division) -> Trace:
    T = Fraction(problem.target)
    bound = _bound(problem)
    leaves = list(islice(search_leaves(problem.numbers, problem.target, strategy, search_rng, integer_division), 600))

    def sensible(leaf):
        return all(0 < s.result <= bound for s in leaf.path)

    hit_index = next((k for k, leaf in enumerate(leaves) if leaf.solution is not None), None)
    if hit_index is None:
        raise TraceError(f"{problem.numbers} cannot reach {problem.target}")
    miss_at = [k for k, leaf in enumerate(leaves) if leaf.solution is None and sensible(leaf)
               and _sensible_finals(*leaf.values, T, bound, integer_division, random.Random(0))]
    misses = [leaves[k] for k in miss_at]
    hit = leaves[hit_index]
    before_hit = [leaves[k] for k in miss_at if k < hit_index]
    failure = None
    final_steps: list[tuple] = []  # (a, op, b, claimed r) of the last attempt, from the start
    slip_at = None
    leaf_kind = "hit"

    if outcome == "budget":
        outcome = "correct" if len(before_hit) <= budget else "near_miss"
    if outcome == "correct":
        dead = before_hit[:budget]
        if B in behaviors and not dead:
            raise TraceError("the search reached the target without a dead end to narrate")
        final_steps = [(s.left, s.op, s.right, s.result) for s in hit.path]
        final_leaf = hit.values
    elif outcome == "near_miss":
        if len(misses) < budget + 1:
            raise TraceError("too few sensible misses")
        dead = misses[:budget]
        pool = misses[budget: budget + 40]
        best = min(pool, key=lambda leaf: min(abs(f[3] - T) for f in _sensible_finals(*leaf.values, T, bound,
                                                                                       integer_division,
                                                                                       random.Random(0))))
        final_steps = [(s.left, s.op, s.right, s.result) for s in best.path]
        final_leaf = best.values
        failure, leaf_kind = "near_miss", "nearest"
    elif outcome in ("carry", "borrow", "swapped_digits"):
        dead = before_hit[:budget]
        start = _common(dead[-1].path, hit.path) if dead else 0
        steps = [(s.left, s.op, s.right, s.result) for s in hit.path]
        places = [k for k in range(start, len(steps)) if outcome in SLIPS_FOR[steps[k][1]]]
        rng.shuffle(places)
        for k in places:
            a, op, b, r = steps[k]
            w = slip_value(outcome, a, op, b, r, rng)
            if w is None or w == r or w <= 0:
                continue
            values = list(hit.path[k].remaining)
            values[values.index(r)] = w
            prefix = steps[:k] + [(a, op, b, w)]
            if len(values) == 2:
                final_steps, final_leaf = prefix, tuple(values)
            else:
                cont = next((leaf for leaf in islice(search_leaves(tuple(values), problem.target, strategy,
                                                                   random.Random(rng.random()), integer_division), 200)
                             if all(0 < s.result <= bound for s in leaf.path)), None)
                if cont is None:
                    continue
                final_steps = prefix + [(s.left, s.op, s.right, s.result) for s in cont.path]
                final_leaf = cont.values
            if not _sensible_finals(*final_leaf, T, bound, integer_division, random.Random(0)):
                continue
            slip_at, failure, leaf_kind = k, outcome, "nearest"
            break
        if failure is None:
            raise TraceError(f"no {outcome} slip fits this solution")
    elif outcome == "number_used_twice":
        dead = misses[:budget]
        if B in behaviors and not dead:
            raise TraceError("no dead end to narrate")
        for leaf in misses[budget:]:
            x, y = leaf.values
            pool = _Pool(problem.numbers)
            for s in leaf.path:
                pool.combine(s.left, s.op, s.right, s.result)
            found = None
            for u in dict.fromkeys(Fraction(n) for n in problem.numbers):
                if u == y:
                    continue
                for op in "+-*/":
                    if apply(op, x, u, integer_division) == T:
                        found = (x, op, u)
                        break
                if found:
                    break
            if found and leaf.path:
                narrator = _open(problem, behaviors, voice, rng)
                _narrate_dead_ends(narrator, problem, dead, T, bound, integer_division, behaviors, rng)
                start = _common(dead[-1].path, leaf.path) if dead else 0
                if dead:
                    narrator.say("abandon", state=_state(problem, leaf.path[:start]))
                for k, s in enumerate(leaf.path[start:], start):
                    narrator.step(s.left, s.op, s.right, s.result, s.remaining, k)
                narrator.say("finals", x=_n(x), y=_n(found[2]), options=_eq(x, found[1], found[2], T))
                expr = f"{pool.expr_of(x)} {found[1]} {_n(found[2])}"
                return _finish(problem, behaviors, narrator, expr, strategy, len(dead), outcome, voice)
        raise TraceError("no number can be used twice to reach the target")
    elif outcome == "number_left_out":
        dead = misses[:budget]
        if B in behaviors and not dead:
            raise TraceError("no dead end to narrate")
        for leaf in leaves[hit_index:] + leaves[:hit_index]:
            path = leaf.path
            k = next((k for k, s in enumerate(path) if s.result == T), None)
            if k is None or leaf in dead:
                continue
            narrator = _open(problem, behaviors, voice, rng)
            _narrate_dead_ends(narrator, problem, dead, T, bound, integer_division, behaviors, rng)
            start = min(_common(dead[-1].path, path) if dead else 0, k)
            if dead:
                narrator.say("abandon", state=_state(problem, path[:start]))
            pool = _Pool(problem.numbers)
            for j, s in enumerate(path[: k + 1]):
                if j >= start:
                    narrator.step(s.left, s.op, s.right, s.result, s.remaining, j)
                pool.combine(s.left, s.op, s.right, s.result)
            return _finish(problem, behaviors, narrator, pool.expr_of(T), strategy, len(dead), outcome, voice)
        raise TraceError("no subset of the numbers reaches the target")
    else:
        raise ValueError(f"unknown outcome {outcome!r}")
    if B in behaviors and not dead:
        raise TraceError("no dead end to narrate before this attempt")

    narrator = _open(problem, behaviors, voice, rng)
    _narrate_dead_ends(narrator, problem, dead, T, bound, integer_division, behaviors, rng)
    previous = dead[-1].path if dead else ()
    start = _common(previous, final_steps) if dead else 0
    if dead:
        narrator.say("abandon", state=_state(problem, previous[:start]))
    if S in behaviors and start < len(final_steps):
        a, _, b, _ = final_steps[start]
        narrator.say("subgoal_pair", a=_n(a), b=_n(b))
    values = [Fraction(n) for n in problem.numbers]
    pool = _Pool(problem.numbers)
    for k, (a, op, b, r) in enumerate(final_steps):
        values.remove(a)
        values.remove(b)
        values.append(r)
        pool.combine(a, op, b, r)
        if k >= start:
            narrator.step(a, op, b, r, values, k)
            if V in behaviors and k != slip_at and rng.random() < 0.4:
                narrator.check_step(a, op, b, r)
    x, y = final_leaf
    finals = _sensible_finals(x, y, T, bound, integer_division, rng)
    if leaf_kind == "hit" and not any(f[3] == T for f in finals):  # the solution's own last step, whatever its size
        finals.append((hit.solution.left, hit.solution.op, hit.solution.right, T))
    if any(f[3] == T for f in finals):  # the target (or, after a slip, what the trace believes is the target)
        tried, reached = _leaf_lines(finals, T, rng, hit=True), True
    else:
        nearest = min(finals, key=lambda f: abs(f[3] - T))
        tried, reached = [f for f in finals if f != nearest][: rng.randint(0, 2)] + [nearest], False
    last = tried[-1]
    narrator.say("finals", x=_n(x), y=_n(y), options=narrator.options(x, y, tried))
    pool.combine(last[0], last[1], last[2], last[3])
    expr = pool.expr_of(last[3])
    # A check recomputes only what it can confirm: never the slipped step, nor anything built before it.
    chain = [(a, op, b, r) for k, (a, op, b, r) in enumerate(final_steps) if slip_at is None or k > slip_at]
    chain.append(last)
    if V in behaviors:
        if reached:
            narrator.say("confirm", goal=_n(T))
            if rng.random() < 0.7:
                narrator.say("final_check", chain=", ".join(_eq(*c) for c in chain))
        else:
            c = last[3]
            diff, d = _diff(c, T)
            if rng.random() < 0.5:
                narrator.say("recompute", chain=", ".join(_eq(*c) for c in chain))
            narrator.say("give_up", c=_n(c), diff=diff, d=d)
    return _finish(problem, behaviors, narrator, expr, strategy, len(dead), failure, voice)


def _as_tuple(step):
    return (step.left, step.op, step.right, step.result) if hasattr(step, "left") else tuple(step)


def _common(a, b) -> int:
    k = 0
    while k < len(a) and k < len(b) and _as_tuple(a[k]) == _as_tuple(b[k]):
        k += 1
    return k


def _state(problem: Problem, path) -> str:
    if not path:
        return f"the start ({_listing(problem.numbers)})"
    return _listing(path[-1].remaining)


def _open(problem: Problem, behaviors, voice: str, rng: random.Random) -> _Narrator:
    narrator = _Narrator(problem, behaviors, voice, rng)
    narrator.say("open", nums=_listing(problem.numbers), T=problem.target)
    if S in behaviors:
        narrator.say("plan_backward" if C in behaviors else "plan_forward")
    if C in behaviors:
        narrator.say("backward_intro", T=problem.target)
    return narrator


def _narrate_dead_ends(narrator, problem, dead, T, bound, integer_division, behaviors, rng) -> None:
    previous = ()
    for attempt, leaf in enumerate(dead):
        start = _common(previous, leaf.path)
        if attempt:
            narrator.say("abandon", state=_state(problem, leaf.path[:start]))
        if S in behaviors and start < len(leaf.path):
            s = leaf.path[start]
            narrator.say("subgoal_pair", a=_n(s.left), b=_n(s.right))
        for k in range(start, len(leaf.path)):
            s = leaf.path[k]
            narrator.step(s.left, s.op, s.right, s.result, s.remaining, k)
            if V in behaviors and rng.random() < 0.25:
                narrator.check_step(s.left, s.op, s.right, s.result)
        x, y = leaf.values
        tried = _leaf_lines(_sensible_finals(x, y, T, bound, integer_division, rng), T, rng, hit=False)
        narrator.say("finals", x=_n(x), y=_n(y), options=narrator.options(x, y, tried))
        if V in behaviors:
            c = min((f[3] for f in tried), key=lambda r: abs(r - T))
            diff, d = _diff(c, T)
            narrator.say("compare_fail", goal=_n(T), c=_n(c), diff=diff, d=d)
        previous = leaf.path


# ------------------------------------------------------------------------------------------ backward search
INVERSE = {"+": "-", "-": "+", "*": "/", "/": "*"}


class _Back(NamedTuple):
    """One backward step: the last operation joins X, what the rest must make, with `n`: a given number, or (with
    `side`, a pair of given numbers (c, op, d)) the value c op d = n, so that a solution shaped (a op b) op (c op d)
    is reached backward too. X op n = goal, or n op X = goal when `flipped` (n - X, n / X)."""

    goal: Fraction
    n: Fraction
    op: str
    need: Fraction  # X as the trace derives it (after a slip, the slipped value)
    side: tuple | None = None
    flipped: bool = False

    def used(self) -> list:
        return [self.side[0], self.side[2]] if self.side else [self.n]

    def need_equation(self) -> tuple:
        """The equation that derives X from the goal: goal INVERSE[op] n = X, or n op goal = X when flipped."""
        return (self.n, self.op, self.goal, self.need) if self.flipped else (self.goal, INVERSE[self.op], self.n, self.need)

    def form(self) -> str:
        return f"{_n(self.n)} {self.op} X" if self.flipped else f"X {self.op} {_n(self.n)}"


@dataclass
class _BLeaf:
    chain: tuple  # (_Back, ...), from the target down to the pair
    pair: tuple
    goal: Fraction  # what the pair must make (as the trace derived it)


def _rest(pool, chain) -> list:
    """The numbers of `pool` the backward steps in `chain` have not used."""
    rest = list(pool)
    for step in chain:
        for m in step.used():
            rest.remove(m)
    return rest


def _backward_ends(goal, n, side, integer_division) -> list:
    """Every backward step whose last operation joins X with n: X op n = goal, and n - X / n / X = goal."""
    out = []
    for op in "+-*/":
        if op in "*/" and n == 1:
            continue
        out.append(_Back(goal, n, op, apply(INVERSE[op], goal, n, integer_division), side))
        if op in "-/":
            out.append(_Back(goal, n, op, apply(op, n, goal, integer_division), side, True))
    return out


def _backward_leaves(goal, pool, chain, rng, bound, integer_division):
    if len(pool) == 2:
        yield _BLeaf(tuple(chain), tuple(pool), goal)
        return
    ends = []
    for n in dict.fromkeys(pool):
        ends += _backward_ends(goal, n, None, integer_division)
    if len(pool) >= 4:  # a pair of numbers on one side still leaves a pair (or more) for the other
        for i in range(len(pool)):
            for j in range(i + 1, len(pool)):
                for c, d in dict.fromkeys(((pool[i], pool[j]), (pool[j], pool[i]))):
                    for op in "+-*/":
                        if (op in "+*" and c > d) or (op in "*/" and 1 in (c, d)):
                            continue
                        q = apply(op, c, d, integer_division)
                        if q is not None and 0 < q <= bound:
                            ends += _backward_ends(goal, q, (c, op, d), integer_division)
    ends = list(dict.fromkeys(ends))
    rng.shuffle(ends)
    for step in ends:
        if step.need is None or not 0 < step.need <= bound:
            continue
        yield from _backward_leaves(step.need, _rest(pool, [step]), [*chain, step], rng, bound, integer_division)


def _built_back(chain, value, integer_division) -> Fraction | None:
    """The value a pair's result gives once the chain's operations are applied forward; None when a step leaves the
    positive numbers."""
    for step in reversed(chain):
        value = apply(step.op, *((step.n, value) if step.flipped else (value, step.n)), integer_division)
        if value is None or value <= 0:
            return None
    return value


def _pair_finals(pair, goal, bound, integer_division, rng):
    return _sensible_finals(pair[0], pair[1], goal, max(bound, goal), integer_division, rng)


def _backward(problem, behaviors, rng, search_rng, outcome, budget, voice, integer_division) -> Trace:
    T = Fraction(problem.target)
    bound = _bound(problem)
    start_pool = [Fraction(n) for n in problem.numbers]
    leaves = list(islice(_backward_leaves(T, start_pool, [], search_rng, bound, integer_division), 800))
    hit_of = {id(leaf): any(f[3] == leaf.goal for f in _pair_finals(leaf.pair, leaf.goal, bound, integer_division,
                                                                     random.Random(0))) for leaf in leaves}
    miss_at = [k for k, leaf in enumerate(leaves) if not hit_of[id(leaf)]
               and _pair_finals(leaf.pair, leaf.goal, bound, integer_division, random.Random(0))]
    misses = [leaves[k] for k in miss_at]
    hit_index = next((k for k, leaf in enumerate(leaves) if hit_of[id(leaf)]), None)
    failure = None
    if outcome == "budget":
        if hit_index is None:
            outcome = "near_miss"
        else:
            outcome = "correct" if sum(1 for k in miss_at if k < hit_index) <= budget else "near_miss"
    if outcome == "correct":
        if hit_index is None:
            raise TraceError("working backward, no chain of steps reaches the target")
        dead = [leaves[k] for k in miss_at if k < hit_index][:budget]
        if B in behaviors and not dead:
            raise TraceError("the backward search reached the target without a dead end to narrate")
        final, kind = leaves[hit_index], "hit"
    elif outcome == "near_miss":
        if len(misses) < budget + 1:
            raise TraceError("too few sensible misses")
        dead = misses[:budget]
        # The answer is built forward from the pair's nearest result: only misses whose nearest results (all of
        # them, when several are as near) still build back to a positive value can end the trace.
        candidates = []
        for leaf in misses[budget: budget + 40]:
            finals = _pair_finals(leaf.pair, leaf.goal, bound, integer_division, random.Random(0))
            gap = min(abs(f[3] - leaf.goal) for f in finals)
            if all(_built_back(leaf.chain, f[3], integer_division) for f in finals if abs(f[3] - leaf.goal) == gap):
                candidates.append((gap, leaf))
        if not candidates:
            raise TraceError("no near miss builds back to a positive value")
        final = min(candidates, key=lambda c: c[0])[1]
        failure, kind = "near_miss", "nearest"
    elif outcome in ("carry", "borrow", "swapped_digits"):
        if hit_index is None:
            raise TraceError("no backward solution to slip in")
        dead = [leaves[k] for k in miss_at if k < hit_index][:budget]
        solution = leaves[hit_index]
        start = _common(dead[-1].chain, solution.chain) if dead else 0
        final = None
        for j in range(start, len(solution.chain)):
            step = solution.chain[j]
            w = slip_value(outcome, *step.need_equation(), rng)
            if w is None or w == step.need or not 0 < w <= bound:
                continue
            rest = _rest(start_pool, solution.chain[: j + 1])
            chain = [*solution.chain[:j], step._replace(need=w)]
            cont = next(iter(_backward_leaves(w, rest, chain, random.Random(rng.random()), bound,
                                              integer_division)), None)
            if cont is not None and _pair_finals(cont.pair, cont.goal, bound, integer_division, random.Random(0)):
                final, kind, failure = cont, "slip", outcome
                break
        if final is None:
            raise TraceError(f"no {outcome} slip fits this backward solution")
    else:
        raise TraceError(f"{outcome} is not narrated by the backward search")
    if B in behaviors and not dead:
        raise TraceError("no dead end to narrate before this attempt")

    narrator = _open(problem, behaviors, voice, rng)
    previous: tuple = ()
    for attempt, leaf in enumerate([*dead, final]):
        start = _common(previous, leaf.chain)
        if attempt and start == 0:
            narrator.say("abandon", state=f"the start ({_listing(problem.numbers)})")
        elif attempt:
            rest = _rest(start_pool, leaf.chain[:start])
            narrator.say("back_abandon", need=_n(leaf.chain[start - 1].need), pool=_listing(rest))
        for k in range(start, len(leaf.chain)):
            step, rest = leaf.chain[k], _listing(_rest(start_pool, leaf.chain[: k + 1]))
            said = {"form": step.form(), "eq": _eq(*step.need_equation()), "need": _n(step.need), "pool": rest}
            if step.side:  # the pair's value is stated before the step uses it
                c, op, d = step.side
                narrator.say("back_split", c=_n(c), d=_n(d), side_eq=_eq(c, op, d, step.n), **said)
            else:
                narrator.say("back_need", n=_n(step.n), **said)
            if S in behaviors:
                narrator.say("back_subgoal", need=_n(step.need), pool=rest)
        finals = _pair_finals(leaf.pair, leaf.goal, bound, integer_division, rng)
        x, y = leaf.pair
        if leaf is final and kind != "nearest":
            hits = [f for f in finals if f[3] == leaf.goal]
            if not hits:
                if kind == "slip":
                    kind = "nearest"
                else:
                    raise TraceError("the last pair does not reach its goal")
        if leaf is final and kind in ("hit", "slip"):
            tried = _leaf_lines(finals, leaf.goal, rng, hit=True)
        elif leaf is final:
            nearest = min(finals, key=lambda f: abs(f[3] - leaf.goal))
            tried = [f for f in finals if f != nearest][: rng.randint(0, 2)] + [nearest]
        else:
            tried = _leaf_lines(finals, leaf.goal, rng, hit=False)
        narrator.say("finals", x=_n(x), y=_n(y), options=narrator.options(x, y, tried))
        if V in behaviors:
            if leaf is final and kind == "hit":
                narrator.say("confirm", goal=_n(leaf.goal))
            elif leaf is not final:
                c = min((f[3] for f in tried), key=lambda r: abs(r - leaf.goal))
                diff, d = _diff(c, leaf.goal)
                narrator.say("compare_fail", goal=_n(leaf.goal), c=_n(c), diff=diff, d=d)
        previous = leaf.chain
    # Rebuild forward from the last pair: the answer, and (verification) the recomputation.
    last = tried[-1]
    expr, value = f"({_n(last[0])} {last[1]} {_n(last[2])})", last[3]
    chain = [last]
    for step in reversed(final.chain):
        side = _n(step.n)
        if step.side:
            c, op, d = step.side
            chain.append((c, op, d, step.n))
            side = f"({_n(c)} {op} {_n(d)})"
        new = apply(step.op, *((step.n, value) if step.flipped else (value, step.n)), integer_division)
        if new is None or new <= 0:
            raise TraceError("the nearest pair does not build back to a positive value")
        chain.append((step.n, step.op, value, new) if step.flipped else (value, step.op, step.n, new))
        expr = f"({side} {step.op} {expr})" if step.flipped else f"({expr} {step.op} {side})"
        value = new
    if V in behaviors:
        if kind == "hit":
            if rng.random() < 0.8:
                narrator.say("final_check", chain=", ".join(_eq(*c) for c in chain))
        else:
            narrator.say("recompute", chain=", ".join(_eq(*c) for c in chain))
            diff, d = _diff(value, T)
            narrator.say("give_up", c=_n(value), diff=diff, d=d)
    return _finish(problem, behaviors, narrator, expr, "backward", len(dead), failure, voice)


# ------------------------------------------------------------------------------------------ the teacher prompt
DESCRIPTIONS = {
    V: "verification: compare intermediate results with the target and recompute the final expression",
    B: "backtracking: when a path fails, return to an earlier state and try another combination",
    S: "subgoal setting: state a plan and the intermediate stages, then follow them",
    C: "backward chaining: start from the target and derive what the last operation needs from the others",
}
OMIT = {
    V: "Omit every evaluation: never compare a result with the target, never say a result is close, right, wrong "
       "or not the target; state each result and, at the end, the answer.",
    B: "Make a single attempt: never abandon a path or go back to an earlier state.",
    S: "Do not announce a plan, stages or intermediate targets.",
    C: "Reason forward from the numbers only; never work back from the target.",
}
EXAMPLE_PROBLEMS = (Problem((6, 4, 3), 30, "(6 + 4) * 3"), Problem((8, 5, 2, 7), 45, "(7 + 8) * (5 - 2)"))


def teacher_messages(problem: Problem, behaviors: frozenset[Behavior], answers: str = "correct",
                     examples: int = 2) -> list[dict]:
    """Chat messages for a teacher model: the chosen behaviors asked for, each of the others with its own
    omission rule, and few-shot examples written by the symbolic writer with the same behaviors."""
    behaviors = frozenset(behaviors)
    system = [("You write the reasoning of someone solving a Countdown puzzle, inside <think> </think>, "
              "followed by the final expression inside <answer> </answer>. Every equation you write must be "
              "arithmetically true.")]
    wanted = [DESCRIPTIONS[b] for b in Behavior if b in behaviors]
    if wanted:
        system.append("Show these behaviors explicitly:\n- " + "\n- ".join(wanted))
    rules = [OMIT[b] for b in Behavior if b not in behaviors]
    if rules:
        system.append("Rules:\n- " + "\n- ".join(rules))
    if answers == "incorrect":
        system.append("End with a wrong final answer that comes from a natural failure, such as one plausible "
                      "arithmetic slip (a dropped carry, a forgotten borrow, swapped digits) or stopping at a near "
                      "miss; every other equation stays true" + (", and any check you write must not claim the "
                                                                  "slip is right." if V in behaviors else "."))
    shots = []
    for k, example in enumerate(EXAMPLE_PROBLEMS[:examples]):
        try:
            trace = write_trace(example, behaviors, random.Random(k), "correct" if answers != "incorrect" else answers,
                                voice="explanatory")
        except TraceError:
            continue
        shots += [{"role": "user", "content": countdown_question(example)},
                  {"role": "assistant", "content": f"<think>\n{trace.text}\n</think>\n<answer> {trace.answer} </answer>"}]
    return [{"role": "system", "content": "\n\n".join(system)}, *shots,
            {"role": "user", "content": countdown_question(problem)}]


def countdown_question(problem: Problem) -> str:
    """The user turn of the TinyZero Countdown prompt (with 'exactly once', which the verifier enforces)."""
    return (
        f"Using the numbers {list(problem.numbers)}, create an equation that equals {problem.target}. "
        "You can use basic arithmetic operations (+, -, *, /) and each number must be used exactly once. "
        "Show your work in <think> </think> tags. And return the final answer in <answer> </answer> tags, "
        "for example <answer> (1 + 2) / 3 </answer>."
    )

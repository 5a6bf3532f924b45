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
from fractions import Fraction
from itertools import islice

from curate.behaviors import Behavior
from curate.builders.trace_backward import backward_trace
from curate.builders.trace_narration import (
    SLIPS_FOR,
    ExpressionPool,
    Trace,
    TraceError,
    difference,
    equation,
    finish_trace,
    leaf_lines,
    narrate_dead_ends,
    number_text,
    open_narration,
    sensible_finals,
    shared_steps,
    slip_value,
    state_text,
    value_bound,
)
from curate.builders.trace_phrases import ANSWERS, DESCRIPTIONS, OMIT, STRATEGIES, VOICES, B, C, S, V
from curate.puzzles.countdown import Problem, apply, search_leaves


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
                    return backward_trace(problem, behaviors, rng, search_rng, outcome, budget, voice, integer_division)
                return _forward(problem, behaviors, rng, search_rng, outcome, strategy, budget, voice,
                                integer_division)
            except TraceError as error:
                last_error = error
    raise TraceError(str(last_error))


def _forward(problem, behaviors, rng, search_rng, outcome, strategy, budget, voice, integer_division) -> Trace:
    T = Fraction(problem.target)
    bound = value_bound(problem)
    leaves = list(islice(search_leaves(problem.numbers, problem.target, strategy, search_rng, integer_division), 600))

    def sensible(leaf):
        return all(0 < s.result <= bound for s in leaf.path)

    hit_index = next((k for k, leaf in enumerate(leaves) if leaf.solution is not None), None)
    if hit_index is None:
        raise TraceError(f"{problem.numbers} cannot reach {problem.target}")
    miss_at = [k for k, leaf in enumerate(leaves) if leaf.solution is None and sensible(leaf)
               and sensible_finals(*leaf.values, T, bound, integer_division, random.Random(0))]
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
        best = min(pool, key=lambda leaf: min(abs(f[3] - T) for f in sensible_finals(*leaf.values, T, bound,
                                                                                       integer_division,
                                                                                       random.Random(0))))
        final_steps = [(s.left, s.op, s.right, s.result) for s in best.path]
        final_leaf = best.values
        failure, leaf_kind = "near_miss", "nearest"
    elif outcome in ("carry", "borrow", "swapped_digits"):
        dead = before_hit[:budget]
        start = shared_steps(dead[-1].path, hit.path) if dead else 0
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
            if not sensible_finals(*final_leaf, T, bound, integer_division, random.Random(0)):
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
            pool = ExpressionPool(problem.numbers)
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
                narrator = open_narration(problem, behaviors, voice, rng)
                narrate_dead_ends(narrator, problem, dead, T, bound, integer_division, behaviors, rng)
                start = shared_steps(dead[-1].path, leaf.path) if dead else 0
                if dead:
                    narrator.say("abandon", state=state_text(problem, leaf.path[:start]))
                for k, s in enumerate(leaf.path[start:], start):
                    narrator.step(s.left, s.op, s.right, s.result, s.remaining, k)
                narrator.say("finals", x=number_text(x), y=number_text(found[2]),
                             options=equation(x, found[1], found[2], T))
                expr = f"{pool.expr_of(x)} {found[1]} {number_text(found[2])}"
                return finish_trace(problem, behaviors, narrator, expr, strategy, len(dead), outcome, voice)
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
            narrator = open_narration(problem, behaviors, voice, rng)
            narrate_dead_ends(narrator, problem, dead, T, bound, integer_division, behaviors, rng)
            start = min(shared_steps(dead[-1].path, path) if dead else 0, k)
            if dead:
                narrator.say("abandon", state=state_text(problem, path[:start]))
            pool = ExpressionPool(problem.numbers)
            for j, s in enumerate(path[: k + 1]):
                if j >= start:
                    narrator.step(s.left, s.op, s.right, s.result, s.remaining, j)
                pool.combine(s.left, s.op, s.right, s.result)
            return finish_trace(problem, behaviors, narrator, pool.expr_of(T), strategy, len(dead), outcome, voice)
        raise TraceError("no subset of the numbers reaches the target")
    else:
        raise ValueError(f"unknown outcome {outcome!r}")
    if B in behaviors and not dead:
        raise TraceError("no dead end to narrate before this attempt")

    narrator = open_narration(problem, behaviors, voice, rng)
    narrate_dead_ends(narrator, problem, dead, T, bound, integer_division, behaviors, rng)
    previous = dead[-1].path if dead else ()
    start = shared_steps(previous, final_steps) if dead else 0
    if dead:
        narrator.say("abandon", state=state_text(problem, previous[:start]))
    if S in behaviors and start < len(final_steps):
        a, _, b, _ = final_steps[start]
        narrator.say("subgoal_pair", a=number_text(a), b=number_text(b))
    values = [Fraction(n) for n in problem.numbers]
    pool = ExpressionPool(problem.numbers)
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
    finals = sensible_finals(x, y, T, bound, integer_division, rng)
    if leaf_kind == "hit" and not any(f[3] == T for f in finals):  # the solution's own last step, whatever its size
        finals.append((hit.solution.left, hit.solution.op, hit.solution.right, T))
    if any(f[3] == T for f in finals):  # the target (or, after a slip, what the trace believes is the target)
        tried, reached = leaf_lines(finals, T, rng, hit=True), True
    else:
        nearest = min(finals, key=lambda f: abs(f[3] - T))
        tried, reached = [f for f in finals if f != nearest][: rng.randint(0, 2)] + [nearest], False
    last = tried[-1]
    narrator.say("finals", x=number_text(x), y=number_text(y), options=narrator.options(x, y, tried))
    pool.combine(last[0], last[1], last[2], last[3])
    expr = pool.expr_of(last[3])
    # A check recomputes only what it can confirm: never the slipped step, nor anything built before it.
    chain = [(a, op, b, r) for k, (a, op, b, r) in enumerate(final_steps) if slip_at is None or k > slip_at]
    chain.append(last)
    if V in behaviors:
        if reached:
            narrator.say("confirm", goal=number_text(T))
            if rng.random() < 0.7:
                narrator.say("final_check", chain=", ".join(equation(*c) for c in chain))
        else:
            c = last[3]
            diff, d = difference(c, T)
            if rng.random() < 0.5:
                narrator.say("recompute", chain=", ".join(equation(*c) for c in chain))
            narrator.say("give_up", c=number_text(c), diff=diff, d=d)
    return finish_trace(problem, behaviors, narrator, expr, strategy, len(dead), failure, voice)


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

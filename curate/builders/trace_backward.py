"""The backward-chaining search narrated: a last operation is chosen, what the other numbers must make is derived
from the target, and so on down to a last pair (write_trace's writer when backward chaining is on)."""

from __future__ import annotations

import random
from dataclasses import dataclass
from fractions import Fraction
from itertools import islice
from typing import NamedTuple

from curate.builders.trace_narration import (
    Trace,
    TraceError,
    difference,
    equation,
    finish_trace,
    leaf_lines,
    listing,
    number_text,
    open_narration,
    sensible_finals,
    shared_steps,
    slip_value,
    value_bound,
)
from curate.builders.trace_phrases import B, S, V
from curate.puzzles.countdown import apply

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
        return f"{number_text(self.n)} {self.op} X" if self.flipped else f"X {self.op} {number_text(self.n)}"


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
    return sensible_finals(pair[0], pair[1], goal, max(bound, goal), integer_division, rng)


def backward_trace(problem, behaviors, rng, search_rng, outcome, budget, voice, integer_division) -> Trace:
    T = Fraction(problem.target)
    bound = value_bound(problem)
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
        start = shared_steps(dead[-1].chain, solution.chain) if dead else 0
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

    narrator = open_narration(problem, behaviors, voice, rng)
    previous: tuple = ()
    for attempt, leaf in enumerate([*dead, final]):
        start = shared_steps(previous, leaf.chain)
        if attempt and start == 0:
            narrator.say("abandon", state=f"the start ({listing(problem.numbers)})")
        elif attempt:
            rest = _rest(start_pool, leaf.chain[:start])
            narrator.say("back_abandon", need=number_text(leaf.chain[start - 1].need), pool=listing(rest))
        for k in range(start, len(leaf.chain)):
            step, rest = leaf.chain[k], listing(_rest(start_pool, leaf.chain[: k + 1]))
            said = {"form": step.form(), "eq": equation(*step.need_equation()), "need": number_text(step.need),
                    "pool": rest}
            if step.side:  # the pair's value is stated before the step uses it
                c, op, d = step.side
                narrator.say("back_split", c=number_text(c), d=number_text(d), side_eq=equation(c, op, d, step.n),
                             **said)
            else:
                narrator.say("back_need", n=number_text(step.n), **said)
            if S in behaviors:
                narrator.say("back_subgoal", need=number_text(step.need), pool=rest)
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
            tried = leaf_lines(finals, leaf.goal, rng, hit=True)
        elif leaf is final:
            nearest = min(finals, key=lambda f: abs(f[3] - leaf.goal))
            tried = [f for f in finals if f != nearest][: rng.randint(0, 2)] + [nearest]
        else:
            tried = leaf_lines(finals, leaf.goal, rng, hit=False)
        narrator.say("finals", x=number_text(x), y=number_text(y), options=narrator.options(x, y, tried))
        if V in behaviors:
            if leaf is final and kind == "hit":
                narrator.say("confirm", goal=number_text(leaf.goal))
            elif leaf is not final:
                c = min((f[3] for f in tried), key=lambda r: abs(r - leaf.goal))
                diff, d = difference(c, leaf.goal)
                narrator.say("compare_fail", goal=number_text(leaf.goal), c=number_text(c), diff=diff, d=d)
        previous = leaf.chain
    # Rebuild forward from the last pair: the answer, and (verification) the recomputation.
    last = tried[-1]
    expr, value = f"({number_text(last[0])} {last[1]} {number_text(last[2])})", last[3]
    chain = [last]
    for step in reversed(final.chain):
        side = number_text(step.n)
        if step.side:
            c, op, d = step.side
            chain.append((c, op, d, step.n))
            side = f"({number_text(c)} {op} {number_text(d)})"
        new = apply(step.op, *((step.n, value) if step.flipped else (value, step.n)), integer_division)
        if new is None or new <= 0:
            raise TraceError("the nearest pair does not build back to a positive value")
        chain.append((step.n, step.op, value, new) if step.flipped else (value, step.op, step.n, new))
        expr = f"({side} {step.op} {expr})" if step.flipped else f"({expr} {step.op} {side})"
        value = new
    if V in behaviors:
        if kind == "hit":
            if rng.random() < 0.8:
                narrator.say("final_check", chain=", ".join(equation(*c) for c in chain))
        else:
            narrator.say("recompute", chain=", ".join(equation(*c) for c in chain))
            diff, d = difference(value, T)
            narrator.say("give_up", c=number_text(value), diff=diff, d=d)
    return finish_trace(problem, behaviors, narrator, expr, "backward", len(dead), failure, voice)

"""Symbolic trace writer: narrates the Countdown solver's own search with each behavior switched on or off.

The search (`search_leaves`, depth-first in a seeded order or best-first toward the target, or
`search_levels`, breadth-first with a small seeded beam, narrated level by level) decides what happens; the templates only decide how it is said. Each behavior has its own phrase bank, and a
bank is used only when its behavior is on:
- backtracking: dead ends the search really visited, each closed and followed by a return to the
  last shared state (breadth-first: a failed pool on the frontier dropped, and a return to the next one);
- verification: results checked against the target, the final expression recomputed;
- subgoal setting: a plan, numbered steps and the intermediate value the last step needs;
- backward chaining: the target decomposed by each given number, and the solution stated from the end.
With every behavior off the trace is the solution path alone, in neutral words. The phrase banks are
worded so that the cue classifier finds a behavior only where its bank was used; the priming builder
still checks every trace and drops the ones where it does not.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from fractions import Fraction

from curate.behaviors import Behavior
from curate.puzzles.countdown import Leaf, Problem, Step, apply, check_expression, search_leaves, search_levels

V, B, S, C = Behavior.VERIFICATION, Behavior.BACKTRACKING, Behavior.SUBGOAL_SETTING, Behavior.BACKWARD_CHAINING

VARIANTS: dict[str, frozenset[Behavior]] = {
    "all_strategies": frozenset({V, B, S, C}),
    "only_backtracking": frozenset({B}),
    "backtracking_verification": frozenset({B, V}),
    "backtracking_subgoal": frozenset({B, S}),
    "backtracking_backward": frozenset({B, C}),
    "negative_control": frozenset(),
}
SYMBOLS = {"+": "+", "-": "-", "*": "*", "/": "/"}

OPENING = [
    "The numbers are {nums} and the target is {T}.",
    "Numbers available: {nums}. Target: {T}.",
    "I have {nums}, and the result should be {T}.",
    "Given {nums}, the expression has to come out as {T}.",
    "We have {nums} to combine into {T}.",
    "Available: {nums}. The value wanted is {T}.",
]
STEP = [
    "{a} {op} {b} = {r}, leaving {rest}.",
    "Combine {a} and {b}: {a} {op} {b} = {r}. Remaining: {rest}.",
    "Take {a} {op} {b} = {r}; the numbers left are {rest}.",
    "{a} {op} {b} = {r}, so the pool is now {rest}.",
    "Using {a} {op} {b} = {r} leaves {rest}.",
]
FINALS = [
    "With {x} and {y}: {options}.",
    "From {x} and {y} the options are {options}.",
    "Now {x} and {y} are left: {options}.",
]
HIT = [
    "With {x} and {y}: {x} {op} {y} = {T}.",
    "{x} {op} {y} = {T}, which is the target.",
    "That leaves {x} and {y}, and {x} {op} {y} = {T}.",
]
CONCLUSION = [
    "So the expression is {expr}.",
    "The answer is {expr}.",
    "So {expr} is the answer.",
    "Written as one expression: {expr}.",
]
# --- backtracking
DEAD_END = [
    "None of these is {T}, so this path is a dead end.",
    "No {T} here; that doesn't work.",
    "This attempt fails: nothing here equals {T}.",
    "The closest is {closest}, not {T}.",
    "That is not going to work, since none of them is {T}.",
    "Dead end: {T} is not among these.",
]
RETURN = [
    "Let me go back to {state} and try another combination.",
    "Backtracking to {state}.",
    "Going back to {state}.",
    "Let me backtrack to {state} and try something else.",
    "Back to {state}; let me try a different combination.",
    "Scratch that and return to {state}.",
]
# --- verification
CHECK_DEAD_END = [
    "Let me check these against {T}: no match.",
    "Checking each against {T}: none is equal.",
    "Let me verify: {T} does not appear among them.",
]
CHECK_HIT = [
    "{T} matches the target.",
    "Let me check that: {x} {op} {y} is {T}, the target.",
    "Checking: {x} {op} {y} = {T} ✓",
]
CHECK_FINAL = [
    "Let me verify the whole expression: {chain}. ✓",
    "Double-check: {chain}. That checks out.",
    "Quick check of {expr}: {chain}. ✓",
    "Let me recheck: {chain}, as expected.",
]
# --- subgoal setting
PLAN = [
    "Plan: combine two numbers into something useful, then finish with the rest.",
    "Here is the plan: build an intermediate value step by step, and finish with a last operation.",
    "I'll break this into smaller parts: one operation at a time, each making an intermediate value.",
    "My strategy is to split the problem into steps, one combination each.",
]
STEP_LABEL = ["Step {k}: ", "Step {k}. ", "Subgoal {k}: "]
INTERMEDIATE = [
    "The intermediate target is {x}: once I have {x}, {last} finishes it.",
    "Subgoal: produce {x} from {srcs}, then combine it with {y}.",
    "My next goal is {x} out of {srcs}; after that, {last}.",
]
# --- backward chaining
BACKWARD_PLAN = [
    "Working backwards from {T}: {options}.",
    "Reasoning backward from {T}, the last operation could use any one number: {options}.",
    "Let me work backwards from the goal {T}: {options}.",
]
BACKWARD_OPTION = [
    "with {n} last, the rest would need to give {need} ({how})",
    "if {n} comes last, the others must make {need} ({how})",
]
BACKWARD_HIT = [
    "To reach {T}, I need {x} and {y}, since {last} = {T}.",
    "Working back from {T}: {T} = {last}, so {x} has to come from {srcs}.",
    "I'd be done if I had {x}, because {last} = {T}.",
]


# --- breadth-first search (neutral words: used whatever the behaviors)
BFS_INTRO = [
    "I'll search breadth-first: all combinations of the pool, level by level, keeping a few promising pools each time.",
    "Breadth-first search: expand every pool on the frontier by one combination, keep the best few, repeat.",
    "Going level by level: each round combines two numbers in every kept pool, and a few of the results go on.",
    "A breadth-first pass: list the pools one combination away, keep a handful, and expand those together.",
]
LEVEL_LABEL = ["Level {k}: ", "Round {k}: ", "Depth {k}. "]
LEVEL_HEAD = [
    "{label}combinations from {parents}, among them:",
    "{label}expanding {parents} gives, for instance:",
    "{label}moves from {parents} include:",
]
PARENT = ["from {state}: {moves}", "{state} gives {moves}", "out of {state}: {moves}"]
CANDIDATE = ["{a} {op} {b} = {r} -> {rest}", "{a} {op} {b} = {r} (pool {rest})", "{a} {op} {b} = {r}, leaving {rest}"]
KEEP = [
    "Most promising: {kept}; these go on to the next level.",
    "Keeping {kept} on the frontier.",
    "The frontier for the next level: {kept}.",
    "I carry {kept} forward.",
]
SET_ASIDE = ["Less promising: {others}.", "Less useful for now: {others}.", "Set aside for now: {others}."]
FRONTIER_END = [
    "The frontier now holds pools of two: {kept}.",
    "Pools of two on the frontier: {kept}.",
    "Last level, pools of two: {kept}.",
]
PATH = ["That pool came from {chain}.", "The combinations behind it: {chain}.", "It was built by {chain}."]
# --- backtracking, breadth-first: a failed frontier pool is dropped and the search returns to the next
BFS_RETURN = [
    "Dropping that branch and going back to the frontier: {state} is next.",
    "That one doesn't work, so I drop it and go back to the frontier for {state}.",
    "Backtracking to the frontier: {state}.",
    "Let me drop this pool and return to {state} on the frontier.",
]


@dataclass
class Trace:
    text: str  # the reasoning inside <think> … </think>
    answer: str  # the expression inside <answer> … </answer>
    behaviors: frozenset[Behavior]
    strategy: str
    dead_ends: int
    answer_correct: bool
    notes: list[str] = field(default_factory=list)


class TraceError(ValueError):
    """The search cannot give the trace that was asked for (e.g. no wrong answer is reachable)."""


def _n(value: Fraction) -> str:
    return str(value.numerator) if value.denominator == 1 else f"{value.numerator}/{value.denominator}"


def _listing(values) -> str:
    return ", ".join(_n(Fraction(v)) for v in values)


class _Pool:
    """Values on the table, with the expression and the given numbers each one was built from."""

    def __init__(self, numbers: tuple[int, ...]):
        self.items = [(Fraction(n), str(n), (n,)) for n in numbers]

    def combine(self, step: Step, op: str | None = None) -> None:
        left = self._take(step.left)
        right = self._take(step.right)
        self.items.append((step.result, f"({left[1]} {op or step.op} {right[1]})", left[2] + right[2]))

    def sources(self, value: Fraction) -> tuple[int, ...]:
        return next(item[2] for item in self.items if item[0] == value)

    def expression(self) -> str:
        if len(self.items) != 1:
            raise TraceError("the path does not use every number")
        expr = self.items[0][1]
        return expr[1:-1] if expr.startswith("(") else expr

    def _take(self, value: Fraction):
        index = next(k for k, item in enumerate(self.items) if item[0] == value)
        return self.items.pop(index)


def _common_prefix(a: tuple[Step, ...], b: tuple[Step, ...]) -> int:
    k = 0
    while k < len(a) and k < len(b) and a[k] == b[k]:
        k += 1
    return k


def write_trace(
    problem: Problem,
    behaviors: frozenset[Behavior] | set[Behavior],
    rng: random.Random,
    answers: str = "correct",
    strategy: str | None = None,
    max_dead_ends: int = 3,
    integer_division: bool = True,
) -> Trace:
    """Narrate a search for `problem` with exactly `behaviors` on. answers="incorrect" puts one
    arithmetic slip in the solution path (an operator written wrongly, its result kept), so that the
    final answer is a well-formed expression over the numbers with a wrong value."""
    if answers not in ("correct", "incorrect"):
        raise ValueError(f"answers must be 'correct' or 'incorrect', got {answers!r}")
    behaviors = frozenset(behaviors)
    strategy = strategy or rng.choice(["dfs", "best_first", "bfs"])
    if strategy not in ("dfs", "best_first", "bfs"):
        raise ValueError(f"unknown search strategy {strategy!r}; use dfs, best_first or bfs")
    T = problem.target
    budget = rng.randint(1, max_dead_ends) if B in behaviors else 0
    if strategy == "bfs":
        trace = _bfs_trace(problem, behaviors, rng, answers, budget, integer_division)
        if trace is not None:
            return trace
        # Backtracking needs a failed pool on the last level; when every kept pool reaches the target the
        # trace falls back to a depth-first search, as for best-first.
        strategy = "dfs"
    dead_ends, solution = _search(problem, strategy, budget, rng, integer_division)
    if B in behaviors and not dead_ends:
        # Backtracking needs a dead end to narrate; a greedy search can walk straight to the answer,
        # so the trace falls back to a depth-first search in a new order.
        strategy = "dfs"
        for _ in range(8):
            dead_ends, solution = _search(problem, strategy, budget, rng, integer_division)
            if dead_ends:
                break
    full_path = solution.path + (Step(solution.solution.left, solution.solution.op, solution.solution.right,
                                      solution.solution.result, ()),)

    say = lambda bank, **kw: rng.choice(bank).format(**kw)  # noqa: E731 - local shorthand
    lines = [say(OPENING, nums=_listing(problem.numbers), T=T)]
    if C in behaviors:
        lines.append(_backward_plan(problem, rng))
    if S in behaviors:
        lines.append(say(PLAN))

    previous: tuple[Step, ...] = ()
    for attempt, leaf in enumerate(dead_ends):
        start = _common_prefix(previous, leaf.path)
        if attempt:
            lines.append(say(RETURN, state=_state(problem, leaf.path[:start])))
        lines += _steps(leaf.path, start, behaviors, rng)
        options = "; ".join(f"{_n(leaf.values[0])} {op} {_n(leaf.values[1])} = {_n(r)}"
                            for op, r in _final_options(leaf, integer_division))
        lines.append(say(FINALS, x=_n(leaf.values[0]), y=_n(leaf.values[1]), options=options))
        if V in behaviors:
            lines.append(say(CHECK_DEAD_END, T=T))
        closest = min((r for _, r in leaf.finals), key=lambda r: abs(r - T), default=leaf.values[0])
        lines.append(say(DEAD_END, T=T, closest=_n(closest)))
        previous = leaf.path

    start = _common_prefix(previous, solution.path)
    # The slip goes in a step this attempt narrates, so that the text and the answer agree.
    slip = _choose_slip(problem, full_path, start, rng, integer_division) if answers == "incorrect" else None
    if dead_ends:
        lines.append(say(RETURN, state=_state(problem, solution.path[:start])))
    last = solution.solution
    pool = _Pool(problem.numbers)
    for step in solution.path:
        pool.combine(step)
    x, y, op = _n(last.left), _n(last.right), last.op
    # The operand built from more of the given numbers is the intermediate value the plan names.
    inner, outer = sorted((last.left, last.right), key=lambda v: -len(pool.sources(v)))
    named = dict(T=T, x=_n(inner), y=_n(outer), last=f"{x} {op} {y}", srcs=_listing(pool.sources(inner)))
    if C in behaviors:
        lines.append(say(BACKWARD_HIT, **named))
    if S in behaviors and solution.path:
        lines.append(say(INTERMEDIATE, **named))
    lines += _steps(solution.path, start, behaviors, rng, slip=slip)
    final_op = slip[1] if slip and slip[0] == len(full_path) - 1 else op
    lines.append(say(HIT, x=x, y=y, op=final_op, T=T))
    if V in behaviors:
        lines.append(say(CHECK_HIT, x=x, y=y, op=final_op, T=T))

    pool = _Pool(problem.numbers)
    for k, step in enumerate(full_path):
        pool.combine(step, slip[1] if slip and slip[0] == k else None)
    expr = pool.expression()
    if V in behaviors:
        chain = ", ".join(
            f"{_n(s.left)} {slip[1] if slip and slip[0] == k else s.op} {_n(s.right)} = {_n(s.result)}"
            for k, s in enumerate(full_path)
        )
        lines.append(say(CHECK_FINAL, chain=chain, expr=expr))
    lines.append(say(CONCLUSION, expr=expr))

    check = check_expression(expr, problem.numbers, T)
    if check.status == "invalid":
        raise TraceError(f"the written answer {expr!r} is not valid: {check.reason}")
    return Trace(
        text="\n".join(lines),
        answer=expr,
        behaviors=behaviors,
        strategy=strategy,
        dead_ends=len(dead_ends),
        answer_correct=check.status == "correct",
    )


def _pool(values) -> str:
    return "[" + _listing(values) + "]"


def _bfs_trace(problem: Problem, behaviors: frozenset[Behavior], rng: random.Random, answers: str, budget: int,
               integer_division: bool) -> Trace | None:
    """A breadth-first trace: each level lists several pools one combination away from the kept ones, says
    which go on, and the last level's pools of two are tried in turn until one reaches the target. With
    backtracking on, `budget` failed pools (at least one) come first, each dropped with a return to the
    frontier; with it off the pool that reaches the target is tried first. None when backtracking is on
    and no kept pool fails."""
    T = problem.target
    for _ in range(4):  # backtracking needs a failed pool on the last level: search again in a new order
        levels, finals = search_levels(problem.numbers, T, random.Random(rng.random()), beam=rng.choice((2, 3)),
                                       integer_division=integer_division)
        misses = [leaf for leaf in finals if leaf.solution is None]
        if B not in behaviors or misses:
            break
    hit = next(leaf for leaf in finals if leaf.solution is not None)
    tried = misses[:budget] if B in behaviors else []
    if B in behaviors and not tried:
        return None
    last = hit.solution
    full_path = hit.path + (Step(last.left, last.op, last.right, last.result, ()),)
    slip = _choose_slip(problem, full_path, 0, rng, integer_division) if answers == "incorrect" else None
    op_at = lambda k: slip[1] if slip and slip[0] == k else full_path[k].op  # noqa: E731

    say = lambda bank, **kw: rng.choice(bank).format(**kw)  # noqa: E731 - local shorthand
    lines = [say(OPENING, nums=_listing(problem.numbers), T=T)]
    if C in behaviors:
        lines.append(_backward_plan(problem, rng))
    if S in behaviors:
        lines.append(say(PLAN))
    lines.append(say(BFS_INTRO))
    candidate, parent_form, label = rng.choice(CANDIDATE), rng.choice(PARENT), rng.choice(LEVEL_LABEL)
    parents: list[tuple[Step, ...]] = [()]
    start = tuple(Fraction(n) for n in problem.numbers)
    values_of = lambda path: path[-1].remaining if path else start  # noqa: E731
    for level in levels:
        k = level.depth
        kept = set(level.kept)
        extra = [p for p in level.candidates if p not in kept]
        shown = set(level.kept) | set(extra[: rng.randint(1, 2)])
        for parent in parents:  # every kept pool of the level before shows at least one of its moves
            children = [p for p in level.candidates if p[:-1] == parent]
            if children and not any(p in shown for p in children):
                shown.add(rng.choice(children))

        def show(path):
            step = path[-1]
            op = op_at(k - 1) if path == hit.path[:k] else step.op
            return candidate.format(a=_n(step.left), op=op, b=_n(step.right), r=_n(step.result),
                                    rest=_pool(step.remaining))

        groups = []
        for parent in parents:
            moves = [show(p) for p in level.candidates if p in shown and p[:-1] == parent]
            if moves:
                groups.append((parent, moves))
        head_label = rng.choice(STEP_LABEL).format(k=k) if S in behaviors else label.format(k=k)
        lines.append(say(LEVEL_HEAD, label=head_label, parents=" and ".join(_pool(values_of(p)) for p in parents)))
        if len(groups) == 1:
            lines += [f"- {move}" for move in groups[0][1]]
        else:
            lines += [f"- {parent_form.format(state=_pool(values_of(p)), moves='; '.join(moves))}" for p, moves in groups]
        kept_text = ", ".join(_pool(values_of(p)) for p in level.kept)
        set_aside = [p for p in level.candidates if p in shown and p not in kept]
        if k == len(levels):
            lines.append(say(FRONTIER_END, kept=kept_text))
        else:
            lines.append(say(KEEP, kept=kept_text))
        if set_aside:
            lines.append(say(SET_ASIDE, others=", ".join(_pool(values_of(p)) for p in set_aside)))
        parents = list(level.kept)

    for n, leaf in enumerate(tried):
        options = "; ".join(f"{_n(leaf.values[0])} {op} {_n(leaf.values[1])} = {_n(r)}"
                            for op, r in _final_options(leaf, integer_division))
        lines.append(say(FINALS, x=_n(leaf.values[0]), y=_n(leaf.values[1]), options=options))
        if V in behaviors:
            lines.append(say(CHECK_DEAD_END, T=T))
        closest = min((r for _, r in leaf.finals), key=lambda r: abs(r - T), default=leaf.values[0])
        lines.append(say(DEAD_END, T=T, closest=_n(closest)))
        following = tried[n + 1] if n + 1 < len(tried) else hit
        lines.append(say(BFS_RETURN, state=_pool(following.values)))

    pool = _Pool(problem.numbers)
    for step in hit.path:
        pool.combine(step)
    x, y, op = _n(last.left), _n(last.right), last.op
    inner, outer = sorted((last.left, last.right), key=lambda v: -len(pool.sources(v)))
    named = dict(T=T, x=_n(inner), y=_n(outer), last=f"{x} {op} {y}", srcs=_listing(pool.sources(inner)))
    if C in behaviors:
        lines.append(say(BACKWARD_HIT, **named))
    if S in behaviors and hit.path:
        lines.append(say(INTERMEDIATE, **named))
    final_op = op_at(len(full_path) - 1)
    lines.append(say(HIT, x=x, y=y, op=final_op, T=T))
    if V in behaviors:
        lines.append(say(CHECK_HIT, x=x, y=y, op=final_op, T=T))
    chain = ", ".join(f"{_n(s.left)} {op_at(k)} {_n(s.right)} = {_n(s.result)}" for k, s in enumerate(full_path))
    if hit.path:
        lines.append(say(PATH, chain=", ".join(
            f"{_n(s.left)} {op_at(k)} {_n(s.right)} = {_n(s.result)}" for k, s in enumerate(hit.path))))

    pool = _Pool(problem.numbers)
    for k, step in enumerate(full_path):
        pool.combine(step, op_at(k))
    expr = pool.expression()
    if V in behaviors:
        lines.append(say(CHECK_FINAL, chain=chain, expr=expr))
    lines.append(say(CONCLUSION, expr=expr))
    check = check_expression(expr, problem.numbers, T)
    if check.status == "invalid":
        raise TraceError(f"the written answer {expr!r} is not valid: {check.reason}")
    return Trace(text="\n".join(lines), answer=expr, behaviors=behaviors, strategy="bfs", dead_ends=len(tried),
                 answer_correct=check.status == "correct")


def _search(problem: Problem, strategy: str, budget: int, rng: random.Random, integer_division: bool):
    """The first `budget` dead ends the strategy visits, and the first solution it reaches."""
    dead_ends: list[Leaf] = []
    for leaf in search_leaves(problem.numbers, problem.target, strategy, random.Random(rng.random()), integer_division):
        if leaf.solution is not None:
            return dead_ends, leaf
        if len(dead_ends) < budget:
            dead_ends.append(leaf)
    raise TraceError(f"{problem.numbers} cannot reach {problem.target}")


def _steps(path: tuple[Step, ...], start: int, behaviors, rng: random.Random, slip=None) -> list[str]:
    lines = []
    for k in range(start, len(path)):
        step = path[k]
        op = slip[1] if slip and slip[0] == k else step.op
        text = rng.choice(STEP).format(a=_n(step.left), op=op, b=_n(step.right), r=_n(step.result),
                                       rest=_listing(step.remaining))
        if S in behaviors:
            text = rng.choice(STEP_LABEL).format(k=k + 1) + text
        lines.append(text)
    return lines


def _final_options(leaf: Leaf, integer_division: bool):
    x, y = leaf.values
    for op in ("+", "-", "*", "/"):
        result = apply(op, x, y, integer_division)
        if result is not None:
            yield op, result


def _state(problem: Problem, path: tuple[Step, ...]) -> str:
    if not path:
        return f"the start ({_listing(problem.numbers)})"
    return _listing(path[-1].remaining)


def _backward_plan(problem: Problem, rng: random.Random) -> str:
    T = Fraction(problem.target)
    options = []
    for n in dict.fromkeys(problem.numbers):
        n = Fraction(n)
        needs = [(T - n, f"{_n(T - n)} + {_n(n)}")] if T > n else []
        needs.append((T + n, f"{_n(T + n)} - {_n(n)}"))
        if T % n == 0:
            needs.append((T / n, f"{_n(T / n)} * {_n(n)}"))
        need, how = rng.choice(needs)
        options.append(rng.choice(BACKWARD_OPTION).format(n=_n(n), need=_n(need), how=how))
    return rng.choice(BACKWARD_PLAN).format(T=problem.target, options="; ".join(options))


def _choose_slip(problem: Problem, full_path: tuple[Step, ...], start: int, rng: random.Random, integer_division: bool):
    """(step index ≥ start, wrong operator) such that the written expression is well-formed and misses the target."""
    candidates = [(k, op) for k, step in enumerate(full_path) if k >= start for op in "+-*/" if op != step.op]
    rng.shuffle(candidates)
    for k, op in candidates:
        if apply(op, full_path[k].left, full_path[k].right, integer_division) is None:
            continue
        pool = _Pool(problem.numbers)
        for j, step in enumerate(full_path):
            pool.combine(step, op if j == k else None)
        if check_expression(pool.expression(), problem.numbers, problem.target).status == "wrong":
            return k, op
    raise TraceError(f"no single slip in the solution of {problem.numbers} -> {problem.target} gives a wrong answer")


def teacher_messages(problem: Problem, behaviors: frozenset[Behavior], answers: str = "correct") -> list[dict]:
    """Chat messages for a teacher model: the chosen behaviors asked for, the others forbidden."""
    descriptions = {
        V: "verification: check intermediate results and the final expression against the target",
        B: "backtracking: when a path fails, say so, go back to an earlier state and try another",
        S: "subgoal setting: state a plan and intermediate values to reach before the target",
        C: "backward chaining: start from the target and decompose it into what the last operation needs",
    }
    wanted = [descriptions[b] for b in Behavior if b in behaviors]
    forbidden = [descriptions[b].split(":")[0] for b in Behavior if b not in behaviors]
    system = ["You write the reasoning of someone solving a Countdown puzzle, inside <think> </think>, "
              "followed by the final expression inside <answer> </answer>."]
    if wanted:
        system.append("Show these behaviors explicitly:\n- " + "\n- ".join(wanted))
    if forbidden:
        system.append("Do not show any of these: " + ", ".join(forbidden) + ". Work straight through without them.")
    if answers == "incorrect":
        system.append("Make one arithmetic slip so that the final expression uses every number once but does not "
                      "equal the target; never point the slip out.")
    return [
        {"role": "system", "content": "\n\n".join(system)},
        {"role": "user", "content": countdown_question(problem)},
    ]


def countdown_question(problem: Problem) -> str:
    """The user turn of the TinyZero Countdown prompt (with 'exactly once', which the verifier enforces)."""
    return (
        f"Using the numbers {list(problem.numbers)}, create an equation that equals {problem.target}. "
        "You can use basic arithmetic operations (+, -, *, /) and each number must be used exactly once. "
        "Show your work in <think> </think> tags. And return the final answer in <answer> </answer> tags, "
        "for example <answer> (1 + 2) / 3 </answer>."
    )

"""Countdown: reach a target by combining every given number exactly once with + - * / and parentheses.

Three parts, all exact (fractions, never floats) and none of them executing text:
- `generate_problem`: numbers and a target that is solvable by construction, confirmed by `solve`;
- `solve` / `search_leaves`: the exhaustive search the symbolic trace writer narrates;
- `check_expression` / `score_countdown`: a verifier that walks the AST of a candidate answer, bounded in
  length and depth, and a reward built on it.
"""

from __future__ import annotations

import ast
import json
import random
import re
from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

DATA_SOURCE = "curate/countdown"

# Longer answers are not Countdown answers; the bound also keeps ast.parse away from pathological input
# (it recurses on nesting and its memory grows with length) before any parsing happens.
MAX_EXPRESSION_CHARS = 256
MAX_DEPTH = 24
# Only these characters may appear; this rejects unicode digits ("٣", "³"), names, attributes and calls
# before the parser sees them.
ALLOWED = re.compile(r"^[0-9+\-*/() \t]*$")
SYMBOLS = str.maketrans({"×": "*", "÷": "/", "−": "-", "–": "-", "·": "*"})
ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)

OPS = ("+", "-", "*", "/")
_AST_OPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/"}


@dataclass(frozen=True)
class Problem:
    numbers: tuple[int, ...]
    target: int
    solution: str  # one expression that reaches the target, found by `solve`

    @property
    def key(self) -> tuple[tuple[int, ...], int]:
        """Identity for deduplication and splitting: order of the numbers does not make a new problem."""
        return tuple(sorted(self.numbers)), self.target

    def ground_truth(self) -> dict:
        return {"numbers": list(self.numbers), "target": self.target}


def problem_statement(ground_truth: object) -> str | None:
    """A Countdown problem as the project's labeled sets show it above each trace ("Numbers: [48, 12, 9], target:
    45"), or None where `ground_truth` (a dict, or its JSON text) is not a Countdown problem."""
    if isinstance(ground_truth, str):
        try:
            ground_truth = json.loads(ground_truth)
        except ValueError:
            return None
    if not isinstance(ground_truth, dict):
        return None
    numbers, target = ground_truth.get("numbers"), ground_truth.get("target")
    if (not isinstance(numbers, list) or not numbers or not all(type(n) is int for n in numbers)
            or type(target) is not int):
        return None
    return f"Numbers: {json.dumps(numbers)}, target: {target}"


@dataclass(frozen=True)
class Check:
    status: str  # "correct", "wrong" (well-formed, other value) or "invalid"
    value: Fraction | None = None
    reason: str | None = None


@dataclass(frozen=True)
class Step:
    """One combination in a search path: left op right = result (operands as values)."""

    left: Fraction
    op: str
    right: Fraction
    result: Fraction
    remaining: tuple[Fraction, ...]  # values left after this step, result included


@dataclass(frozen=True)
class Leaf:
    """A state with two values left: the search either finishes there or it is a dead end."""

    path: tuple[Step, ...]  # steps from the start that produced this state
    values: tuple[Fraction, Fraction]
    finals: tuple[tuple[str, Fraction], ...]  # every legal last operation and its result
    solution: Step | None  # the last operation that hits the target, if any


def apply(op: str, a: Fraction, b: Fraction, integer_division: bool = True) -> Fraction | None:
    """The generator's and solver's rules: intermediates stay non-negative, division is exact
    (and integral when integer_division); None when the move is not allowed."""
    if op == "+":
        return a + b
    if op == "-":
        return a - b if a >= b else None
    if op == "*":
        return a * b
    if b == 0:
        return None
    quotient = a / b
    if integer_division and quotient.denominator != 1:
        return None
    return quotient


def _moves(values: tuple[Fraction, ...], integer_division: bool) -> Iterator[tuple[int, int, str, Fraction]]:
    for i in range(len(values)):
        for j in range(len(values)):
            if i == j:
                continue
            for op in OPS:
                # + and * commute: take each unordered pair once.
                if op in "+*" and i > j:
                    continue
                result = apply(op, values[i], values[j], integer_division)
                if result is not None:
                    yield i, j, op, result


def _fmt(value: Fraction) -> str:
    return str(value.numerator) if value.denominator == 1 else f"{value.numerator}/{value.denominator}"


def solve(numbers: tuple[int, ...] | list[int], target: int, integer_division: bool = True) -> str | None:
    """Exhaustive search: an expression using every number once that equals target, or None."""
    return _solve(tuple(sorted(Fraction(n) for n in numbers)), Fraction(target), integer_division)


@lru_cache(maxsize=65536)
def _solve(values: tuple[Fraction, ...], target: Fraction, integer_division: bool) -> str | None:
    exprs = tuple(_fmt(v) for v in values)
    return _solve_exprs(values, exprs, target, integer_division, {})


def _solve_exprs(values, exprs, target, integer_division, dead: dict) -> str | None:
    if len(values) == 1:
        return exprs[0] if values[0] == target else None
    key = tuple(sorted(values))
    if key in dead:
        return None
    for i, j, op, result in _moves(values, integer_division):
        rest = [k for k in range(len(values)) if k not in (i, j)]
        new_values = (*(values[k] for k in rest), result)
        expr = f"{exprs[i]} {op} {exprs[j]}"
        new_exprs = (*(exprs[k] for k in rest), expr if len(new_values) == 1 else f"({expr})")
        found = _solve_exprs(new_values, new_exprs, target, integer_division, dead)
        if found is not None:
            return found
    dead[key] = True
    return None


def generate_problem(
    rng: random.Random,
    n_numbers: int = 4,
    number_range: tuple[int, int] = (1, 99),
    target_range: tuple[int, int] = (10, 100),
    integer_division: bool = True,
    max_tries: int = 10_000,
) -> Problem:
    """Draw numbers, combine them all in a random order with random legal operations, and keep the
    result as the target when it is an integer inside target_range; the solver then confirms it."""
    if n_numbers < 2:
        raise ValueError("Countdown needs at least two numbers")
    lo, hi = number_range
    tlo, thi = target_range
    if lo < 1 or hi < lo or thi < tlo:
        raise ValueError(f"bad ranges: numbers {number_range}, target {target_range}")
    for _ in range(max_tries):
        numbers = tuple(rng.randint(lo, hi) for _ in range(n_numbers))
        values = [Fraction(n) for n in numbers]
        while len(values) > 1:
            i, j = rng.sample(range(len(values)), 2)
            op = rng.choice(OPS)
            result = apply(op, values[i], values[j], integer_division)
            if result is None:
                continue
            values = [v for k, v in enumerate(values) if k not in (i, j)] + [result]
        target = values[0]
        if target.denominator != 1 or not tlo <= target <= thi:
            continue
        solution = solve(numbers, int(target), integer_division)
        if solution is None:  # cannot happen under shared rules; the solver is the authority
            continue
        return Problem(numbers=numbers, target=int(target), solution=solution)
    raise ValueError(
        f"no solvable problem found in {max_tries} draws for {n_numbers} numbers in {number_range} "
        f"and targets in {target_range}; widen the target range"
    )


def search_leaves(
    numbers: tuple[int, ...], target: int, strategy: str = "dfs", rng: random.Random | None = None,
    integer_division: bool = True,
) -> Iterator[Leaf]:
    """The solver's search as the trace writer narrates it, yielding each two-value state in the
    order the strategy reaches it. dfs: moves in a seeded random order; best_first: moves whose
    result lies nearest the target first (the Stream-of-Search heuristic, greedy)."""
    if strategy not in ("dfs", "best_first", "bfs"):
        raise ValueError(f"unknown search strategy {strategy!r}; use dfs, best_first or bfs")
    rng = rng or random.Random(0)
    if strategy == "bfs":
        yield from search_levels(numbers, target, rng, integer_division=integer_division)[1]
        return
    goal = Fraction(target)
    start = tuple(Fraction(n) for n in numbers)

    def order(values):
        moves = list(_moves(values, integer_division))
        if strategy == "dfs":
            rng.shuffle(moves)
        else:
            moves.sort(key=lambda m: abs(m[3] - goal))
        return moves

    def walk(values, path):
        if len(values) == 2:
            finals = tuple((op, r) for i, j, op, r in _moves(values, integer_division))
            hit = next(
                (Step(values[i], op, values[j], r, (r,)) for i, j, op, r in _moves(values, integer_division) if r == goal),
                None,
            )
            yield Leaf(path=path, values=values, finals=finals, solution=hit)
            return
        for i, j, op, result in order(values):
            rest = tuple(values[k] for k in range(len(values)) if k not in (i, j)) + (result,)
            yield from walk(rest, path + (Step(values[i], op, values[j], result, rest),))

    if len(start) < 2:
        raise ValueError("Countdown needs at least two numbers")
    yield from walk(start, ())


@dataclass(frozen=True)
class Level:
    """One level of a breadth-first (beam) search: the states one more combination reaches from the
    states kept at the level before, and the few of them kept for the next level."""

    depth: int
    candidates: tuple[tuple[Step, ...], ...]  # paths to every distinct pool generated at this level
    kept: tuple[tuple[Step, ...], ...]  # the beam carried on (always includes the solution's state)


def _leaf(values: tuple[Fraction, ...], path: tuple[Step, ...], goal: Fraction, integer_division: bool) -> Leaf:
    moves = list(_moves(values, integer_division))
    hit = next((Step(values[i], op, values[j], r, (r,)) for i, j, op, r in moves if r == goal), None)
    return Leaf(path=path, values=values, finals=tuple((op, r) for _, _, op, r in moves), solution=hit)


def search_levels(
    numbers: tuple[int, ...], target: int, rng: random.Random | None = None, beam: int = 3,
    integer_division: bool = True,
) -> tuple[list[Level], list[Leaf]]:
    """Breadth-first search with a small seeded beam, as in Stream of Search: every pool one combination
    away from the kept pools forms the next level; the pool on a solution path (found by the exhaustive
    solver) is always kept, so the search reaches the target, and the others kept are drawn from the pools
    whose values lie nearest the target. Returns the levels and the kept two-value states (in a seeded
    order) of the last level; at least one of them reaches the target."""
    rng = rng or random.Random(0)
    goal = Fraction(target)
    start = tuple(Fraction(n) for n in numbers)
    if len(start) < 2:
        raise ValueError("Countdown needs at least two numbers")
    solution = next((leaf for leaf in search_leaves(numbers, target, "dfs", random.Random(rng.random()),
                                                    integer_division) if leaf.solution is not None), None)
    if solution is None:
        raise ValueError(f"{numbers} cannot reach {target}")
    levels: list[Level] = []
    kept: list[tuple[Step, ...]] = [()]
    for depth in range(1, len(start) - 1):
        on_path = solution.path[:depth]
        seen = {tuple(sorted(on_path[-1].remaining))}
        candidates = [on_path]
        for path in kept:
            values = path[-1].remaining if path else start
            for i, j, op, result in _moves(values, integer_division):
                rest = tuple(values[k] for k in range(len(values)) if k not in (i, j)) + (result,)
                key = tuple(sorted(rest))
                if key not in seen:
                    seen.add(key)
                    candidates.append(path + (Step(values[i], op, values[j], result, rest),))
        others = sorted(candidates[1:], key=lambda p: (min(abs(v - goal) for v in p[-1].remaining), rng.random()))
        pool = others[: beam + 1]
        chosen = [on_path] + rng.sample(pool, min(beam - 1, len(pool)))
        rng.shuffle(chosen)
        rng.shuffle(candidates)
        levels.append(Level(depth, tuple(candidates), tuple(chosen)))
        kept = chosen
    finals = [_leaf(path[-1].remaining if path else start, path, goal, integer_division) for path in kept]
    return levels, finals


def expression_of(numbers: tuple[int, ...], steps: tuple[Step, ...]) -> str:
    """The answer expression a path of steps builds, fully parenthesised except at the top."""
    pool: list[tuple[Fraction, str]] = [(Fraction(n), str(n)) for n in numbers]
    for step in steps:
        left = next(k for k, (v, _) in enumerate(pool) if v == step.left)
        left_item = pool.pop(left)
        right = next(k for k, (v, _) in enumerate(pool) if v == step.right)
        right_item = pool.pop(right)
        pool.append((step.result, f"({left_item[1]} {step.op} {right_item[1]})"))
    if len(pool) != 1:
        raise ValueError("the steps do not use every number")
    expr = pool[0][1]
    return expr[1:-1] if expr.startswith("(") and expr.endswith(")") else expr


# ---------------------------------------------------------------------------------------------- verifier


def check_expression(expression: str, numbers: list[int] | tuple[int, ...], target: int) -> Check:
    """Verify a candidate answer without executing it: characters whitelisted, length and depth
    bounded, the AST walked with exact fractions, and the multiset of literals equal to numbers."""
    if not isinstance(expression, str):
        return Check("invalid", reason="answer is not a string")
    text = expression.translate(SYMBOLS).strip()
    if "=" in text:
        # "(1 + 2) * 3 = 9": the claimed value is not part of the expression.
        text = text.split("=", 1)[0].strip()
    if not text:
        return Check("invalid", reason="empty expression")
    if len(text) > MAX_EXPRESSION_CHARS:
        return Check("invalid", reason=f"expression longer than {MAX_EXPRESSION_CHARS} characters")
    if not ALLOWED.match(text):
        bad = sorted({c for c in text if not ALLOWED.match(c)})
        return Check("invalid", reason=f"characters not allowed: {''.join(bad)!r}")
    if "**" in text or "//" in text:
        return Check("invalid", reason="only + - * / are allowed")
    if _paren_depth(text) > MAX_DEPTH:
        return Check("invalid", reason=f"nesting deeper than {MAX_DEPTH}")
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as error:
        return Check("invalid", reason=f"not an arithmetic expression: {type(error).__name__}")
    used: list[int] = []
    try:
        value = _evaluate(tree.body, used, 0)
    except _Invalid as error:
        return Check("invalid", reason=str(error))
    if sorted(used) != sorted(int(n) for n in numbers):
        return Check("invalid", value=value, reason=f"numbers used {sorted(used)} are not the given {sorted(numbers)}")
    return Check("correct" if value == target else "wrong", value=value)


class _Invalid(Exception):
    pass


def _paren_depth(text: str) -> int:
    depth = deepest = 0
    for c in text:
        if c == "(":
            depth += 1
            deepest = max(deepest, depth)
        elif c == ")":
            depth -= 1
    return deepest


def _evaluate(node: ast.AST, used: list[int], depth: int) -> Fraction:
    if depth > MAX_DEPTH:
        raise _Invalid(f"nesting deeper than {MAX_DEPTH}")
    if isinstance(node, ast.Constant) and type(node.value) is int:
        used.append(node.value)
        return Fraction(node.value)
    if isinstance(node, ast.BinOp) and type(node.op) in _AST_OPS:
        left = _evaluate(node.left, used, depth + 1)
        right = _evaluate(node.right, used, depth + 1)
        op = _AST_OPS[type(node.op)]
        if op == "/" and right == 0:
            raise _Invalid("division by zero")
        if op == "+":
            return left + right
        if op == "-":
            return left - right
        return left * right if op == "*" else left / right
    if isinstance(node, ast.UnaryOp):
        raise _Invalid("signs are not allowed: every number must be one of the given ones")
    raise _Invalid(f"{type(node).__name__} is not allowed")


def extract_answer(solution_str: str) -> str | None:
    """The last <answer>…</answer> in the text (a prompt's own example answer comes earlier)."""
    matches = ANSWER_TAG.findall(solution_str or "")
    return matches[-1].strip() if matches else None


def score_countdown(solution_str: str, ground_truth: dict, format_score: float = 0.0) -> float | None:
    """1.0 when the last <answer> uses every given number once and equals the target; format_score when it
    is a well-formed expression over the numbers with another value; 0.0 when it is missing or malformed;
    None when the ground truth itself is unusable (the sample cannot be scored)."""
    try:
        numbers = [int(n) for n in ground_truth["numbers"]]
        target = int(ground_truth["target"])
    except (KeyError, TypeError, ValueError):
        return None
    answer = extract_answer(solution_str)
    if answer is None:
        return 0.0
    check = check_expression(answer, numbers, target)
    if check.status == "correct":
        return 1.0
    return format_score if check.status == "wrong" else 0.0


def wrong_expression(problem: Problem, rng: random.Random, integer_division: bool = True, tries: int = 200) -> str:
    """A well-formed expression over the problem's numbers whose value is not the target."""
    for _ in range(tries):
        items = [(Fraction(n), str(n)) for n in problem.numbers]
        while len(items) > 1:
            i, j = rng.sample(range(len(items)), 2)
            op = rng.choice(OPS)
            result = apply(op, items[i][0], items[j][0], integer_division)
            if result is None:
                continue
            expr = f"({items[i][1]} {op} {items[j][1]})"
            items = [it for k, it in enumerate(items) if k not in (i, j)] + [(result, expr)]
        if items[0][0] != problem.target:
            expr = items[0][1]
            return expr[1:-1] if expr.startswith("(") else expr
    raise ValueError(f"every combination of {problem.numbers} reaches {problem.target}")

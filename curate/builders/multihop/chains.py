"""Chains drawn from the source pool: a link puts the previous hop's answer in place of one number of the next
problem and is accepted only when the re-executed problem stays sound (check_link); every refused link and every
abandoned chain is written with its reason."""

from __future__ import annotations

import bisect
import json
import random
import re
from dataclasses import dataclass
from fractions import Fraction

from curate.builders.arith import ExpressionError, format_number, written_in_words
from curate.builders.multihop.sources import SourceProblem
from curate.builders.multihop.stats import MultihopStats
from curate.console import ProgressBar
from curate.errors import InputError, OptionError

MAX_HOPS = 8


@dataclass
class Hop:
    problem: SourceProblem
    given: int | None  # index of the replaced given; None for a chain's first hop
    value: Fraction | None  # the previous hop's answer put in its place
    answer: Fraction


def parse_hop_range(text: str) -> tuple[int, int]:
    """'3' -> (3, 3); '2-4' -> (2, 4). Chains need at least 2 hops."""
    match = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", text)
    if not match:
        raise OptionError(f"--hops {text!r}: expected a number of hops or a range such as 2-4")
    low = int(match.group(1))
    high = int(match.group(2) or low)
    if not 2 <= low <= high <= MAX_HOPS:
        raise OptionError(f"--hops {text!r}: need 2 <= low <= high <= {MAX_HOPS}")
    return low, high


def check_link(problem: SourceProblem, given: int, value: Fraction,
               max_ratio: float) -> tuple[str | None, Fraction | None]:
    """Put `value` in place of given `given` and re-execute. Returns (reason, None) when the link is
    invalid, else (None, the new answer)."""
    solution = problem.solution
    original = solution.givens[given].value
    if value <= 0:
        return "substitute_not_positive", None
    if original.denominator == 1 and value.denominator != 1:
        return "substitute_not_whole", None
    if not 1 / max_ratio <= value / original <= max_ratio:
        return "substitute_out_of_range", None
    fed = solution.steps_fed_by(given)
    # The values the substitution changes: a copy of one of them used outside the annotations (plain-text
    # arithmetic, "half of it") or standing for another quantity would keep its old value there.
    changed = {original} | {solution.values[i] for i in fed}
    if changed & solution.plain.operands:
        return "value_in_unannotated_arithmetic", None
    if any(lit.kind == "const" and lit.value in solution.plain.results
           for i in fed for lit in solution.steps[i].literals):
        return "unannotated_result_in_annotation", None
    try:
        values = solution.execute({given: value})
        # A link is only a link if the answer moves with the value put in.
        other = solution.execute({given: value + 1})
    except ExpressionError:
        return "division_by_zero", None
    if other[solution.answer_step] == values[solution.answer_step]:
        return "answer_ignores_substitute", None
    # Literals are linked to their source by value: a changed intermediate equal to another given or to another
    # result could be either one where it is used next.
    others = {g.value for i, g in enumerate(solution.givens) if i != given}
    unchanged_steps = {v for i, v in enumerate(solution.values) if i not in fed}
    fed_values = [solution.values[i] for i in fed]
    if set(fed_values) & (others | unchanged_steps) or len(set(fed_values)) < len(fed_values):
        return "changed_value_has_another_meaning", None
    if written_in_words(original, problem.question):
        return "replaced_value_also_in_words", None
    for old, new in zip(solution.values, values):
        if (old > 0) != (new > 0) or (old < 0) != (new < 0):
            return "intermediate_sign_changed", None
        if old.denominator == 1 and new.denominator != 1:
            return "intermediate_not_whole", None
        if old != 0 and not 1 / max_ratio <= abs(new / old) <= max_ratio:
            return "intermediate_out_of_range", None
    answer = values[solution.answer_step]
    if format_number(answer) is None:
        return "answer_not_terminating_decimal", None
    return None, answer


class ChainBuilder:
    """Draws chains at random; a link's candidates are the givens within `max_ratio` of the previous
    answer (found by bisection over all givens sorted by value), tried in random order."""

    def __init__(self, problems: list[SourceProblem], seed: int = 0, max_ratio: float = 10.0, tries_per_link: int = 64):
        if max_ratio <= 1:
            raise OptionError("max_ratio must be greater than 1")
        self.problems = problems
        self.rng = random.Random(seed)
        self.max_ratio = max_ratio
        self.tries_per_link = tries_per_link
        slots = sorted(
            (float(p.solution.givens[g].value), i, g) for i, p in enumerate(problems) for g in p.slots
        )
        self.slot_values = [value for value, _, _ in slots]
        self.slot_refs = [(i, g) for _, i, g in slots]
        starts = [i for i, p in enumerate(problems) if p.solution.answer > 0]
        self.rng.shuffle(starts)
        self.starts = starts
        self.next_start = 0

    def _first_hop(self) -> Hop:
        # Cycle through a shuffled order so that first hops spread over the whole pool.
        problem = self.problems[self.starts[self.next_start % len(self.starts)]]
        self.next_start += 1
        return Hop(problem, None, None, problem.solution.answer)

    def _link(self, previous: Hop, used: set[str], attempt: int, stats: MultihopStats, link_rejects) -> Hop | str:
        value = previous.answer
        low = bisect.bisect_left(self.slot_values, float(value) / self.max_ratio)
        high = bisect.bisect_right(self.slot_values, float(value) * self.max_ratio)
        if low >= high:
            return "no_given_in_range"
        proposals = 0
        for _ in range(self.tries_per_link * 4):
            if proposals >= self.tries_per_link:
                break
            problem_index, given = self.slot_refs[self.rng.randrange(low, high)]
            problem = self.problems[problem_index]
            if problem.id in used:
                continue
            proposals += 1
            stats.link_proposals += 1
            reason, answer = check_link(problem, given, value, self.max_ratio)
            if reason is None:
                stats.links_accepted += 1
                return Hop(problem, given, value, answer)
            stats.link_rejects[reason] += 1
            link_rejects.write(json.dumps({
                "reason": reason, "chain_attempt": attempt, "from_source_id": previous.problem.id,
                "to_source_id": problem.id, "replaced": problem.solution.givens[given].text,
                "substituted_value": format_number(value),
            }) + "\n")
        return "no_valid_link" if proposals else "only_used_sources_in_range"

    def build(self, n: int, hops: tuple[int, int], stats: MultihopStats, link_rejects, chain_rejects,
              progress: bool = True, max_attempts: int | None = None) -> list[list[Hop]]:
        if not self.starts:
            raise InputError("no usable source problem with a positive answer")
        if not self.slot_values:
            raise InputError("no source problem has a number that a previous answer could replace")
        max_attempts = max_attempts or 10 * n + 100
        chains: list[list[Hop]] = []
        with ProgressBar("chains", total=n, enabled=progress, unit="chain") as bar:
            while len(chains) < n and stats.chain_attempts < max_attempts:
                attempt = stats.chain_attempts
                stats.chain_attempts += 1
                k = self.rng.randint(*hops)
                chain = [self._first_hop()]
                used = {chain[0].problem.id}
                while len(chain) < k:
                    hop = self._link(chain[-1], used, attempt, stats, link_rejects)
                    if isinstance(hop, str):
                        stats.chain_rejects[hop] += 1
                        chain_rejects.write(json.dumps({
                            "reason": hop, "chain_attempt": attempt, "n_hops_wanted": k,
                            "source_ids": [h.problem.id for h in chain],
                            "last_answer": format_number(chain[-1].answer),
                        }) + "\n")
                        break
                    chain.append(hop)
                    used.add(hop.problem.id)
                else:
                    chains.append(chain)
                    stats.hop_counts[k] += 1
                    bar.advance()
        return chains

"""The think text of one problem under a variant: a symbolic trace (trace_templates), an empty chain of thought,
or filler with the token count of a behavior trace (placeholder_cot)."""

from __future__ import annotations

import random

from curate.builders.priming.config import PrimingConfig, PrimingError
from curate.builders.trace_phrases import VARIANTS
from curate.builders.trace_templates import write_trace
from curate.puzzles.countdown import Problem, wrong_expression

EMPTY_THINK = " "
# Filler units tried in turn until one tokenizes to exactly the wanted count.
FILLER_UNITS = (" .", ".", " …", " #", " -", "\n")


def count_tokens(tokenizer, text: str) -> int:
    return len(tokenizer(text, add_special_tokens=False)["input_ids"])


def placeholder_text(tokenizer, n_tokens: int) -> str:
    """Filler that tokenizes to exactly n_tokens tokens (repeats of a unit, corrected for merges)."""
    if n_tokens == 0:
        return ""
    for unit in FILLER_UNITS:
        k = n_tokens
        for _ in range(8):
            text = (unit * k).strip() or unit
            count = count_tokens(tokenizer, text)
            if count == n_tokens:
                return text
            k = max(1, k + n_tokens - count)
    raise PrimingError(f"no filler of exactly {n_tokens} tokens found for this tokenizer")


def draft_trace(problem: Problem, config: PrimingConfig, tokenizer, rng: random.Random) -> tuple[str, str, dict]:
    """(think text, answer expression, writer metadata) for one problem under the configured variant."""
    seed_rng = random.Random(rng.random())
    if config.variant in VARIANTS:
        trace = write_trace(problem, config.requested, seed_rng, config.answers, max_dead_ends=config.max_dead_ends,
                            integer_division=config.integer_division)
        return trace.text, trace.answer, {"strategy": trace.strategy, "dead_ends": trace.dead_ends,
                                          "failure": trace.failure, "voice": trace.voice}
    none = {"strategy": None, "dead_ends": None, "failure": None, "voice": None}
    if config.variant == "empty_cot":
        # 'any' has no search whose accuracy it could keep: an empty chain of thought gives the reference answer.
        answer = problem.solution if config.answers != "incorrect" else wrong_expression(problem, seed_rng)
        return EMPTY_THINK, answer, none
    # placeholder_cot: the paired behavior trace sets the length, then its text is replaced by filler.
    trace = write_trace(problem, VARIANTS[config.placeholder_for], seed_rng, config.answers,
                        max_dead_ends=config.max_dead_ends, integer_division=config.integer_division)
    filler = placeholder_text(tokenizer, count_tokens(tokenizer, trace.text))
    return filler, trace.answer, none

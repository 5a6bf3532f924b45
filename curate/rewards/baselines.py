"""Baseline rewards, registered beside curate's own so that an audit can set them side by side on the same pairs.

They are the verifiers RL recipes commonly ship, kept deliberately plain; none is meant for training with curate:
- `curate/mathverify-plain`: math-verify exactly as its README uses it (whole response, the library's default
  extraction and comparison), bounded in time by curate's checker;
- `curate/boxed-exact`: the last `\\boxed{}` of the response equals the gold after whitespace/`\\left`/`\\dfrac`
  normalization, as text;
- `curate/last-number`: the last number in the response equals a numeric gold (None when the gold is not a number).

Each ignores the `extraction` it is given: how it finds the answer is what the baseline is.
"""

from __future__ import annotations

import re

from curate.rewards.equivalence import normalize_text, shared_checker
from curate.rewards.extract import boxed_contents
from curate.rewards.registry import BOXED_INSTRUCTION, as_score, on_final_gold, register

_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?|-?\.\d+")
_GOLD_NUMBER = re.compile(r"^\$?\s*(-?\d[\d,]*(?:\.\d+)?|-?\.\d+)\s*\$?$")


def _number(text: str) -> float | None:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


@register(
    "curate/mathverify-plain",
    ability="math",
    instruction=BOXED_INSTRUCTION,
    description="baseline: math-verify's parse/verify on the whole response with the library's defaults",
)
@on_final_gold
def mathverify_plain_reward(solution_str, gold, extraction):
    return as_score(shared_checker().plain(gold, solution_str or ""))


@register(
    "curate/boxed-exact",
    ability="math",
    instruction=BOXED_INSTRUCTION,
    description="baseline: the last \\boxed{} equals the gold as normalized text",
)
@on_final_gold
def boxed_exact_reward(solution_str, gold, extraction):
    boxes = boxed_contents(solution_str or "")
    if not boxes:
        return 0.0
    return float(normalize_text(boxes[-1]) == normalize_text(gold))


@register(
    "curate/last-number",
    ability="math",
    instruction="End your response with the final number.",
    description="baseline: the last number in the response equals the numeric gold (None for a non-numeric gold)",
)
@on_final_gold
def last_number_reward(solution_str, gold, extraction):
    match = _GOLD_NUMBER.match(normalize_text(gold))
    target = _number(match.group(1)) if match else None
    if target is None:
        return None
    numbers = _NUMBER.findall(solution_str or "")
    if not numbers:
        return 0.0
    value = _number(numbers[-1])
    return float(value is not None and abs(value - target) <= 1e-9 * max(1.0, abs(target)))


BASELINES = ("curate/mathverify-plain", "curate/boxed-exact", "curate/last-number")

"""The reward registry: one function per `data_source`, exposed for verl and TRL.

verl: `reward.custom_reward_function.path=pkg://curate.rewards.verl_reward` (or the file `curate reward-path` prints)
and `.name=compute_score`; each row's `data_source` selects the reward.
TRL: `trl_reward()` (or `trl_reward("curate/math")`) is a GRPOTrainer reward function.

A reward returns 1.0 (correct), 0.0 (wrong, including "no final answer") or None (cannot be scored:
the check timed out or the ground truth is unusable). TRL skips None; verl needs a number and gets 0.0.
This file uses absolute imports only and no postponed annotations, so that it still loads when verl executes it by
path under a name that is not in `sys.modules` (a dataclass under `from __future__ import annotations` then fails).
"""

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from curate.errors import CurateError
from curate.puzzles.countdown import score_countdown
from curate.rewards.equivalence import normalize_text, shared_checker
from curate.rewards.extract import DEFAULT, Extraction, extract_answer

ScoreFunction = Callable[[str, Any, dict | None, Extraction], float | None]


class UnknownRewardError(CurateError, KeyError):
    def __str__(self) -> str:
        return self.args[0]


class RewardInputError(CurateError, ValueError):
    """A batch a reward function cannot read (no ground truth, a malformed or contradictory row)."""


@dataclass(frozen=True)
class Reward:
    data_source: str
    ability: str
    instruction: str  # what a prompt must ask for so that this reward can read the answer
    description: str
    function: ScoreFunction
    # What a prompt that already asks for this reward's answer format contains (e.g. "<answer>"); `curate export`
    # then appends no instruction of its own, so that an instruction is never given twice.
    marker: str = ""

    def asked_in(self, prompt: str, instruction: str | None = None) -> bool:
        """Whether PROMPT already asks for the answer format: it holds the instruction or the reward's marker."""
        instruction = self.instruction if instruction is None else instruction
        return bool(instruction.strip() and instruction.strip() in prompt) or bool(self.marker and self.marker in prompt)

    def score(
        self, solution_str: str, ground_truth: Any, extra_info: dict | None = None, extraction: Extraction = DEFAULT
    ) -> float | None:
        return self.function(solution_str, ground_truth, extra_info, extraction)


REWARDS: dict[str, Reward] = {}


def register(data_source: str, *, ability: str, instruction: str, description: str, marker: str = ""):
    def decorate(function: ScoreFunction) -> ScoreFunction:
        REWARDS[data_source] = Reward(data_source, ability, instruction, description, function, marker)
        return function

    return decorate


def get_reward(name: str) -> Reward:
    """By data_source ("curate/math") or short name ("math")."""
    key = name if "/" in name else f"curate/{name}"
    if key not in REWARDS:
        raise UnknownRewardError(f"no reward for data_source {name!r}; registered: {', '.join(sorted(REWARDS))}")
    return REWARDS[key]


def registered_rewards() -> list[str]:
    return sorted(REWARDS)


def _decode(ground_truth: Any) -> Any:
    # Exports keep structured ground truths as they were built; OpenRLHF labels carry them as JSON text. Only
    # objects: a string starting with "[" is an interval ("[-2, 5]"), not a JSON list.
    if isinstance(ground_truth, str) and ground_truth.lstrip().startswith("{"):
        try:
            return json.loads(ground_truth)
        except json.JSONDecodeError:
            return ground_truth
    return ground_truth


def final_gold(ground_truth: Any) -> str | None:
    ground_truth = _decode(ground_truth)
    if isinstance(ground_truth, dict):
        for key in ("final_answer", "answer", "target", "ground_truth"):
            if ground_truth.get(key) is not None:
                return str(ground_truth[key])
        return None
    if isinstance(ground_truth, list):
        return str(ground_truth[-1]) if ground_truth else None
    return None if ground_truth is None else str(ground_truth)


def on_final_gold(compare: Callable[[str, str, Extraction], float | None]) -> ScoreFunction:
    """A reward from a comparison of the response with the ground truth's final gold answer (`final_gold`): a row
    without a usable gold cannot be scored (None), whatever the comparison."""

    def reward(solution_str, ground_truth, extra_info=None, extraction=DEFAULT):
        gold = final_gold(ground_truth)
        if gold is None or not gold.strip():
            return None
        return compare(solution_str, gold, extraction)

    reward.__name__ = reward.__qualname__ = compare.__name__  # so that a traceback names the reward
    return reward


def as_score(verdict: bool | None) -> float | None:
    """1.0 or 0.0 for an equivalence verdict; None where the check could not decide."""
    return None if verdict is None else float(verdict)


BOXED_INSTRUCTION = "Put your final answer within \\boxed{}."


@register(
    "curate/math",
    ability="math",
    instruction=BOXED_INSTRUCTION,
    marker="\\boxed",
    description="math-object equivalence of the final answer (math-verify: fractions, radicals, sets, intervals, "
    "equations, units and percentages normalized)",
)
@register(
    "curate/mcqa_open",
    ability="math",
    instruction=BOXED_INSTRUCTION,
    marker="\\boxed",
    description="open answer converted from multiple choice: the correct option's content, compared as math or text",
)
@register(
    "curate/multihop",
    ability="math",
    instruction="Solve every step in order and put only the final answer within \\boxed{}.",
    marker="\\boxed",
    description="final answer of the last hop (ground truth: a string, a list of hop answers, or "
    "{'final_answer' | 'answer': ...}), compared as math or text",
)
@on_final_gold
def final_answer_reward(solution_str, gold, extraction):
    # One comparison for the three: what differs between them is the instruction and how the gold was built.
    answer = extract_answer(solution_str, extraction)
    if answer is None:
        return 0.0
    return as_score(shared_checker().equivalent(gold, answer))


_LETTER = re.compile(r"^\(?\s*([A-Z])\s*\)?(?:[\s.:)\]]|$)")
_LETTER_PHRASE = re.compile(r"(?:option|choice)\s*\(?([A-Z])\)?\b", re.IGNORECASE)


def answer_letter(answer: str) -> str | None:
    answer = normalize_text(answer).upper() if len(answer) <= 2 else answer.strip()
    if match := _LETTER.match(answer):
        return match.group(1)
    if match := _LETTER_PHRASE.search(answer):
        return match.group(1).upper()
    return None


@register(
    "curate/mcqa",
    ability="mcqa",
    instruction="Answer with the letter of the correct option within \\boxed{}.",
    marker="\\boxed",
    description="multiple choice: the chosen option letter equals the gold letter",
)
@on_final_gold
def mcqa_reward(solution_str, gold, extraction):
    gold_letter = answer_letter(gold)
    if gold_letter is None:
        return None
    answer = extract_answer(solution_str, extraction)
    if answer is None:
        return 0.0
    return float(answer_letter(answer) == gold_letter)


@register(
    "curate/countdown",
    ability="countdown",
    instruction="Show your work, then give the final equation in <answer> </answer> tags, for example "
    "<answer> (1 + 2) / 3 </answer>.",
    marker="<answer>",
    description="Countdown: the equation uses each given number once and evaluates to the target "
    "(curate.puzzles.countdown.score_countdown)",
)
def countdown_reward(solution_str, ground_truth, extra_info=None, extraction=DEFAULT):
    ground_truth = _decode(ground_truth)
    if not isinstance(ground_truth, dict):
        return None
    # TinyZero gives 0.1 to a well-formed wrong equation; the row (or the factory below) may ask for it.
    format_score = check_format_score((extra_info or {}).get("format_score", 0.0))
    return score_countdown(solution_str, ground_truth, format_score=format_score)


def check_format_score(value: Any) -> float:
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"format_score must be a number, got {value!r}") from None
    if not 0.0 <= value < 1.0:
        raise ValueError(f"format_score must be at least 0 and below 1 (TinyZero uses 0.1), got {value}")
    return value


def countdown_reward_fn(format_score: float = 0.0) -> Callable[..., list[float | None]]:
    """A TRL-style Countdown reward over a batch (completions, solution) with a fixed format score:
    1.0 for a correct equation, format_score for a well-formed wrong one, 0.0 otherwise, None when the
    ground truth is unusable. format_score is validated here, once."""
    format_score = check_format_score(format_score)

    def countdown_reward(completions: list, solution: list, **kwargs) -> list[float | None]:
        return [countdown_reward_impl(_completion_text(c), gold, format_score)
                for c, gold in zip(completions, solution, strict=True)]

    countdown_reward.__name__ = f"curate_countdown_format_{format_score:g}"
    return countdown_reward


def countdown_reward_impl(solution_str: str, ground_truth: Any, format_score: float) -> float | None:
    return REWARDS["curate/countdown"].score(solution_str, ground_truth, {"format_score": format_score})


def score(data_source: str, solution_str: str, ground_truth: Any, extra_info: dict | None = None,
          extraction: Extraction = DEFAULT) -> float | None:
    return get_reward(data_source).score(solution_str, ground_truth, extra_info, extraction)


def compute_score(data_source, solution_str, ground_truth, extra_info=None) -> float:
    """verl's custom reward signature; `data_source` selects the registered reward."""
    value = score(data_source, solution_str, ground_truth, extra_info)
    return 0.0 if value is None else float(value)


def _completion_text(completion: Any) -> str:
    # TRL passes plain strings for standard datasets and message lists for conversational ones.
    if isinstance(completion, list):
        return "".join(m.get("content") or "" for m in completion if isinstance(m, dict) and m.get("role") == "assistant")
    return "" if completion is None else str(completion)


def trl_reward(data_source: str | None = None, extraction: Extraction = DEFAULT) -> Callable[..., list[float | None]]:
    """A TRL GRPOTrainer reward function. Without `data_source`, each row's `data_source` column selects
    the reward, so one dataset can mix tasks. The ground truth is the `solution` column, or, for a verl-layout
    dataset (priming), `reward_model['ground_truth']`.

    GRPOTrainer passes every other dataset column as a keyword argument, one value per completion; the row's
    `extra_info` (a dict) and `format_score` columns reach the reward as verl's extra_info does, so a row's
    Countdown format score (TinyZero's 0.1) scores the same under TRL as under verl."""
    fixed = get_reward(data_source) if data_source else None

    def curate_reward(
        completions: list,
        solution: list | None = None,
        data_source: list | None = None,
        extra_info: list | None = None,
        format_score: list | None = None,
        reward_model: list | None = None,
        **kwargs,
    ) -> list[float | None]:
        golds = solution if solution is not None else _reward_model_golds(reward_model, len(completions))
        rewards = []
        for i, (completion, gold) in enumerate(zip(completions, golds, strict=True)):
            reward = fixed or (get_reward(data_source[i]) if data_source is not None else None)
            if reward is None:
                raise ValueError("no data_source: pass trl_reward('curate/…') or keep the data_source column")
            info = _row_extra_info(
                extra_info[i] if extra_info is not None else None,
                format_score[i] if format_score is not None else None,
                i,
            )
            rewards.append(reward.score(_completion_text(completion), gold, info, extraction))
        return rewards

    curate_reward.__name__ = f"curate_{fixed.data_source.split('/')[-1]}" if fixed else "curate_reward"
    return curate_reward


def _reward_model_golds(reward_model: list | None, n: int) -> list:
    if reward_model is None:
        raise RewardInputError(
            "no ground truth: keep the `solution` column (curate export --to trl) or the verl `reward_model` column"
        )
    golds = []
    for i, cell in enumerate(reward_model):
        if not isinstance(cell, dict) or "ground_truth" not in cell:
            raise RewardInputError(f"row {i}: reward_model has no ground_truth ({str(cell)[:80]!r})")
        golds.append(cell["ground_truth"])
    if len(golds) != n:
        raise RewardInputError(f"{len(golds)} reward_model values for {n} completions")
    return golds


def _row_extra_info(extra_info: Any, format_score: Any, row: int) -> dict | None:
    """One row's extra_info as the registry rewards read it: the row's extra_info dict, with its `format_score`
    column; a row whose two format scores disagree is refused rather than scored under either."""
    if extra_info is not None and not isinstance(extra_info, dict):
        raise RewardInputError(f"row {row}: extra_info must be a dict, got {type(extra_info).__name__}")
    info = dict(extra_info or {})
    if format_score is not None:
        stated = info.get("format_score")
        if stated is not None and check_format_score(stated) != check_format_score(format_score):
            raise RewardInputError(f"row {row}: format_score {format_score} differs from extra_info.format_score {stated}")
        info["format_score"] = format_score
    return info or None

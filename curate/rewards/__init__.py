"""Reward functions with one registry keyed by `data_source` (verl and TRL signatures), and answer extraction."""

from pathlib import Path

from curate.rewards.extract import BARE, DEFAULT, Extraction, extract_answer
from curate.rewards.registry import (
    REWARDS,
    Reward,
    UnknownRewardError,
    compute_score,
    get_reward,
    registered_rewards,
    score,
    trl_reward,
)
from curate.rewards import baselines  # noqa: F401,E402  (registers the baseline rewards audits compare against)

# The file verl's custom_reward_function.path names (pkg://curate.rewards.verl_reward names the same module).
REWARD_PATH = Path(__file__).parent / "verl_reward.py"

__all__ = [
    "BARE", "DEFAULT", "Extraction", "REWARDS", "REWARD_PATH", "Reward", "UnknownRewardError", "compute_score",
    "extract_answer", "get_reward", "registered_rewards", "score", "trl_reward",
]

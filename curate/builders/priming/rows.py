"""A priming row's shape: its schema, the one TinyZero prompt of its SFT and RL columns, the completion, and the id
and split a problem gets from its hash (train and test never share a problem)."""

from __future__ import annotations

import hashlib
import json

import pyarrow as pa

from curate.behaviors import BEHAVIOR_NAMES
from curate.builders.trace_templates import countdown_question
from curate.puzzles.countdown import Problem

SYSTEM_PREAMBLE = (
    "A conversation between User and Assistant. The user asks a question, and the Assistant solves it. "
    "The assistant first thinks about the reasoning process in the mind and then provides the user with the answer."
)

ROW_SCHEMA = pa.schema([
    ("id", pa.string()),
    ("question", pa.string()),
    ("answer", pa.string()),
    ("data_source", pa.string()),
    ("ability", pa.string()),
    ("prompt", pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))),
    ("reward_model", pa.struct([
        ("style", pa.string()),
        ("ground_truth", pa.struct([("target", pa.int64()), ("numbers", pa.list_(pa.int64()))])),
    ])),
    ("extra_info", pa.struct([("split", pa.string()), ("index", pa.int64()), ("variant", pa.string()),
                              ("answers", pa.string()), ("format_score", pa.float64())])),
    ("query", pa.string()),
    ("completion", pa.string()),
    ("completion_answer", pa.string()),
    ("answer_correct", pa.bool_()),
    ("numbers", pa.list_(pa.int64())),
    ("target", pa.int64()),
    ("format_score", pa.float64()),
    ("variant", pa.string()),
    ("answers", pa.string()),
    ("requested_behaviors", pa.list_(pa.string())),
    *[(b, pa.int32()) for b in BEHAVIOR_NAMES],
    ("classifier", pa.string()),
    ("writer", pa.string()),
    ("strategy", pa.string()),
    ("dead_ends", pa.int32()),
    ("failure", pa.string()),
    ("voice", pa.string()),
    ("think_chars", pa.int64()),
    ("think_tokens", pa.int64()),
])


def tinyzero_query(problem: Problem) -> str:
    """The TinyZero base-model prompt; the completion starts at <think>."""
    return tinyzero_prompt(countdown_question(problem))


def tinyzero_prompt(user_turn: str) -> str:
    """The TinyZero completion prompt around one user turn (for base models, sent without a chat template)."""
    return f"{SYSTEM_PREAMBLE}\nUser: {user_turn}\nAssistant: Let me solve this step by step.\n"


def completion_text(think: str, answer: str) -> str:
    return f"<think>\n{think}\n</think>\n<answer> {answer} </answer>"


def split_of(problem: Problem, test_share: float) -> str:
    digest = hashlib.sha256(json.dumps(problem.key).encode()).digest()
    return "test" if int.from_bytes(digest[:8], "big") / 2**64 < test_share else "train"


def problem_id(problem: Problem) -> str:
    return "countdown-" + hashlib.sha256(json.dumps(problem.key).encode()).hexdigest()[:16]

"""What one multiple-choice item is and becomes: the item read, its rejection with a reason, the open-answer row
it converts to, and the counts of a whole conversion."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from curate.builders.base import Reject
from curate.errors import CurateError

DATA_SOURCE = "curate/mcqa_open"
ABILITY = "math"
FORMATS = ("auto", "aqua", "mmlu_csv", "jsonl", "arc", "alpaca")
LETTERS = "ABCDEFGHIJ"


class FormatError(CurateError, ValueError):
    """The input's layout could not be recognised."""


@dataclass
class MCItem:
    id: str
    source: str
    question: str
    options: dict[str, str]
    gold_letter: str


@dataclass
class Rejected:
    id: str
    source: str
    reason: str


@dataclass
class Converted:
    id: str
    source: str
    question: str
    answer: str
    answer_type: str
    original_options: list[dict]
    gold_letter: str

    def row(self) -> dict:
        return {
            "id": self.id, "question": self.question, "answer": self.answer, "answer_type": self.answer_type,
            "source": self.source, "original_options": self.original_options, "gold_letter": self.gold_letter,
            "data_source": DATA_SOURCE, "ability": ABILITY,
        }


@dataclass
class McqaResult:
    output: Path
    kept: int
    rejected: int
    by_source: dict[str, dict[str, int]]
    by_reason: dict[str, int]
    answer_types: dict[str, int]


def reason_code(reason: str) -> str:
    return reason.split(":", 1)[0]


def rejection(item_id: str, source: str, reason: str) -> Reject:
    """The builder's decision for an item refused with REASON, counted by its code."""
    return Reject(reason_code(reason), {"id": item_id, "source": source, "reason": reason}, source)

"""--reformulate: an LLM rewrites each converted stem and a second pass of the same model judges the rewrite
(llm_writers.reformulate_rows), as a revision of the converted rows."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa

from curate.builders.base import Decision, Keep
from curate.builders.llm_writers import LLMOptions, Rewrite, reformulate_rows
from curate.builders.mcqa.items import rejection
from curate.builders.mcqa.rules import stem_reason

# What a reformulated row adds: the rule-based stem it replaced, and the model.
REFORMULATION_COLUMNS = [pa.field("rule_question", pa.string()), pa.field("reformulated_by", pa.string())]


def reformulation(options: dict, output: Path, types: Counter,
                  progress: bool) -> Callable[[list[dict]], list[Decision]]:
    """The LLM rewrite + judge over the converted rows, as a revision of them: accepted rows get the new stem (the
    rule-based one stays in `rule_question`), refused rows move to the rejects and leave the answer types."""

    def decide(rows: list[dict]) -> list[Decision]:
        verdicts = reformulate_rows(rows, LLMOptions(**options), output / ".curate" / "reformulate", stem_reason,
                                    progress) if rows else []
        decisions: list[Decision] = []
        for row, verdict in zip(rows, verdicts, strict=True):
            if isinstance(verdict, Rewrite):
                decisions.append(Keep.row({**row, "question": verdict.question, "rule_question": row["question"],
                                           "reformulated_by": options["model"]}, source=row["source"]))
            else:
                decisions.append(rejection(row["id"], row["source"], verdict))
                types[row["answer_type"]] -= 1
        return decisions

    return decide

"""The source problems: read as a corpus whose text is the question, kept when their worked solution re-executes
to its `#### N` answer (arith), set aside with the reason otherwise; the kept pool is held in memory for chaining."""

from __future__ import annotations

import re
from contextlib import nullcontext
from dataclasses import dataclass

from curate.builders.arith import Solution, UnexecutableSolution, format_number, parse_solution
from curate.builders.base import Builder, BuildOutput, Decision, Keep, Reject
from curate.builders.multihop.stats import MultihopStats
from curate.pipelines.readers import REJECT_REASON, InputSpec, is_reject, make_reader

REFERENCE = re.compile(r"\bX\d+\b")
POOL = "pool"  # the kept source problems, held in memory for chaining


@dataclass
class SourceProblem:
    id: str
    question: str
    answer: str
    solution: Solution
    slots: list[int]  # givens that may take a previous answer


class SourceFilter(Builder):
    """Keeps the problems whose solution re-executes to their answer; rejects the rest, and the ids in EXCLUDED
    (id -> (reason, detail)), with the reason."""

    def __init__(self, answer_key: str = "answer", excluded: dict[str, tuple[str, str]] | None = None):
        self.answer_key = answer_key
        self.excluded = excluded or {}

    def decide(self, document) -> Decision:
        if is_reject(document):
            reason = document.metadata[REJECT_REASON]
            return _source_reject(reason.split(":")[0], reason, document)
        solution_text = document.metadata.get(self.answer_key)
        if not isinstance(solution_text, str) or not solution_text.strip():
            return _source_reject("missing_solution", f"no text field {self.answer_key!r} with the worked solution",
                                  document)
        if document.id in self.excluded:
            return _source_reject(*self.excluded[document.id], document)
        if REFERENCE.search(document.text):
            return _source_reject("uses_reference_names", "the text already contains a name such as X1", document)
        try:
            solution = parse_solution(document.text, solution_text)
        except UnexecutableSolution as error:
            return _source_reject(error.reason, error.detail, document)
        answer = format_number(solution.answer)
        return Keep.row(SourceProblem(document.id, document.text, answer, solution, solution.substitutable_givens()),
                        split=POOL)


def _source_reject(reason: str, detail: str, document) -> Reject:
    return Reject(reason, {"reason": reason, "detail": detail, "id": document.id, "question": document.text})


def load_sources(
    spec: InputSpec, answer_key: str = "answer", progress: bool = True, rejects: list[dict] | None = None,
    excluded: dict[str, tuple[str, str]] | None = None, out: BuildOutput | None = None,
) -> tuple[list[SourceProblem], MultihopStats]:
    """Read problems and keep those whose solution re-executes to its answer. Everything else is rejected with its
    reason (SourceFilter): into OUT's rejects file when given, else appended to `rejects`. The pool stays in memory:
    chaining draws from all of it at random, and a parsed problem is a few hundred bytes."""
    with BuildOutput() if out is None else nullcontext(out) as sink:
        SourceFilter(answer_key, excluded).run(make_reader(spec, progress=progress).run(), sink)
    if rejects is not None:
        rejects.extend(sink.held_rejects)
    problems = sink.held[POOL]
    stats = MultihopStats(sources_read=sink.decided, sources_executable=sink.kept,
                          sources_with_slots=sum(bool(p.slots) for p in problems), source_rejects=sink.by_reason)
    return problems, stats

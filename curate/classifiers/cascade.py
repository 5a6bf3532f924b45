"""`cascade_v1`: a cheap gate decides which documents reach the LLM.

The gate (cues now, a distilled head later) passes a document when it sees any behavior, or when
it could not decide (unknown is not absence). A document the gate rules out gets an attribute
row with zero counts and `route="gated_out:<gate>"`, so a selection can tell "the LLM said none"
from "the gate said none". What the gate costs in missed documents is measured against LLM
labels by `gate_report` (`curate eval-gate`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from curate.behaviors import BEHAVIOR_NAMES
from curate.classifiers.base import Classifier, get_classifier, register, resolve_name
from curate.classifiers.llm import LLMClassifier
from curate.schema import Labels

DEFAULT_GATE = "cues"
ROUTE_LLM = "llm"
GATED_OUT = "gated_out"


def gate_passes(labels: Labels) -> bool:
    if labels.error is not None:
        return True
    return any((labels.counts.get(b) or 0) > 0 for b in BEHAVIOR_NAMES)


class CascadeClassifier(Classifier):
    """A gate classifier in front of an `llm_v1` configuration; requests go through `curate tag-llm --gate`."""

    name = "cascade_v1"

    def __init__(self, model: str, gate: str = DEFAULT_GATE, **llm_options):
        self.llm = LLMClassifier(model, **llm_options)
        self.gate_name, _ = resolve_name(gate)
        self.gate_spec = gate
        self.model = self.llm.model
        self.prompt_version = self.llm.prompt_version

    def gate(self) -> Classifier:
        return get_classifier(self.gate_spec)

    def classify(self, texts: Sequence[str]) -> list[Labels]:
        return self.llm.classify(texts)


@register("cascade_v1")
def make_cascade_classifier(model: str | None = None, **options) -> CascadeClassifier:
    return CascadeClassifier(model or "", **options)


@dataclass
class GateReport:
    documents: int = 0
    llm_positive: dict[str, int] = field(default_factory=lambda: {b: 0 for b in BEHAVIOR_NAMES})
    caught: dict[str, int] = field(default_factory=lambda: {b: 0 for b in BEHAVIOR_NAMES})
    any_positive: int = 0
    any_caught: int = 0
    passed: int = 0
    skipped_unlabelled: int = 0

    @property
    def recall(self) -> dict[str, float | None]:
        return {b: (self.caught[b] / self.llm_positive[b]) if self.llm_positive[b] else None for b in BEHAVIOR_NAMES}

    @property
    def any_recall(self) -> float | None:
        return self.any_caught / self.any_positive if self.any_positive else None

    @property
    def requests_saved(self) -> float:
        """Share of LLM requests the gate avoids: the documents it rules out."""
        return 1 - self.passed / self.documents if self.documents else 0.0


def gate_report(pairs: Iterable[tuple[Labels, dict]]) -> GateReport:
    """pairs: (gate labels, LLM attribute row). Rows whose LLM counts are all null are skipped:
    they cannot say whether the gate missed anything."""
    report = GateReport()
    for gate_labels, llm_row in pairs:
        llm_counts = {b: llm_row.get(b) for b in BEHAVIOR_NAMES}
        if all(v is None for v in llm_counts.values()):
            report.skipped_unlabelled += 1
            continue
        passed = gate_passes(gate_labels)
        report.documents += 1
        report.passed += passed
        positive = [b for b in BEHAVIOR_NAMES if (llm_counts[b] or 0) > 0]
        for b in positive:
            report.llm_positive[b] += 1
            report.caught[b] += passed
        if positive:
            report.any_positive += 1
            report.any_caught += passed
    return report

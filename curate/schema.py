"""The attribute schema: the contract between every classifier and every later stage.

One parquet row per document per classifier run. Source text stays out; join on `id`. `source` is the corpus
file the document was read from: when an id repeats across files it says which copy a row describes (query.py).
A count is null when it could not be determined (and `error` says why) - never 0.
`scores` holds a per-behavior probability for classifiers that have one (distilled_v1); it is null for
classifiers without scores (cues_v1, llm_v1), and a behavior without a score is null inside the struct.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa

from curate.behaviors import BEHAVIOR_NAMES

EVIDENCE_TYPE = pa.list_(
    pa.struct([("behavior", pa.string()), ("start", pa.int64()), ("end", pa.int64()), ("score", pa.float32())])
)

SCORES_TYPE = pa.struct([(name, pa.float32()) for name in BEHAVIOR_NAMES])

ATTRIBUTE_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        *[(name, pa.int32()) for name in BEHAVIOR_NAMES],
        ("evidence", EVIDENCE_TYPE),
        ("scores", SCORES_TYPE),
        ("classifier", pa.string()),
        ("model", pa.string()),
        ("prompt_version", pa.string()),
        ("error", pa.string()),
        ("n_chars", pa.int64()),
        ("source", pa.string()),
    ]
)


@dataclass(frozen=True)
class Evidence:
    """A character span of the text that shows `behavior`; `score` is the classifier's probability for that span
    where it scores spans (spans_v1), None where the span is a cue match."""

    behavior: str
    start: int
    end: int
    score: float | None = None


@dataclass
class Labels:
    """What a classifier says about one text."""

    counts: dict[str, int | None] = field(default_factory=lambda: {b: None for b in BEHAVIOR_NAMES})
    evidence: list[Evidence] = field(default_factory=list)
    error: str | None = None
    # Per-behavior probability (0..1) for classifiers that score; None for those that only count.
    scores: dict[str, float | None] | None = None

    @classmethod
    def failed(cls, reason: str) -> "Labels":
        return cls(error=reason)


def attribute_row(
    doc_id: str, n_chars: int, labels: Labels, classifier: str, model: str | None, prompt_version: str | None,
    source: str | None = None,
) -> dict:
    return {
        "id": doc_id,
        **{b: labels.counts.get(b) for b in BEHAVIOR_NAMES},
        "evidence": [{"behavior": e.behavior, "start": e.start, "end": e.end, "score": e.score} for e in labels.evidence],
        "scores": None if labels.scores is None else {b: labels.scores.get(b) for b in BEHAVIOR_NAMES},
        "classifier": classifier,
        "model": model,
        "prompt_version": prompt_version,
        "error": labels.error,
        "n_chars": n_chars,
        "source": source,
    }

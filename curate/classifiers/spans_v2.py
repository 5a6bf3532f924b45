"""`spans_v2`: spans_v1's unit heads, with presence decided together with a document head and evidence chosen by
unit heads that were trained without balanced classes.

Three sets of heads read the same text (all trained on the same texts by bench/train_spans.py --write spans_v2):
- the **unit heads** of spans_v1's recipe (balanced classes: they find a decisive unit, and score many others);
- a **document head**, cues_ngram_v1's recipe (word n-grams of the whole text and its cue counts);
- **evidence heads**: the unit heads' features and recipe with unbalanced classes, so that a unit scores 0.5 only
  where a unit like it was an instance about as often as not.

A behavior is present when the mean of the document head's probability and the best unit's reaches 0.5 (leaving one
genre out, the document head wins on Countdown styles and the unit heads on real genres; their mean is ahead of
spans_v1 on both). In a text judged present, its instances are the runs of adjacent units that the evidence heads
score at or above 0.5, each run one instance (a check over two lines is one check); where no unit reaches that, the
best unit of the unit heads is the one instance. The count is the number of instances, and the label's score per
behavior is the mean that decided presence. docs/spans.md gives the figures and what each part adds.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from curate.behaviors import BEHAVIOR_NAMES
from curate.classifiers.base import Classifier, get_classifier, register
from curate.classifiers.cues_ngram import NgramModel, NgramModelError, counts_of
from curate.classifiers.spans import CUES, MODELS, SpanModel, dense_features, unit_tfidf, units
from curate.schema import Evidence, Labels

PRESENCE_THRESHOLD = 0.5
EVIDENCE_THRESHOLD = 0.5
EVIDENCE_FILE = "evidence.npz"
DOCUMENT_FOLDER = "document"


def instances(spans: Sequence[tuple[int, int]], unit: np.ndarray, evidence: np.ndarray) -> list[tuple[int, int, float]]:
    """One behavior's instances in a text judged present: (start, end, score) of each run of adjacent units whose
    evidence score reaches EVIDENCE_THRESHOLD (the run's best evidence score), or the best unit by `unit` alone."""
    chosen = np.nonzero(evidence >= EVIDENCE_THRESHOLD)[0]
    if not len(chosen):
        best = int(np.argmax(unit))
        return [(spans[best][0], spans[best][1], float(evidence[best]))]
    runs = np.split(chosen, np.nonzero(np.diff(chosen) > 1)[0] + 1)
    return [(spans[run[0]][0], spans[run[-1]][1], float(evidence[run].max())) for run in runs]


def labels_from_scores(spans: Sequence[tuple[int, int]], unit: np.ndarray, evidence: np.ndarray,
                       document: np.ndarray) -> Labels:
    """A text's Labels from its units' scores under the unit and evidence heads, (units, behaviors) each, and the
    document head's probabilities (behaviors,)."""
    counts, found, scores = {}, [], {}
    for k, behavior in enumerate(BEHAVIOR_NAMES):
        best = float(unit[:, k].max()) if len(spans) else 0.0
        presence = (best + float(document[k])) / 2
        scores[behavior] = presence
        mine = instances(spans, unit[:, k], evidence[:, k]) if presence >= PRESENCE_THRESHOLD and len(spans) else []
        counts[behavior] = len(mine)
        found += [Evidence(behavior, start, end, round(score, 4)) for start, end, score in mine]
    found.sort(key=lambda e: (e.start, BEHAVIOR_NAMES.index(e.behavior)))
    return Labels(counts=counts, evidence=found, scores=scores)


class SpanDocumentModel:
    """The three sets of heads of a shipped spans_v2 folder: unit heads (model.json, weights.npz, spans_v1's format),
    evidence heads over the same features (evidence.npz) and a document head (document/, cues_ngram_v1's format)."""

    def __init__(self, name: str, folder: Path | None = None):
        folder = folder or MODELS / name
        self.units = SpanModel.load(folder)
        try:
            raw = (folder / EVIDENCE_FILE).read_bytes()
            with np.load(io.BytesIO(raw), allow_pickle=False) as arrays:
                coefficients, intercepts = (arrays[k].astype(float) for k in ("coefficients", "intercepts"))
        except (OSError, ValueError, KeyError) as error:
            raise NgramModelError(f"cannot read the evidence heads in {folder}: {error}; reinstall curate") from error
        if coefficients.shape != self.units.coefficients.shape:
            raise NgramModelError(f"{folder}/{EVIDENCE_FILE}: heads of shape {coefficients.shape} do not fit the unit "
                                  f"heads' {self.units.coefficients.shape}")
        self.evidence = SpanModel(self.units.features, coefficients, intercepts, self.units.thresholds, {})
        self.document = NgramModel.load(folder / DOCUMENT_FOLDER)
        if self.document.cues != CUES:
            raise NgramModelError(f"{folder}/{DOCUMENT_FOLDER} reads {self.document.cues}'s counts, the unit heads "
                                  f"{CUES}'s")
        self.digest = f"{self.units.digest}-{self.document.digest}"


class SpanDocumentClassifier(Classifier):
    """spans_v2's decision over the heads of the shipped folder `name` under models/ (or of `folder`: a candidate
    the bench measures before it is written as a version)."""

    def __init__(self, name: str, batch_size: int = 64, folder: Path | None = None):
        self.name = name
        self.heads = SpanDocumentModel(name, folder)
        self.cues = get_classifier(CUES, batch_size=batch_size)
        # Attribute rows name the weights they came from, so a retrained model's tags are told apart.
        self.prompt_version = f"weights-{self.heads.digest}"

    def classify(self, texts: Sequence[str]) -> list[Labels]:
        cue_labels = self.cues.classify(texts)
        document = self.heads.document.probabilities(texts, counts_of(cue_labels))
        out = []
        for text, cue_label, document_row in zip(texts, cue_labels, document, strict=True):
            if cue_label.error is not None:
                out.append(cue_label)
                continue
            spans = units(text)
            if spans:
                # One pass over the text's n-grams and features, read by both sets of unit heads.
                own = unit_tfidf(self.heads.units.features.ngrams, text, spans)
                dense = dense_features(text, spans, cue_label.evidence)
                unit = self.heads.units.probabilities_of(own, dense)
                evidence = self.heads.evidence.probabilities_of(own, dense)
            else:
                unit = evidence = np.zeros((0, len(BEHAVIOR_NAMES)))
            out.append(labels_from_scores(spans, unit, evidence, document_row))
        return out


@register("spans_v2")
def make_span_document_classifier(batch_size: int = 64) -> SpanDocumentClassifier:
    return SpanDocumentClassifier("spans_v2", batch_size)

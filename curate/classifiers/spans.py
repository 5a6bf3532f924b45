"""`spans_v1`: behaviors found sentence by sentence, so that a label points at the sentences that carry it.

A text is cut into units (sentences, or lines where a line holds no sentence end: a Countdown step, a list item).
One logistic head per behavior scores each unit from its own word n-grams, its neighbours' n-grams (a verdict such
as "not 24" reads differently after an equation than after a question) and, in a Countdown trace, whether the unit
reaches the target or names it. A behavior is present in a text when one of its units scores at or above the
behavior's threshold; its count is the number of such units (instances, as the reference study counts them), and
its evidence is those units with their scores. A single decisive sentence in a 3,000-word trace therefore decides
the label on its own, instead of being averaged away over the whole document.

The model ships in `models/spans_v1/` as `model.json` (vocabulary, thresholds, what it was trained on) and
`weights.npz` (plain arrays, loaded without pickle). bench/train_spans.py trains it and measures it leaving one
genre out; evals/spans/GUIDE.md describes the span labels it learns from.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from curate.behaviors import BEHAVIOR_NAMES
from curate.classifiers.base import Classifier, get_classifier, register
from curate.classifiers.cues_ngram import NgramFeatures, NgramModelError, read_model_files, tokens_of
from curate.classifiers.input_check import write_input_check
from curate.schema import Evidence, Labels

MODELS = Path(__file__).resolve().parent / "models"
FORMAT_VERSION = 1
# A unit ends at a line break, or after . ! ? (with closing quotes or brackets) followed by white space: "3.5" and
# "e.g." inside a line do not end one, and a LaTeX line is kept whole.
_UNIT_END = re.compile(r"\n+|(?<=[.!?])[\"')\]]*\s+")
_WORD = re.compile(r"[A-Za-z]{2,}")
# A unit this long is cut again at ";" or ", " so that one long line cannot hide a clause in a paragraph of steps.
LONG_UNIT = 400
_CLAUSE_END = re.compile(r"(?<=[;:])\s+|(?<=,)\s+(?=(?:but|so|which|and so|then|wait|hmm|hence|thus)\b)", re.IGNORECASE)
_TARGET = re.compile(r"\btarget\s*(?:is|of|:|=)?\s*(-?\d+(?:\.\d+)?)", re.IGNORECASE)
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?![\w.])")
_RESULT = re.compile(r"=\s*(-?\d+(?:\.\d+)?)\s*[.,!]?\s*$|=\s*(-?\d+(?:\.\d+)?)\b")
# The neighbours' n-grams weigh less than the unit's own: they say how a unit is read, the unit says what it does.
CONTEXT_WEIGHT = 0.5
DENSE_FEATURES = ("is_first", "is_last", "relative_position", "log_length", "countdown", "names_target",
                  "reaches_target", "result_off_target",
                  *(f"cue_{b}" for b in BEHAVIOR_NAMES), *(f"cue_beside_{b}" for b in BEHAVIOR_NAMES))
# The hand-written cue version whose evidence spans are unit features: its rules were written for any text, so a
# cue hit carries across genres where n-grams learned on other genres do not.
CUES = "cues_v11"


def units(text: str) -> list[tuple[int, int]]:
    """The (start, end) offsets of the text's units, white space trimmed, each holding at least one word."""
    spans = []
    start = 0
    for match in _UNIT_END.finditer(text):
        spans.append((start, match.start()))
        start = match.end()
    spans.append((start, len(text)))
    out = []
    for begin, end in spans:
        for b, e in _split_long(text, begin, end):
            while b < e and text[b].isspace():
                b += 1
            while e > b and text[e - 1].isspace():
                e -= 1
            if e > b and (_WORD.search(text, b, e) or _NUMBER.search(text, b, e)):
                out.append((b, e))
    return out


def _split_long(text: str, begin: int, end: int) -> list[tuple[int, int]]:
    if end - begin <= LONG_UNIT:
        return [(begin, end)]
    pieces, start = [], begin
    for match in _CLAUSE_END.finditer(text, begin, end):
        if match.start() - start >= 40:
            pieces.append((start, match.start()))
            start = match.end()
    pieces.append((start, end))
    return pieces


def countdown_target(text: str) -> float | None:
    """The target of a Countdown problem stated in the text ("Numbers: ..., target: 24"), or None."""
    match = _TARGET.search(text[:400])
    return float(match.group(1)) if match else None


# Between two units' tokens: neither a vocabulary n-gram nor the prefix of one, so no n-gram spans two units.
_UNIT_SEPARATOR = "\x00"


def unit_tfidf(ngrams: NgramFeatures, text: str, spans: Sequence[tuple[int, int]]):
    """The units' TF-IDF rows (`NgramFeatures.tfidf` of each unit's text) as one CSR matrix, from one pass over
    the text's tokens."""
    from scipy.sparse import csr_matrix

    tokens, unit_of = [], []
    for i, (start, end) in enumerate(spans):
        words = tokens_of(text[start:end])
        tokens += [*words, _UNIT_SEPARATOR]
        unit_of += [i] * (len(words) + 1)
    positions, columns = ngrams.hits(tokens)
    size = len(ngrams.vocabulary)
    keys, counts = np.unique(np.array(unit_of, dtype=np.int64)[positions] * size + np.array(columns, dtype=np.int64),
                             return_counts=True)
    rows, columns = keys // size, keys % size
    values = (1 + np.log(counts)) * ngrams.idf[columns]
    norms = np.sqrt(np.bincount(rows, values**2, minlength=len(spans)))
    values = values / norms[rows] if len(values) else values
    pointers = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=len(spans)))])
    return csr_matrix((values, columns, pointers), shape=(len(spans), size))


def dense_features(text: str, spans: Sequence[tuple[int, int]], cue_evidence: Sequence[Evidence]) -> np.ndarray:
    """One row per unit, in DENSE_FEATURES order; `cue_evidence` is the CUES classifier's evidence in the text."""
    target = countdown_target(text)
    rows = np.zeros((len(spans), len(DENSE_FEATURES)))
    if not spans:
        return rows
    starts = np.array([s for s, _ in spans])
    ends = np.array([e for _, e in spans])
    rows[0, 0] = rows[-1, 1] = 1
    rows[:, 2] = np.arange(len(spans)) / max(1, len(spans) - 1)
    rows[:, 3] = np.log1p(ends - starts)
    if target is not None:
        rows[:, 4] = 1
        for i, (start, end) in enumerate(spans):
            unit = text[start:end]
            results = [float(a or b) for a, b in _RESULT.findall(unit)]
            rows[i, 5] = target in (float(x) for x in _NUMBER.findall(unit))
            rows[i, 6] = target in results
            rows[i, 7] = bool(results) and target not in results
    cue_column = DENSE_FEATURES.index(f"cue_{BEHAVIOR_NAMES[0]}")
    beside_column = DENSE_FEATURES.index(f"cue_beside_{BEHAVIOR_NAMES[0]}")
    for cue in cue_evidence:
        # Units are sorted and disjoint: the ones a cue overlaps are a run found by two binary searches.
        first = int(np.searchsorted(ends, cue.start, side="right"))
        last = int(np.searchsorted(starts, cue.end, side="left"))
        if first >= last:
            continue
        k = BEHAVIOR_NAMES.index(cue.behavior)
        rows[first:last, cue_column + k] = 1
        # The neighbours of every unit in the run: the run itself too where it holds two units or more.
        beside = [first - 1, first + 1] if last - first == 1 else range(first - 1, last + 1)
        for j in beside:
            if 0 <= j < len(spans):
                rows[j, beside_column + k] = 1
    return rows


@dataclass
class UnitFeatures:
    """A unit's features: its n-grams, its neighbours' n-grams (weighted) and the dense features."""

    ngrams: NgramFeatures

    @property
    def width(self) -> int:
        return 2 * len(self.ngrams.vocabulary) + len(DENSE_FEATURES)

    def matrix(self, text: str, spans: Sequence[tuple[int, int]], cue_evidence: Sequence[Evidence]):
        """A CSR matrix with one row per unit: its TF-IDF, its neighbours' summed and weighted, its dense features."""
        from scipy.sparse import csr_matrix, diags, hstack

        own = unit_tfidf(self.ngrams, text, spans)
        beside = diags([np.ones(len(spans) - 1)] * 2, [-1, 1], shape=(len(spans),) * 2) if len(spans) > 1 else None
        neighbours = (beside @ own) * CONTEXT_WEIGHT if beside is not None else csr_matrix(own.shape)
        return hstack([own, neighbours, csr_matrix(dense_features(text, spans, cue_evidence))]).tocsr()


@dataclass
class SpanModel:
    features: UnitFeatures
    coefficients: np.ndarray  # (behaviors, features)
    intercepts: np.ndarray  # (behaviors,)
    thresholds: np.ndarray  # (behaviors,): a unit at or above it is an instance
    trained_on: dict
    digest: str = ""

    def __post_init__(self):
        size = len(self.features.ngrams.vocabulary)
        # Scoring reads the weights per n-gram column: each unit's own weights beside the weights its n-grams carry
        # into its neighbours' margins, so that a text costs one sparse product instead of building its matrix.
        self._ngram_weights = np.ascontiguousarray(np.hstack(
            [self.coefficients[:, :size].T, self.coefficients[:, size:2 * size].T * CONTEXT_WEIGHT]))
        self._dense_weights = self.coefficients[:, 2 * size:].T

    def unit_probabilities(self, text: str, spans: Sequence[tuple[int, int]],
                           cue_evidence: Sequence[Evidence]) -> np.ndarray:
        """(units, behaviors) probabilities: the logistic heads over `UnitFeatures.matrix`, computed per column."""

        if not spans:
            return np.zeros((0, len(BEHAVIOR_NAMES)))
        return self.probabilities_of(unit_tfidf(self.features.ngrams, text, spans),
                                     dense_features(text, spans, cue_evidence))

    def probabilities_of(self, own_ngrams, dense: np.ndarray) -> np.ndarray:
        """(units, behaviors) probabilities from a text's unit TF-IDF rows (`unit_tfidf`, one or more units) and
        dense features (`dense_features`): heads sharing this model's vocabulary reuse one text's features."""
        parts = own_ngrams @ self._ngram_weights
        behaviors = len(BEHAVIOR_NAMES)
        margin = parts[:, :behaviors] + dense @ self._dense_weights
        margin[1:] += parts[:-1, behaviors:]
        margin[:-1] += parts[1:, behaviors:]
        return 1 / (1 + np.exp(-(margin + self.intercepts)))

    def save(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        ngrams = self.features.ngrams
        vocabulary = sorted(ngrams.vocabulary, key=ngrams.vocabulary.__getitem__)
        meta = {"format_version": FORMAT_VERSION, "behaviors": list(BEHAVIOR_NAMES), "longest_ngram": ngrams.longest,
                "context_weight": CONTEXT_WEIGHT, "dense_features": list(DENSE_FEATURES), "cues": CUES,
                "thresholds": [round(float(t), 4) for t in self.thresholds], "trained_on": self.trained_on,
                "vocabulary": vocabulary}
        (directory / "model.json").write_text(json.dumps(meta, indent=0, ensure_ascii=False) + "\n", encoding="utf-8")
        np.savez_compressed(directory / "weights.npz", idf=ngrams.idf.astype(np.float32),
                            coefficients=self.coefficients.astype(np.float32),
                            intercepts=self.intercepts.astype(np.float32))
        write_input_check(directory, CUES)

    @classmethod
    def load(cls, directory: Path) -> SpanModel:
        meta, weights, (idf, coefficients, intercepts) = read_model_files(directory, "span model")
        if (meta.get("format_version") != FORMAT_VERSION or meta.get("behaviors") != list(BEHAVIOR_NAMES)
                or meta.get("context_weight") != CONTEXT_WEIGHT or meta.get("dense_features") != list(DENSE_FEATURES)
                or meta.get("cues") != CUES):
            raise NgramModelError(f"{directory}/model.json is not a format-{FORMAT_VERSION} span model of "
                                  f"{BEHAVIOR_NAMES} with this release's features")
        vocabulary = {g: i for i, g in enumerate(meta["vocabulary"])}
        features = UnitFeatures(NgramFeatures(vocabulary, idf, meta["longest_ngram"]))
        if coefficients.shape != (len(BEHAVIOR_NAMES), features.width):
            raise NgramModelError(f"{directory}: weights of shape {coefficients.shape} do not fit the vocabulary")
        return cls(features, coefficients, intercepts, np.array(meta["thresholds"], float), meta["trained_on"],
                   hashlib.sha256(weights).hexdigest()[:12])


def labels_from_units(spans: Sequence[tuple[int, int]], probabilities: np.ndarray, thresholds: np.ndarray) -> Labels:
    """A text's Labels from its unit scores: present where a unit reaches the threshold, counted in units."""
    counts, evidence, scores = {}, [], {}
    for k, behavior in enumerate(BEHAVIOR_NAMES):
        column = probabilities[:, k] if len(spans) else np.zeros(0)
        hits = np.nonzero(column >= thresholds[k])[0]
        counts[behavior] = len(hits)
        evidence += [Evidence(behavior, spans[i][0], spans[i][1], round(float(column[i]), 4)) for i in hits]
        scores[behavior] = float(column.max()) if len(column) else 0.0
    evidence.sort(key=lambda e: (e.start, BEHAVIOR_NAMES.index(e.behavior)))
    return Labels(counts=counts, evidence=evidence, scores=scores)


class SpanClassifier(Classifier):
    """The unit heads of the shipped model `name`, read from its folder under models/."""

    def __init__(self, name: str, batch_size: int = 64):
        self.name = name
        self.heads = SpanModel.load(MODELS / name)
        self.cues = get_classifier(CUES, batch_size=batch_size)
        # Attribute rows name the weights they came from, so a retrained model's tags are told apart.
        self.prompt_version = f"weights-{self.heads.digest}"

    def classify(self, texts: Sequence[str]) -> list[Labels]:
        out = []
        for text, cue_label in zip(texts, self.cues.classify(texts), strict=True):
            if cue_label.error is not None:
                out.append(cue_label)
                continue
            spans = units(text)
            probabilities = self.heads.unit_probabilities(text, spans, cue_label.evidence)
            out.append(labels_from_units(spans, probabilities, self.heads.thresholds))
        return out


@register("spans_v1")
def make_span_classifier(batch_size: int = 64) -> SpanClassifier:
    return SpanClassifier("spans_v1", batch_size)

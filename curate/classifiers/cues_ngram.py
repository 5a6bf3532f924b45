"""`cues_ngram_v1` and `v2`: one logistic head per behavior over a text's word n-grams and `cues_v11`'s counts.

Each cue revision raised its own tuning figures and moved the next fresh set by a point at most: a cue is one
writer's phrasing, and the next writer phrases it otherwise. A linear head over word 1-3-grams (TF-IDF, digits
folded to one symbol) and the cue counts learns from every labeled text at once. Measured by leaving one blind
round out of training and scoring it (bench/train_cues_ngram.py), it gains on real texts (round 13: macro F1 0.585
-> 0.658; round 5: 0.617 -> 0.662) and is mixed on Countdown traces (round 12: 0.762 -> 0.750; rounds 10 and 11,
which cues_v11 was tuned on: 0.864 -> 0.897 and 0.784 -> 0.808). On the rounds labeled after it was written, against
cues_v11: round 14 (Countdown) 0.76 -> 0.83, round 15 (real texts) 0.61 -> 0.65, round 17 (Countdown) 0.77 -> 0.81.

`cues_ngram_v2` is the same model trained on more text (rounds 14, 15 and 17 and the third precision read added) with
weaker regularization (C = 16, chosen leaving one round out among its training sets); its tests are rounds 18 and 19.

Each model ships in `models/cues_ngram_vN/`: `model.json` (vocabulary, settings, what it was trained on) and
`weights.npz` (plain arrays, loaded without pickle: a model file is data, never code). The features are computed
here, not by scikit-learn's vectorizer, so inference needs numpy alone; tests/classifiers/test_cues_ngram.py
checks them against scikit-learn's TfidfVectorizer.

A present behavior keeps its cue count (at least 1) and the cues' evidence; an absent one is 0 with no evidence;
`scores` holds each head's probability.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from curate.behaviors import BEHAVIOR_NAMES
from curate.classifiers.base import Classifier, get_classifier, register
from curate.classifiers.input_check import verify_input_check, write_input_check
from curate.errors import CurateError
from curate.schema import Labels

MODELS = Path(__file__).resolve().parent / "models"
MODEL_DIR = MODELS / "cues_ngram_v1"
FORMAT_VERSION = 1
# scikit-learn's default token: two or more word characters. Digits are folded first, so numbers drop out of
# the words and a trace is read for how it argues, not for which numbers it was given.
_TOKEN = re.compile(r"(?u)\b\w\w+\b")
_DIGITS = re.compile(r"\d+")
# The cue features are scaled so that a cue count weighs about as much as a strong n-gram in the L2-normed part.
CUE_WEIGHT = 3.0


class NgramModelError(CurateError, ValueError):
    pass


def tokens_of(text: str) -> list[str]:
    return _TOKEN.findall(_DIGITS.sub("N", text.lower()))


def ngrams(text: str, longest: int = 3) -> list[str]:
    """The text's word 1..longest-grams, in scikit-learn's order (all unigrams, then bigrams, ...)."""
    tokens = tokens_of(text)
    grams = list(tokens)
    for n in range(2, min(longest, len(tokens)) + 1):
        grams.extend(" ".join(tokens[i : i + n]) for i in range(len(tokens) - n + 1))
    return grams


@dataclass
class NgramFeatures:
    """TF-IDF over a fixed vocabulary (sublinear tf, smoothed idf, L2-normed rows) plus the cue features."""

    vocabulary: dict[str, int]
    idf: np.ndarray
    longest: int = 3

    def __post_init__(self):
        # Every proper prefix of a vocabulary n-gram: a longer n-gram is looked up only where its prefix could begin
        # one, so a text costs a lookup or two per word instead of `longest` string joins.
        self._prefixes = {" ".join(words[:k]) for g in self.vocabulary if len(words := g.split(" ")) > 1
                          for k in range(1, len(words))}

    @classmethod
    def fit(cls, texts: Sequence[str], min_df: int = 5, longest: int = 3) -> NgramFeatures:
        document_frequency: Counter[str] = Counter()
        for text in texts:
            document_frequency.update(set(ngrams(text, longest)))
        kept = sorted(g for g, df in document_frequency.items() if df >= min_df)
        n = len(texts)
        idf = np.array([math.log((1 + n) / (1 + document_frequency[g])) + 1 for g in kept])
        return cls({g: i for i, g in enumerate(kept)}, idf, longest)

    def term_counts(self, text: str) -> Counter[int]:
        """How often each vocabulary n-gram occurs in the text (those of `ngrams(text)` that are in the vocabulary)."""
        return Counter(self.hits(tokens_of(text))[1])

    def hits(self, tokens: Sequence[str]) -> tuple[list[int], list[int]]:
        """Every vocabulary n-gram among the tokens (`tokens_of`): the position of its first token, its column."""
        vocabulary, prefixes, longest = self.vocabulary, self._prefixes, self.longest
        positions, columns = [], []
        for i, gram in enumerate(tokens):
            for n in range(1, longest + 1):
                if n > 1:
                    if i + n > len(tokens) or gram not in prefixes:
                        break
                    gram = f"{gram} {tokens[i + n - 1]}"
                index = vocabulary.get(gram)
                if index is not None:
                    positions.append(i)
                    columns.append(index)
        return positions, columns

    def tfidf(self, text: str) -> tuple[np.ndarray, np.ndarray]:
        """The text's nonzero TF-IDF entries: (columns, values), the values L2-normed."""
        counts = self.term_counts(text)
        columns = np.fromiter(counts, int, len(counts))
        values = (1 + np.log(np.fromiter(counts.values(), float, len(counts)))) * self.idf[columns]
        norm = np.linalg.norm(values)
        return columns, (values / norm if norm else values)

    def ngram_matrix(self, texts: Sequence[str]):
        """The texts' TF-IDF rows as a scipy CSR matrix (training only: scoring reads each text's entries)."""
        from scipy.sparse import csr_matrix

        rows = [self.tfidf(text) for text in texts]
        pointers = np.cumsum([0] + [len(columns) for columns, _ in rows])
        columns = np.concatenate([c for c, _ in rows]) if rows else np.zeros(0, int)
        values = np.concatenate([v for _, v in rows]) if rows else np.zeros(0)
        return csr_matrix((values, columns, pointers), shape=(len(texts), len(self.vocabulary)))

    def matrix(self, texts: Sequence[str], cue_counts: np.ndarray):
        from scipy.sparse import csr_matrix, hstack

        return hstack([self.ngram_matrix(texts), csr_matrix(cue_features(cue_counts))]).tocsr()


def read_model_files(directory: Path, what: str) -> tuple[dict, bytes, tuple[np.ndarray, ...]]:
    """A model folder's model.json, its weights.npz bytes (for the digest), and its idf, coefficients and
    intercepts, read without pickle; refused if the cue classifier it reads (`cues` in model.json) now labels its
    check texts otherwise (inputs.json)."""
    try:
        meta = json.loads((directory / "model.json").read_text(encoding="utf-8"))
        weights = (directory / "weights.npz").read_bytes()
        with np.load(io.BytesIO(weights), allow_pickle=False) as arrays:
            arrays = tuple(arrays[k].astype(float) for k in ("idf", "coefficients", "intercepts"))
    except (OSError, ValueError, KeyError) as error:
        raise NgramModelError(f"cannot read the {what} in {directory}: {error}; reinstall curate") from error
    if "cues" in meta:
        verify_input_check(directory, meta["cues"])
    return meta, weights, arrays


def cue_features(cue_counts: np.ndarray) -> np.ndarray:
    counts = np.asarray(cue_counts, float)
    return np.hstack([np.log1p(counts), (counts > 0).astype(float)]) * CUE_WEIGHT


def counts_of(labels: Sequence[Labels]) -> np.ndarray:
    counts = [[label.counts.get(b) or 0 for b in BEHAVIOR_NAMES] for label in labels]
    return np.array(counts, float).reshape(-1, len(BEHAVIOR_NAMES))


@dataclass
class NgramModel:
    features: NgramFeatures
    coefficients: np.ndarray  # (behaviors, features)
    intercepts: np.ndarray  # (behaviors,)
    cues: str  # the cue classifier whose counts are features
    trained_on: dict  # set name -> texts, as the training script recorded it
    digest: str = ""  # of weights.npz, once loaded: attribute rows name the weights they came from

    def probabilities(self, texts: Sequence[str], cue_counts: np.ndarray) -> np.ndarray:
        """Each head's probability per text, from the text's nonzero n-gram entries (no vocabulary-wide row)."""
        split = len(self.features.vocabulary)
        margin = cue_features(cue_counts) @ self.coefficients[:, split:].T + self.intercepts
        for row, text in enumerate(texts):
            columns, values = self.features.tfidf(text)
            margin[row] += self.coefficients[:, columns] @ values
        return 1 / (1 + np.exp(-margin))

    def save(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        vocabulary = sorted(self.features.vocabulary, key=self.features.vocabulary.__getitem__)
        meta = {"format_version": FORMAT_VERSION, "cues": self.cues, "behaviors": list(BEHAVIOR_NAMES),
                "longest_ngram": self.features.longest, "cue_weight": CUE_WEIGHT, "trained_on": self.trained_on,
                "vocabulary": vocabulary}
        (directory / "model.json").write_text(json.dumps(meta, indent=0, ensure_ascii=False) + "\n", encoding="utf-8")
        np.savez_compressed(directory / "weights.npz", idf=self.features.idf.astype(np.float32),
                            coefficients=self.coefficients.astype(np.float32),
                            intercepts=self.intercepts.astype(np.float32))
        write_input_check(directory, self.cues)

    @classmethod
    def load(cls, directory: Path) -> NgramModel:
        meta, weights, (idf, coefficients, intercepts) = read_model_files(directory, "n-gram model")
        if (meta.get("format_version") != FORMAT_VERSION or meta.get("behaviors") != list(BEHAVIOR_NAMES)
                or meta.get("cue_weight") != CUE_WEIGHT):
            raise NgramModelError(f"{directory}/model.json is not a format-{FORMAT_VERSION} model of {BEHAVIOR_NAMES} "
                                  f"with cue weight {CUE_WEIGHT}")
        vocabulary = {g: i for i, g in enumerate(meta["vocabulary"])}
        if coefficients.shape != (len(BEHAVIOR_NAMES), len(vocabulary) + 2 * len(BEHAVIOR_NAMES)):
            raise NgramModelError(f"{directory}: weights of shape {coefficients.shape} do not fit the vocabulary")
        return cls(NgramFeatures(vocabulary, idf, meta["longest_ngram"]), coefficients, intercepts, meta["cues"],
                   meta["trained_on"], hashlib.sha256(weights).hexdigest()[:12])


def train(texts: Sequence[str], cue_counts: np.ndarray, gold: dict[str, Sequence[int]], cues: str,
          trained_on: dict, min_df: int = 5, regularization: float = 4.0) -> NgramModel:
    """Balanced logistic heads (scikit-learn), one per behavior, on the features of `texts`."""
    features = NgramFeatures.fit(texts, min_df=min_df)
    heads = fit_heads(features.matrix(texts, cue_counts), gold, regularization)
    return NgramModel(features, np.vstack([h.coef_[0] for h in heads]), np.array([h.intercept_[0] for h in heads]),
                      cues, trained_on)


def fit_heads(matrix, gold: dict[str, Sequence[int]], regularization: float = 4.0, weights=None) -> list:
    """One balanced logistic head per behavior over the rows of `matrix`, in BEHAVIOR_NAMES order: the fit every
    shipped model, every experiment on its features and `curate adapt` share (`weights`, per row: a user's label
    weighed against a shipped one)."""
    from sklearn.linear_model import LogisticRegression

    return [LogisticRegression(C=regularization, max_iter=3000, class_weight="balanced")
            .fit(matrix, gold[b], sample_weight=weights) for b in BEHAVIOR_NAMES]


class CueNgramClassifier(Classifier):
    """The heads of the shipped model `name`, read from its folder under models/."""

    def __init__(self, name: str, batch_size: int = 64):
        self.name = name
        self.heads = NgramModel.load(MODELS / name)
        self.cues = get_classifier(self.heads.cues, batch_size=batch_size)
        # Attribute rows name the weights they came from, so a retrained model's tags are told apart.
        self.prompt_version = f"weights-{self.heads.digest}"

    def classify(self, texts: Sequence[str]) -> list[Labels]:
        cue_labels = self.cues.classify(texts)
        probabilities = self.heads.probabilities(texts, counts_of(cue_labels))
        out = []
        for cue_label, row in zip(cue_labels, probabilities):
            if cue_label.error is not None:
                out.append(cue_label)
                continue
            present = {b: bool(p >= 0.5) for b, p in zip(BEHAVIOR_NAMES, row)}
            counts = {b: max(1, cue_label.counts.get(b) or 0) if present[b] else 0 for b in BEHAVIOR_NAMES}
            evidence = [e for e in cue_label.evidence if present[e.behavior]]
            out.append(Labels(counts=counts, evidence=evidence, scores={b: float(p) for b, p in zip(BEHAVIOR_NAMES, row)}))
        return out


@register("cues_ngram_v1")
def make_cue_ngram_classifier(batch_size: int = 64) -> CueNgramClassifier:
    return CueNgramClassifier("cues_ngram_v1", batch_size)


@register("cues_ngram_v2")
def make_cue_ngram_v2_classifier(batch_size: int = 64) -> CueNgramClassifier:
    return CueNgramClassifier("cues_ngram_v2", batch_size)

"""cues_ngram_v1 and v2: their features are scikit-learn's TF-IDF, each shipped model loads and labels consistently,
and a bad model file is a clear error."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from sklearn.feature_extraction.text import TfidfVectorizer

from curate.behaviors import BEHAVIOR_NAMES
from curate.classifiers import get_classifier
from curate.classifiers.cues_ngram import (MODEL_DIR, MODELS, NgramFeatures, NgramModel, NgramModelError, counts_of,
                                           train)
from tests.support.shared import sample_records


@pytest.fixture(scope="module")
def sample_texts() -> list[str]:
    return [r["text"] for r in sample_records()]


def test_features_are_scikit_learns_tfidf(sample_texts):
    # Written apart from the classifier: scikit-learn's vectorizer over the same digit-folded text.
    reference = TfidfVectorizer(ngram_range=(1, 3), min_df=3, sublinear_tf=True,
                                preprocessor=lambda t: re.sub(r"\d+", "N", t.lower()))
    expected = reference.fit_transform(sample_texts).toarray()
    features = NgramFeatures.fit(sample_texts, min_df=3)
    assert features.vocabulary == reference.vocabulary_
    np.testing.assert_allclose(features.idf, reference.idf_)
    np.testing.assert_allclose(features.ngram_matrix(sample_texts).toarray(), expected, atol=1e-12)


# Each version's test sets, labeled after it was written, stay out of its training.
TESTS_OF = {"cues_ngram_v1": {"blindset14", "blindset15", "blindset17", "precision3"},
            "cues_ngram_v2": {"blindset18", "blindset19"}}


@pytest.mark.parametrize("name", sorted(TESTS_OF))
def test_shipped_model_labels_follow_its_scores(sample_texts, name):
    classifier = get_classifier(name)
    assert classifier.name == name and classifier.prompt_version.startswith("weights-")
    meta = json.loads((MODELS / name / "model.json").read_text())
    assert not TESTS_OF[name] & set(meta["trained_on"])
    assert sum(meta["trained_on"].values()) > 3000
    texts = sample_texts[:60]
    labels = classifier.classify(texts)
    cue_labels = get_classifier(meta["cues"]).classify(texts)
    assert len(labels) == len(texts)
    for text, label, cue_label in zip(texts, labels, cue_labels):
        for behavior in BEHAVIOR_NAMES:
            present = label.scores[behavior] >= 0.5
            assert (label.counts[behavior] > 0) == present
            if present:
                assert label.counts[behavior] == max(1, cue_label.counts[behavior])
        assert all(label.counts[e.behavior] > 0 and 0 <= e.start < e.end <= len(text) for e in label.evidence)
    # The sample corpus is written to show behaviors: a model that found none, or all, would be broken.
    present = np.array([[label.counts[b] > 0 for b in BEHAVIOR_NAMES] for label in labels])
    assert 0 < present.mean() < 1


def test_a_model_saves_and_loads_to_the_same_probabilities(tmp_path, sample_texts):
    cue_counts = counts_of(get_classifier("cues_v11").classify(sample_texts))
    gold = {b: (cue_counts[:, k] > 0).astype(int) for k, b in enumerate(BEHAVIOR_NAMES)}
    model = train(sample_texts, cue_counts, gold, "cues_v11", {"sample": len(sample_texts)}, min_df=2)
    model.save(tmp_path / "m")
    again = NgramModel.load(tmp_path / "m")
    assert again.features.vocabulary == model.features.vocabulary and again.trained_on == {"sample": len(sample_texts)}
    np.testing.assert_allclose(again.probabilities(sample_texts, cue_counts),
                               model.probabilities(sample_texts, cue_counts), atol=1e-5)  # weights are float32


def test_a_damaged_model_is_a_clear_error(tmp_path):
    (tmp_path / "model.json").write_text((MODEL_DIR / "model.json").read_text())
    with pytest.raises(NgramModelError, match="cannot read the n-gram model.*reinstall curate"):
        NgramModel.load(tmp_path)  # weights.npz missing
    (tmp_path / "weights.npz").write_bytes((MODEL_DIR / "weights.npz").read_bytes())
    meta = json.loads((tmp_path / "model.json").read_text())
    (tmp_path / "model.json").write_text(json.dumps({**meta, "vocabulary": meta["vocabulary"][:-1]}))
    with pytest.raises(NgramModelError, match="do not fit the vocabulary"):
        NgramModel.load(tmp_path)

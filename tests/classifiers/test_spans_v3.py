"""spans_v3: spans_v2's texts and decision, its heads refitted with every genre carrying the same total weight
(bench/train_spans.py's `group_balanced`); tests/classifiers/test_spans_v2.py checks the decision for both."""

from __future__ import annotations

import json

import numpy as np
import pytest

from bench.train_spans import WRITTEN_BALANCE, balanced_group, group_balanced
from curate.classifiers import get_classifier
from curate.classifiers.spans import MODELS


def test_every_genre_carries_the_same_total_weight_and_the_sum_is_kept():
    groups = ["countdown/near-miss", "countdown/small-model", "countdown/small-model", "forum", "worked_solution",
              "worked_solution", "worked_solution", "forum"]
    weights = np.array([1.0, 0.5, 0.5, 1.0, 1.0, 1.0, 1.0, 2.0])
    by_genre = [balanced_group(g, WRITTEN_BALANCE["spans_v3"]) for g in groups]
    assert by_genre[:3] == ["countdown"] * 3
    balanced = group_balanced(weights, by_genre)
    assert balanced.sum() == pytest.approx(weights.sum())
    totals = {g: balanced[[i for i, h in enumerate(by_genre) if h == g]].sum() for g in set(by_genre)}
    assert all(total == pytest.approx(weights.sum() / 3) for total in totals.values())
    # Within a genre, texts keep their weights relative to each other (a multiple-instance text's units stay 1/n).
    assert balanced[1] / balanced[0] == pytest.approx(0.5) and balanced[7] / balanced[3] == pytest.approx(2.0)


def test_trained_on_spans_v2s_texts_with_genre_balanced_weights_and_heads_of_its_own():
    mine = json.loads((MODELS / "spans_v3" / "model.json").read_text())["trained_on"]
    theirs = json.loads((MODELS / "spans_v2" / "model.json").read_text())["trained_on"]
    assert mine["weights_balanced_by"] == "genre" and "weights_balanced_by" not in theirs
    assert mine["text_sha256"] == theirs["text_sha256"]
    v2, v3 = get_classifier("spans_v2").heads, get_classifier("spans_v3").heads
    for a, b in ((v2.units, v3.units), (v2.evidence, v3.evidence), (v2.document, v3.document)):
        assert a.coefficients.shape != b.coefficients.shape or not np.allclose(a.coefficients, b.coefficients)

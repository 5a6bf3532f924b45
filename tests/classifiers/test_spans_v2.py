"""spans_v2 and spans_v3 (the same decision over heads trained with genre-balanced weights): presence from the mean
of a document head and the best unit, instances as runs of units that the unbalanced evidence heads pick, and a label
that follows from them."""

from __future__ import annotations

import json
from itertools import pairwise

import numpy as np
import pytest

from curate.behaviors import BEHAVIOR_NAMES
from curate.classifiers import get_classifier
from curate.classifiers.cues_ngram import counts_of
from curate.classifiers.spans import MODELS, units
from curate.classifiers.spans_v2 import PRESENCE_THRESHOLD, instances

TEXTS = [
    ("Numbers: 25, 5, 3\nTarget: 22\n\n25 - 5 = 20, 20 + 3 = 23, not 22. That doesn't work. "
     "Let me try another way: 25 - 3 = 22. Check: 25 - 3 = 22, which matches the target."),
    "First we find the radius. Then we use it to get the area: r = 3, so the area is 9 pi. Check: 9 pi / pi = 9 = r^2.",
    "The sum of the angles of a triangle is 180 degrees.",
    "Let me check: 7 * 8 = 56, and 56 / 8 = 7, so the product is right.",
    "",
]


@pytest.fixture(scope="module", params=["spans_v2", "spans_v3"])
def spans_v2(request):
    return get_classifier(request.param)


def test_presence_is_the_mean_of_the_document_head_and_the_best_unit(spans_v2):
    heads = spans_v2.heads
    cue_labels = spans_v2.cues.classify(TEXTS)
    document = heads.document.probabilities(TEXTS, counts_of(cue_labels))
    for text, cue_label, document_row, label in zip(TEXTS, cue_labels, document, spans_v2.classify(TEXTS)):
        spans = units(text)
        best = (heads.units.unit_probabilities(text, spans, cue_label.evidence).max(axis=0) if spans
                else np.zeros(len(BEHAVIOR_NAMES)))
        for k, behavior in enumerate(BEHAVIOR_NAMES):
            assert label.scores[behavior] == pytest.approx((best[k] + document_row[k]) / 2)
            assert bool(label.counts[behavior]) == (label.scores[behavior] >= PRESENCE_THRESHOLD and bool(spans))


def test_a_label_counts_its_instances_and_each_instance_is_a_run_of_whole_units(spans_v2):
    for text, label in zip(TEXTS, spans_v2.classify(TEXTS)):
        assert label.error is None
        starts = {s for s, _ in units(text)}
        ends = {e for _, e in units(text)}
        for behavior in BEHAVIOR_NAMES:
            mine = sorted((e.start, e.end) for e in label.evidence if e.behavior == behavior)
            assert label.counts[behavior] == len(mine)
            assert all(start in starts and end in ends for start, end in mine)
            assert all(a_end < b_start for (_, a_end), (b_start, _) in pairwise(mine))
    countdown = spans_v2.classify(TEXTS[:1])[0]
    assert countdown.counts["verification"] >= 1 and countdown.counts["backtracking"] >= 1


def test_adjacent_evidence_units_are_one_instance_and_a_present_text_shows_its_best_unit():
    spans = [(0, 10), (11, 20), (21, 30), (31, 40)]
    unit = np.array([0.9, 0.95, 0.2, 0.7])
    picked = instances(spans, unit, np.array([0.6, 0.8, 0.1, 0.55]))
    assert [(s, e) for s, e, _ in picked] == [(0, 20), (31, 40)]
    assert [score for _, _, score in picked] == [0.8, 0.55]
    # No unit reaches the evidence threshold: the unit heads' best unit is the one instance, with its evidence score.
    assert instances(spans, unit, np.array([0.1, 0.3, 0.0, 0.2])) == [(11, 20, 0.3)]


def test_one_decisive_sentence_in_a_long_trace_is_found(spans_v2):
    filler = " ".join(f"Next, term {i} of the expansion is {i} x^{i}, and we add it to the sum." for i in range(300))
    decisive = "Hmm, that doesn't seem helpful. Maybe factoring isn't the way to go; let me try substitution instead."
    text = f"{filler}\n\n{decisive}\n\n{filler}"
    label = spans_v2.classify([text])[0]
    start = text.index(decisive)
    assert any(e.behavior == "backtracking" and start <= e.start < start + len(decisive) for e in label.evidence)


def test_the_three_sets_of_heads_were_trained_on_the_same_texts_without_the_test_rounds(spans_v2):
    meta = json.loads((MODELS / spans_v2.name / "model.json").read_text())
    document = json.loads((MODELS / spans_v2.name / "document" / "model.json").read_text())
    assert not {"blindset18", "blindset19"} & set(meta["trained_on"]["sets"])
    assert document["trained_on"] == {"texts": meta["trained_on"]["texts"], "same_texts_as": spans_v2.name}
    assert spans_v2.heads.evidence.coefficients.shape == spans_v2.heads.units.coefficients.shape
    assert not np.allclose(spans_v2.heads.evidence.intercepts, spans_v2.heads.units.intercepts)

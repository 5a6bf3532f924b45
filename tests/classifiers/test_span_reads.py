"""The texts written here to train on and the unseen-source read: quotes that align, labels that follow from the
spans, and no text of the unseen read or of the test rounds that shares a word 8-gram with a text written here or
labeled elsewhere (a figure for "unseen" must not score a near-duplicate of a training text)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from curate.behaviors import BEHAVIOR_NAMES

ROOT = Path(__file__).resolve().parents[2]
WRITTEN = ROOT / "evals" / "spans" / "written"
UNSEEN = ROOT / "evals" / "spans" / "unseen"
GROUPS = {"none", "forum", "long_model_trace", "short_model_step", "worked_solution", "mcqa_rationale",
          "countdown/near-miss", "countdown/small-model", "countdown/strong-model"}


def shingles(text: str) -> set[str]:
    words = text.lower().split()
    return {" ".join(words[i:i + 8]) for i in range(len(words) - 7)}


def written_rows() -> list[dict]:
    return [json.loads(line) for path in sorted(WRITTEN.glob("*.jsonl")) for line in path.read_text().splitlines()]


def test_every_written_quote_is_in_its_text_as_often_as_its_occurrence_says():
    rows = written_rows()
    assert len(rows) >= 400 and len({row["id"] for row in rows}) == len(rows)
    for row in rows:
        assert row["imitates"] in GROUPS, row["id"]
        for span in row["spans"]:
            assert span["behavior"] in BEHAVIOR_NAMES
            assert row["text"].count(span["quote"]) >= span.get("occurrence", 1), (row["id"], span["quote"])


def test_written_texts_reach_training_with_their_writers_spans():
    from bench.train_spans import unit_rows, written_texts

    items, read = written_texts()
    rows = unit_rows(items, read)
    assert len(rows) == len(written_rows())
    for row in rows:
        assert row["group"].startswith("written/") and row["read"]
        for behavior in BEHAVIOR_NAMES:
            # a text its writer quoted a behavior in has a unit labeled with it, and no other text has one
            assert any(row["labels"][behavior]) == bool(row["item"]["labels"][behavior]), (row["item"]["id"], behavior)


def test_unseen_read_labels_follow_from_their_spans_and_cover_the_dev_part():
    items = {row["id"]: row for row in map(json.loads, (UNSEEN / "items.jsonl").read_text().splitlines())}
    labels = [json.loads(line) for line in (UNSEEN / "labels.jsonl").read_text().splitlines()]
    assert {row["id"] for row in labels} >= {i for i, item in items.items() if item["part"] == "dev"}
    for row in labels:
        assert row["id"] in items
        for span in row["spans"]:
            assert span["behavior"] in BEHAVIOR_NAMES and 0 <= span["start"] < span["end"]
        assert row["labels"] == {b: int(any(s["behavior"] == b for s in row["spans"])) for b in BEHAVIOR_NAMES}


def test_no_unseen_or_test_round_text_shares_an_8gram_with_a_written_or_labeled_training_text(shared_data):
    from evals.spans.draw import labeled_items
    from evals.spans.draw_unseen import resolve

    unseen_items = [json.loads(line) for line in (UNSEEN / "items.jsonl").read_text().splitlines()]
    unseen = resolve(unseen_items)
    assert len(unseen) == len(unseen_items)
    labeled = labeled_items()
    test_rounds = [item["text"] for item in labeled if item["set"] in ("blindset18", "blindset19")]
    training = [item["text"] for item in labeled if item["set"] not in ("blindset18", "blindset19")]
    written = [row["text"] for row in written_rows()]
    seen_unseen = set().union(*map(shingles, unseen.values()))
    for text in training + written:
        assert not shingles(text) & seen_unseen, text[:80]
    # A few written texts share a stock phrase with a test-round text; a version trained with them leaves those out.
    from bench.train_spans import shipped_training, span_labels, unit_rows

    rows = unit_rows([item for item in labeled if item["set"] not in ("blindset18", "blindset19")], span_labels())
    kept, dropped = shipped_training(labeled, rows, written=True)
    assert sum(r["item"]["set"] == "written" for r in kept) + dropped >= len(written)
    seen_rounds = set().union(*map(shingles, test_rounds))
    overlapping = [r["item"]["id"] for r in kept if shingles(r["text"]) & seen_rounds]
    assert not overlapping, overlapping[:5]


def test_pooled_macro_weighs_every_held_out_text_alike():
    import numpy as np

    from bench.train_spans import pooled_macro

    # forum: one text with verification, missed; long traces: nine with it, all found; the other behaviors are absent
    # and predicted absent everywhere (F1 1). Mean over genres: verification (0 + 1) / 2; pooled: 2 * 9 / (10 + 9).
    forum = (np.array([[1, 0, 0, 0]]), np.array([[0, 0, 0, 0]]))
    traces = (np.tile([1, 0, 0, 0], (9, 1)), np.tile([1, 0, 0, 0], (9, 1)))
    countdown = (np.array([[1, 1, 1, 1]]), np.array([[0, 0, 0, 0]]))
    decided = {"forum": forum, "long_model_trace": traces, "countdown/near-miss": countdown}
    assert pooled_macro(decided, real=True) == pytest.approx((18 / 19 + 3) / 4)
    assert pooled_macro(decided, real=False) == 0.0


def test_an_evidence_bar_above_the_threshold_keeps_fewer_units_and_falls_back_to_the_best():
    import numpy as np

    from bench.train_spans import evidence_of

    spans = [(0, 10), (11, 20), (21, 30)]
    unit, evidence = np.array([0.9, 0.6, 0.2]), np.array([0.85, 0.55, 0.1])
    assert evidence_of(spans, unit, evidence, True, "calibrated") == [(0, 20)]
    assert evidence_of(spans, unit, evidence, True, "calibrated>=0.8") == [(0, 10)]
    assert evidence_of(spans, unit, evidence, True, "calibrated>=0.9") == [(0, 10)]  # none reaches it: the best unit
    assert evidence_of(spans, unit, evidence, False, "calibrated>=0.8") == []

"""spans_v1: units cut at sentence and line ends, a label that follows from its spans, evidence in the attribute row,
and a span read whose test rounds share no text with the model's training texts."""

from __future__ import annotations

import json
import re
from itertools import pairwise
from pathlib import Path

import pyarrow as pa
import pytest

from curate.behaviors import BEHAVIOR_NAMES
from curate.classifiers import get_classifier
from curate.classifiers.spans import MODELS, countdown_target, units
from curate.schema import ATTRIBUTE_SCHEMA, attribute_row

ROOT = Path(__file__).resolve().parents[2]
SPANS = ROOT / "evals" / "spans"


@pytest.fixture(scope="module")
def spans_v1():
    return get_classifier("spans_v1")


def test_units_are_trimmed_sentences_and_lines_that_tile_the_text():
    text = "First we find r. Then the area is 3.14 * r^2!  Is it 12?\nYes: 12 = 12.\n\n  - a list item\n"
    cut = units(text)
    assert [text[s:e] for s, e in cut] == ["First we find r.", "Then the area is 3.14 * r^2!", "Is it 12?",
                                          "Yes: 12 = 12.", "- a list item"]
    assert all(a_end <= b_start for (_, a_end), (b_start, _) in pairwise(cut))
    assert units("") == [] and units("   \n\n ") == []


def test_a_long_line_is_cut_at_clauses_so_a_verdict_inside_it_stands_alone():
    line = "; ".join(f"step {i} adds {i} to the running total of the numbers seen so far" for i in range(12))
    pieces = units(line)
    assert len(pieces) > 1 and all(e - s <= 400 for s, e in pieces)
    assert "".join(re.sub(r"\s", "", line[s:e]) for s, e in pieces) == re.sub(r"[\s]", "", line)


def test_countdown_target_is_read_from_the_problem_statement():
    assert countdown_target("Numbers: 3, 5, 7, 9\nTarget: 24\n\n3 * 8 = 24") == 24
    assert countdown_target("Using the numbers [44, 19, 35], create an equation that equals 98. target is 98") == 98
    assert countdown_target("A proof about groups.") is None


def test_a_document_label_follows_from_its_spans(spans_v1):
    texts = [
        ("Numbers: 25, 5, 3\nTarget: 22\n\n25 - 5 = 20, 20 + 3 = 23, not 22. That doesn't work. "
         "Let me try another way: 25 - 3 = 22. Check: 25 - 3 = 22, which matches the target."),
        "The sum of the angles of a triangle is 180 degrees.",
        "",
    ]
    thresholds = spans_v1.heads.thresholds
    for text, label in zip(texts, spans_v1.classify(texts)):
        assert label.error is None
        for k, behavior in enumerate(BEHAVIOR_NAMES):
            mine = [e for e in label.evidence if e.behavior == behavior]
            assert label.counts[behavior] == len(mine)
            assert all(e.score >= thresholds[k] for e in mine)
            assert all((e.start, e.end) in units(text) for e in mine)
            assert (label.scores[behavior] >= thresholds[k]) == bool(mine)
    decisive = spans_v1.classify(texts[:1])[0]
    assert decisive.counts["verification"] >= 1 and decisive.counts["backtracking"] >= 1


def test_one_decisive_sentence_in_a_long_trace_is_found(spans_v1):
    filler = " ".join(f"Next, term {i} of the expansion is {i} x^{i}, and we add it to the sum." for i in range(300))
    decisive = "Hmm, that doesn't seem helpful. Maybe factoring isn't the way to go; let me try substitution instead."
    text = f"{filler}\n\n{decisive}\n\n{filler}"
    label = spans_v1.classify([text])[0]
    assert label.counts["backtracking"] >= 1
    start = text.index(decisive)
    assert any(e.behavior == "backtracking" and start <= e.start < start + len(decisive) for e in label.evidence)


def test_evidence_scores_reach_the_attribute_row(spans_v1):
    text = "Let me check: 7 * 8 = 56, and 56 / 8 = 7, so the product is right."
    label = spans_v1.classify([text])[0]
    row = attribute_row("d1", len(text), label, spans_v1.name, None, spans_v1.prompt_version)
    table = pa.Table.from_pylist([row], schema=ATTRIBUTE_SCHEMA)
    evidence = table.column("evidence").to_pylist()[0]
    assert [(e["behavior"], e["start"], e["end"]) for e in evidence] == [(e.behavior, e.start, e.end)
                                                                        for e in label.evidence]
    assert all(e["score"] is not None and 0 <= e["score"] <= 1 for e in evidence)


def test_the_shipped_model_names_what_it_was_trained_on_and_left_out():
    meta = json.loads((MODELS / "spans_v1" / "model.json").read_text())
    assert meta["trained_on"]["span_read_texts"] > 0
    assert not {"blindset18", "blindset19"} & set(meta["trained_on"]["sets"])


def test_span_read_is_aligned_and_its_labels_follow_from_its_spans():
    items = {row["id"]: row for row in map(json.loads, (SPANS / "items.jsonl").read_text().splitlines())}
    rows = [json.loads(line) for line in (SPANS / "labels.jsonl").read_text().splitlines()]
    assert len(rows) == len(items) == 360
    for row in rows:
        assert row["id"] in items
        for span in row["spans"]:
            assert span["behavior"] in BEHAVIOR_NAMES and 0 <= span["start"] < span["end"]
        assert row["labels"] == {b: int(any(s["behavior"] == b for s in row["spans"])) for b in BEHAVIOR_NAMES}


@pytest.mark.parametrize("version", ["spans_v1", "spans_v2", "spans_v3"])
def test_no_test_round_text_overlaps_a_text_the_model_trained_on(shared_data, version):
    """The model's figures on rounds 18 and 19 read texts it never saw: no training text (by the digests model.json
    keeps) shares a word 8-gram with a test text, which catches near-duplicates as well as copies."""
    from evals.spans.draw import digest, labeled_items

    trained = set(json.loads((MODELS / version / "model.json").read_text())["trained_on"]["text_sha256"])
    items = labeled_items()

    def shingles(text: str) -> set[str]:
        words = text.lower().split()
        return {" ".join(words[i:i + 8]) for i in range(len(words) - 7)}

    test = [item for item in items if item["set"] in ("blindset18", "blindset19")]
    training = [item for item in items if digest(item["text"]) in trained]
    assert len(test) == 180 + 242 and len(training) == len(trained)
    seen = set().union(*(shingles(item["text"]) for item in test))
    overlapping = [item["id"] for item in training if shingles(item["text"]) & seen]
    assert not overlapping, f"training texts sharing an 8-gram with a test text: {overlapping[:5]}"

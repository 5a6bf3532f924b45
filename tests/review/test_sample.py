"""The review sample's design: equal shares per stratum, capped by the stratum's size; every stratum drawn without
repeats; the folder that holds a sample keeps it, and one drawn otherwise is refused."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from curate.behaviors import BEHAVIOR_NAMES
from curate.pipelines.readers import InputSpec
from curate.review.sample import ReviewError, TaggedRow, allocate, create_sample, draw, read_sample
from curate.schema import ATTRIBUTE_SCHEMA, Evidence, Labels, attribute_row


def test_each_stratum_gets_an_equal_share_and_a_small_one_passes_on_what_it_cannot_take():
    assert allocate({"a": 1000, "b": 1000, "c": 1000}, 90) == {"a": 30, "b": 30, "c": 30}
    assert allocate({"a": 1000, "b": 5, "c": 1000}, 90) == {"a": 43, "b": 5, "c": 42}
    assert allocate({"a": 3, "b": 4}, 90) == {"a": 3, "b": 4}  # the whole corpus, no more


def test_strata_follow_the_rarest_predicted_behavior_and_the_distance_of_the_scores_from_the_threshold():
    rows = []
    for i in range(400):
        predicted = dict.fromkeys(BEHAVIOR_NAMES, 0)
        predicted["verification"] = int(i % 2 == 0)  # predicted in half
        predicted["backward_chaining"] = int(i % 40 == 0)  # predicted in 10, always beside verification
        near = i % 4 < 2
        rows.append(TaggedRow(f"d{i}", predicted, {b: 0.6 if near and v else (0.9 if v else 0.1)
                                                   for b, v in predicted.items()}))
    drawn, design = draw(rows, 60, seed=0)
    sizes = {name: s["size"] for name, s in design["strata"].items()}
    assert sizes == {"backward_chaining/near": 10, "verification/near": 90, "verification/far": 100, "none/far": 200}
    # 15 each; the rare stratum takes its 10 and the 5 left go to the others (the odd one to the first by name).
    assert {name: s["sample"] for name, s in design["strata"].items()} == {
        "backward_chaining/near": 10, "verification/near": 16, "verification/far": 17, "none/far": 17}
    assert len({row.id for row, _ in drawn}) == 60
    assert Counter(stratum for _, stratum in drawn) == {name: s["sample"] for name, s in design["strata"].items()}
    # Shuffled across strata: the first quarter already holds three of the four.
    assert len({stratum for _, stratum in drawn[:15]}) >= 3


@pytest.fixture
def tagged(tmp_path):
    texts = {f"d{i}": f"Document {i}. Let me check: {i} + 1 = {i + 1}." for i in range(30)}
    (tmp_path / "corpus.jsonl").write_text("".join(json.dumps({"id": k, "text": v}) + "\n" for k, v in texts.items()))
    rows = []
    for i, doc_id in enumerate(texts):
        counts = {b: int(i % (k + 2) == 0) for k, b in enumerate(BEHAVIOR_NAMES)}
        evidence = [Evidence("verification", 13, 25)] if counts["verification"] else []
        rows.append(attribute_row(doc_id, len(texts[doc_id]), Labels(counts=counts, evidence=evidence), "cues_v12",
                                  None, None, "corpus.jsonl"))
    (tmp_path / "tags").mkdir()
    pq.write_table(pa.Table.from_pylist(rows, schema=ATTRIBUTE_SCHEMA), tmp_path / "tags" / "00000.parquet")
    return tmp_path, texts


def test_the_sample_holds_text_and_spans_and_a_folder_drawn_otherwise_is_refused(tagged):
    folder, texts = tagged
    spec = InputSpec(str(folder / "corpus.jsonl"))
    design = create_sample(folder / "tags", spec, folder / "review", sample=12, seed=1)
    assert design["classifier"] == "cues_v12" and design["documents"] == 30
    sample = read_sample(folder / "review")
    assert len(sample) == 12
    for doc in sample:
        assert doc["text"] == texts[doc["id"]] and doc["scores"] is None
        # Every field of the row's evidence travels (a span classifier's span score too); these are the cue spans.
        where = [(span["behavior"], span["start"], span["end"]) for span in doc["spans"]]
        assert where == ([("verification", 13, 25)] if doc["predicted"]["verification"] else [])
        assert doc["stratum_size"] == design["strata"][doc["stratum"]]["size"]
    assert sum(s["size"] for s in design["strata"].values()) == 30
    assert create_sample(folder / "tags", spec, folder / "review", sample=12, seed=1) == design  # reopened, kept
    with pytest.raises(ReviewError, match="other settings"):
        create_sample(folder / "tags", spec, folder / "review", sample=12, seed=2)
    other = folder / "other.jsonl"
    other.write_text(json.dumps({"id": "x", "text": "unrelated"}) + "\n")
    with pytest.raises(ReviewError, match="not in the corpus"):
        create_sample(folder / "tags", InputSpec(str(other)), folder / "review2", sample=12, seed=1)
    assert np.all([not (folder / "review2" / name).exists() for name in ("sample.jsonl", "design.json")])

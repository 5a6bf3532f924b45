"""distilled_v1 at sentence level: heads on unit embeddings, trained on spans_v1's unit decisions (the teacher is a
model, not readers), tag texts with evidence at unit offsets."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from curate.behaviors import BEHAVIOR_NAMES
from curate.classifiers import get_classifier
from curate.classifiers.distilled import DistilledModelError, load_model_dir
from curate.classifiers.spans import units
from curate.pipelines.distill import train_distilled, unit_labels, unit_targets
from curate.pipelines.query import parquet_files
from curate.pipelines.readers import InputSpec
from curate.pipelines.tag import run_tagging

LONGCOT = "longcot_skythought/sky-t1-math-correct-5K-27B_math500.jsonl"
TRACES = 10
PIECE = 900


@pytest.fixture(scope="module")
def sentence_model(tmp_path_factory):
    """The openings of long traces (spans_v1 finds checks and turns back in them) beside textbook solutions of the
    same problems, tagged by spans_v1 through `run_tagging`, distilled with --level sentence."""
    from tests.support.shared import SHARED_DATA

    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared data not found at {SHARED_DATA}")
    root = tmp_path_factory.mktemp("distill-sentences")
    rows = [json.loads(line) for line in (SHARED_DATA / LONGCOT).open()][:TRACES]
    corpus = root / "docs.jsonl"
    with corpus.open("w") as f:
        for r in rows:
            f.write(json.dumps({"id": f"trace-{r['idx']}", "text": r["code"][0][:PIECE]}) + "\n")
            f.write(json.dumps({"id": f"solution-{r['idx']}", "text": r["gt_cot"][:PIECE]}) + "\n")
    spec = InputSpec(path=str(corpus))
    tags = run_tagging(spec, root / "tags", "spans_v1", progress=False).tags_dir
    report = train_distilled(tags, spec, root / "model", max_chunks=1, validation=0.2, test=0.2, min_positives=3,
                             seed=0, progress=False, level="sentence")
    texts = [json.loads(line)["text"] for line in corpus.open()]
    return {"root": root, "spec": spec, "tags": tags, "report": report, "texts": texts}


def test_trains_on_units_and_records_the_level(sentence_model):
    report = sentence_model["report"]
    assert report.level == "sentence" and report.label_classifier == "spans_v1"
    assert report.units == sum(len(units(t)) for t in sentence_model["texts"])
    trained = [r for r in report.behaviors if r.trained]
    assert trained, report.warnings
    # Counts are of units: there are many more units than documents in each part.
    assert sum(trained[0].label_counts["train"].values()) > report.documents
    metadata, heads = load_model_dir(report.model_dir)
    assert (metadata["level"], metadata["format_version"], metadata["label_classifier"]) == ("sentence", 3, "spans_v1")
    assert set(heads.behaviors) == {r.behavior for r in trained}


def test_tags_with_evidence_at_unit_offsets_agreeing_with_the_teacher(sentence_model, tmp_path):
    model_dir = sentence_model["report"].model_dir
    result = run_tagging(sentence_model["spec"], tmp_path / "tags", f"distilled:{model_dir}", progress=False)
    (shard,) = parquet_files(result.tags_dir)
    rows = {r["id"]: r for r in pq.read_table(shard).to_pylist()}
    (teacher_shard,) = parquet_files(sentence_model["tags"])
    teacher = {r["id"]: r for r in pq.read_table(teacher_shard).to_pylist()}
    _, heads = load_model_dir(model_dir)
    agree = total = 0
    for document in map(json.loads, Path(sentence_model["spec"].path).read_text().splitlines()):
        row, spans = rows[document["id"]], set(units(document["text"]))
        for b in BEHAVIOR_NAMES:
            found = [e for e in row["evidence"] if e["behavior"] == b]
            # Present when one unit is; the count is the number of units; each piece of evidence is a whole unit.
            assert row[b] == (len(found) if b in heads.behaviors else None)
            assert all((e["start"], e["end"]) in spans and e["score"] >= heads.thresholds[b] for e in found)
        student = unit_targets(units(document["text"]), [(e["behavior"], e["start"], e["end"]) for e in row["evidence"]])
        gold = unit_targets(units(document["text"]),
                            [(e["behavior"], e["start"], e["end"]) for e in teacher[document["id"]]["evidence"]])
        for k, b in enumerate(BEHAVIOR_NAMES):
            if b in heads.behaviors:
                agree += int((student[:, k] == gold[:, k]).sum())
                total += len(gold)
    # The heads reproduce the teacher's unit decisions on most units (they saw 60 % of these documents).
    assert total and agree / total >= 0.8, agree / total
    labels = get_classifier(f"distilled:{model_dir}").classify(["", "Wait, that is wrong. Let me check it again."])
    assert all(labels[0].counts[b] in (0, None) for b in BEHAVIOR_NAMES) and labels[0].evidence == []


def test_unit_labels_follow_the_teacher_evidence():
    text = "First we add. Then 3 + 4 = 7. Wait, that is wrong."
    spans = units(text)
    assert len(spans) == 3
    evidence = [("backtracking", text.index("Wait"), len(text)), ("verification", text.index("3"), text.index("7") + 1)]
    targets = unit_labels(spans, (1, 1, 1, None), evidence)
    assert targets[:, BEHAVIOR_NAMES.index("backtracking")].tolist() == [0, 0, 1]
    assert targets[:, BEHAVIOR_NAMES.index("verification")].tolist() == [0, 1, 0]
    # Said present with no unit pointed at, or not told: unknown, left out of training.
    assert targets[:, BEHAVIOR_NAMES.index("subgoal_setting")].tolist() == [-1, -1, -1]
    assert targets[:, BEHAVIOR_NAMES.index("backward_chaining")].tolist() == [-1, -1, -1]


def test_level_and_format_must_agree(sentence_model, tmp_path):
    model_dir = sentence_model["report"].model_dir
    metadata = json.loads((model_dir / "distilled.json").read_text())
    metadata["format_version"] = 1
    (tmp_path / "distilled.json").write_text(json.dumps(metadata))
    (tmp_path / "heads.npz").write_bytes((model_dir / "heads.npz").read_bytes())
    with pytest.raises(DistilledModelError, match="does not go with"):
        load_model_dir(tmp_path)
    assert load_model_dir(model_dir)[0]["level"] == "sentence"

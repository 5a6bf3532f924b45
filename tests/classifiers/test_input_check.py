"""A model that reads another classifier's output refuses to load when that classifier labels otherwise."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from curate.classifiers import get_classifier
from curate.classifiers.cues_ngram import MODELS, NgramModel
from curate.classifiers.input_check import INPUT_CHECK, InputClassifierChanged

SHIPPED = sorted(p.parent for p in MODELS.glob("*/model.json"))


@pytest.mark.parametrize("folder", SHIPPED, ids=lambda p: p.name)
def test_every_shipped_model_that_reads_a_classifier_carries_a_passing_check(folder: Path):
    meta = json.loads((folder / "model.json").read_text(encoding="utf-8"))
    assert "cues" in meta
    record = json.loads((folder / INPUT_CHECK).read_text(encoding="utf-8"))
    assert record["classifier"] == meta["cues"]
    labels = get_classifier(record["classifier"]).classify(record["texts"])
    shown = {b for label in labels for b, count in label.counts.items() if count}
    assert len(shown) == 4, "the check texts must exercise every behavior's cues"
    assert get_classifier(folder.name).classify(["Let me check: 3 + 4 = 7. Correct."])[0].error is None


def _copy(tmp_path: Path) -> Path:
    folder = tmp_path / "cues_ngram_copy"
    shutil.copytree(MODELS / "cues_ngram_v1", folder)
    return folder


def test_a_changed_input_classifier_refuses_the_model(tmp_path: Path):
    folder = _copy(tmp_path)
    assert NgramModel.load(folder).cues == "cues_v11"
    changed = tmp_path / "changed"
    shutil.copytree(folder, changed)
    record = json.loads((changed / INPUT_CHECK).read_text(encoding="utf-8"))
    # The recorded digest no longer matches what cues_v11 says of the check texts: as if its rules had moved.
    record["texts"][0] += " Wait, that is wrong. Let me try another approach instead. Let me verify: 2 + 2 = 4."
    (changed / INPUT_CHECK).write_text(json.dumps(record), encoding="utf-8")
    with pytest.raises(InputClassifierChanged, match="cues_v11 now labels the check texts"):
        NgramModel.load(changed)


def test_a_check_written_for_another_classifier_is_refused(tmp_path: Path):
    folder = _copy(tmp_path)
    record = json.loads((folder / INPUT_CHECK).read_text(encoding="utf-8"))
    record["classifier"] = "cues_v10"
    (folder / INPUT_CHECK).write_text(json.dumps(record), encoding="utf-8")
    with pytest.raises(InputClassifierChanged, match="written for cues_v10"):
        NgramModel.load(folder)


def test_saving_a_model_records_its_check_and_it_loads(tmp_path: Path):
    model = NgramModel.load(MODELS / "cues_ngram_v2")
    model.save(tmp_path / "saved")
    record = json.loads((tmp_path / "saved" / INPUT_CHECK).read_text(encoding="utf-8"))
    assert record["classifier"] == "cues_v11" and record["texts"]
    assert NgramModel.load(tmp_path / "saved").digest == model.digest


def test_a_model_written_before_checks_loads_unchecked(tmp_path: Path):
    folder = _copy(tmp_path)
    (folder / INPUT_CHECK).unlink()
    assert NgramModel.load(folder).cues == "cues_v11"

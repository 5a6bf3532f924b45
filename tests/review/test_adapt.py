"""`curate adapt` on a labeled corpus it never saw in training: blind round 14's Countdown traces (cues_ngram_v1's test
set, never its training) stand for the user's corpus and labels, round 12's traces (in v1's training) for the shipped
labels. The written model is read back through the classifier registry and checked against the base model's own
scores, and the cross-validated base figure against scikit-learn's F1 of the base labels."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from sklearn.metrics import f1_score

from curate.behaviors import BEHAVIOR_NAMES
from curate.classifiers import get_classifier
from curate.classifiers.cues_ngram import MODELS
from curate.pipelines.readers import InputSpec
from curate.review.adapt import adapt
from curate.review.jobs import AdaptJob
from curate.review.sample import ReviewError

ROUNDS = Path(__file__).resolve().parents[2] / "evals" / "blindset"


def labeled_round(name: str) -> list[dict]:
    texts = {json.loads(line)["id"]: json.loads(line)["text"]
             for line in (ROUNDS / name / "countdown_traces.jsonl").read_text().splitlines()}
    return [{"id": label["id"], "text": texts[label["id"]], "labels": label["labels"]}
            for label in map(json.loads, (ROUNDS / name / "labels.jsonl").read_text().splitlines())]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    folder = tmp_path_factory.mktemp("adapt")
    user = labeled_round("round14")
    (folder / "corpus.jsonl").write_text("".join(json.dumps({"id": r["id"], "text": r["text"]}) + "\n" for r in user))
    (folder / "labels.jsonl").write_text("".join(json.dumps({"id": r["id"], "labels": r["labels"]}) + "\n"
                                                 for r in user))
    (folder / "shipped.jsonl").write_text("".join(json.dumps(r) + "\n" for r in labeled_round("round12")))
    return folder, user


def job(folder: Path, **settings) -> AdaptJob:
    return AdaptJob(labels=folder / "labels.jsonl", models=folder / "models",
                    corpus=InputSpec(str(folder / "corpus.jsonl")), **settings)


@pytest.mark.slow
def test_moved_thresholds_are_what_the_written_model_decides_by(corpus):
    folder, user = corpus
    result = adapt(job(folder, refit="thresholds"))
    assert result.directory == folder / "models" / "adapted_ngram_v1" and result.user_labels == len(user)
    texts = [r["text"] for r in user]
    base_scores = [label.scores for label in get_classifier("cues_ngram_v1").classify(texts)]
    adapted = get_classifier(f"user_ngram:{result.directory}").classify(texts)
    for k, behavior in enumerate(BEHAVIOR_NAMES):
        threshold = result.cross_validation[behavior]["threshold"]
        # Folded into the intercept, the threshold decides at 0.5: present exactly where the base score reaches it
        # (a score within rounding of the threshold is left out of the comparison).
        decided = [(s[behavior] >= threshold, a.counts[behavior] > 0) for s, a in zip(base_scores, adapted)
                   if abs(s[behavior] - threshold) > 1e-5]
        assert len(decided) >= len(user) - 2 and all(want == got for want, got in decided), behavior
        gold = [r["labels"][behavior] for r in user]
        base = [int(s[behavior] >= 0.5) for s in base_scores]
        assert result.cross_validation[behavior]["base_f1"] == pytest.approx(f1_score(gold, base))
    meta = json.loads((result.directory / "model.json").read_text())
    assert meta["adapted"]["refit"] == "thresholds" and meta["adapted"]["from"] == "cues_ngram_v1"


@pytest.mark.slow
def test_refit_heads_is_a_new_version_beside_the_last_and_never_in_the_shipped_folder(corpus):
    folder, user = corpus
    first = adapt(job(folder, refit="thresholds", name="heads_check"))
    shipped_before = {p.name: p.stat().st_mtime_ns for p in MODELS.rglob("*")}
    result = adapt(job(folder, refit="heads", name="heads_check", shipped_labels=folder / "shipped.jsonl"))
    assert result.directory.name == "heads_check_v2" and first.directory.exists()
    assert result.shipped_labels == len(labeled_round("round12"))
    for scores in result.cross_validation.values():
        assert 0 <= scores["adapted_f1"] <= 1 and scores["threshold"] == 0.5
    macro = np.mean([scores["adapted_f1"] for scores in result.cross_validation.values()])
    assert result.adapted_macro_f1 == pytest.approx(macro)
    labels = get_classifier(f"user_ngram:{result.directory}").classify([r["text"] for r in user[:5]])
    assert all(label.error is None and label.scores is not None for label in labels)
    assert {p.name: p.stat().st_mtime_ns for p in MODELS.rglob("*")} == shipped_before
    with pytest.raises(ReviewError, match="shipped models' folder"):
        adapt(AdaptJob(labels=folder / "labels.jsonl", models=MODELS, corpus=InputSpec(str(folder / "corpus.jsonl"))))

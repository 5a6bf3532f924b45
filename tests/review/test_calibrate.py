"""`curate calibrate`'s figures, checked by methods written apart from it: scikit-learn's precision/recall (with sample
weights for the weighted figures), SciPy's Wilson interval, and a synthetic corpus whose true precision and recall are
known, sampled by the review's own design, where the weighted estimate must find the truth and the plain one must not.
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from scipy.stats import binomtest
from sklearn.metrics import precision_recall_fscore_support

from curate.behaviors import BEHAVIOR_NAMES
from curate.review.calibrate import calibrate
from curate.review.labels import LabelsFile, LabelsFileError, read_labels
from curate.review.sample import ReviewError, TaggedRow, draw
from curate.schema import ATTRIBUTE_SCHEMA, Labels, attribute_row


def write_tags(folder, predicted: np.ndarray, scores: np.ndarray | None = None, classifier="cues_ngram_v1"):
    """Attribute shards for documents doc-0..doc-N with the given 0/1 predictions (and scores)."""
    rows = []
    for i, row in enumerate(predicted):
        labels = Labels(counts={b: int(v) for b, v in zip(BEHAVIOR_NAMES, row)},
                        scores=None if scores is None else {b: float(s) for b, s in zip(BEHAVIOR_NAMES, scores[i])})
        rows.append(attribute_row(f"doc-{i}", 100, labels, classifier, None, None, "corpus.jsonl"))
    folder.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=ATTRIBUTE_SCHEMA), folder / "00000.parquet")
    return folder


def write_labels(path, gold: dict[int, list[int]], design: dict[int, tuple[str, int]] | None = None):
    with open(path, "w", encoding="utf-8") as sink:
        for i, row in gold.items():
            record = {"id": f"doc-{i}", "labels": dict(zip(BEHAVIOR_NAMES, map(int, row)))}
            if design:
                record |= dict(zip(("stratum", "stratum_size"), design[i]))
            sink.write(json.dumps(record) + "\n")
    return path


def test_plain_labels_give_scikit_learns_figures_and_scipys_wilson_intervals(tmp_path):
    rng = np.random.default_rng(1)
    predicted = rng.integers(0, 2, size=(60, 4))
    gold = np.where(rng.random((60, 4)) < 0.8, predicted, 1 - predicted)  # right 80 % of the time
    tags = write_tags(tmp_path / "tags", predicted)
    labels = write_labels(tmp_path / "labels.jsonl", {i: list(gold[i]) for i in range(60)})
    report = calibrate(labels, tags, tmp_path / "out", resamples=500)
    assert not report["weighted"] and report["documents"] == 60
    written = json.loads((tmp_path / "out" / "calibration.json").read_text())
    for k, behavior in enumerate(BEHAVIOR_NAMES):
        precision, recall, f1, _ = precision_recall_fscore_support(gold[:, k], predicted[:, k], average="binary")
        figures = written["behaviors"][behavior]
        assert figures["precision"]["value"] == pytest.approx(precision)
        assert figures["recall"]["value"] == pytest.approx(recall)
        assert figures["f1"]["value"] == pytest.approx(f1)
        assert figures["n_labeled"] == 60
        true_positive = int(np.sum(gold[:, k] * predicted[:, k]))
        for name, trials in (("precision", predicted[:, k].sum()), ("recall", gold[:, k].sum())):
            wilson = binomtest(true_positive, int(trials)).proportion_ci(method="wilson")
            assert (figures[name]["ci_low"], figures[name]["ci_high"]) == pytest.approx((wilson.low, wilson.high))
        assert figures["f1"]["ci_low"] < f1 < figures["f1"]["ci_high"]
    assert not (tmp_path / "out" / "pr_curve.png").exists()  # no scores, no curve


def test_weighted_figures_find_the_corpus_truth_that_the_oversampled_sample_hides(tmp_path):
    """A corpus of 20,000 where backtracking is predicted in 2 % of documents and the classifier is much less precise
    on the confident-looking majority than on the rare stratum: the review oversamples the rare one, so plain figures
    overstate precision; weighing by the design recovers the corpus's own precision and recall."""
    rng = np.random.default_rng(7)
    n = 20_000
    scores = rng.random((n, 4)) * 0.29  # all far below the threshold ...
    rare = rng.random(n) < 0.02
    scores[rare, :2] = 0.95  # ... but backtracking (and verification) is predicted, confidently, in 2 %
    common = ~rare & (rng.random(n) < 0.3)
    scores[common, 0] = 0.9  # and verification alone in about 30 %
    predicted = (scores >= 0.5).astype(int)
    truth = np.zeros((n, 4), int)
    truth[:, 0] = np.where(predicted[:, 0] == 1, rng.random(n) < 0.5, rng.random(n) < 0.05)  # precision ~0.5
    truth[:, 1] = np.where(predicted[:, 1] == 1, rng.random(n) < 0.9, rng.random(n) < 0.01)
    # Verification is always right where backtracking was predicted too: in the stratum that is oversampled.
    truth[rare, 0] = 1
    tags = write_tags(tmp_path / "tags", predicted, scores)
    rows = [TaggedRow(f"doc-{i}", dict(zip(BEHAVIOR_NAMES, map(int, predicted[i]))),
                      dict(zip(BEHAVIOR_NAMES, map(float, scores[i])))) for i in range(n)]
    drawn, design = draw(rows, 600, seed=3)
    assert design["strata"]["backtracking/far"]["sample"] == 200  # three strata, an equal share each
    index = {f"doc-{i}": i for i in range(n)}
    chosen = [index[row.id] for row, _ in drawn]
    labels = write_labels(tmp_path / "labels.jsonl", {i: list(truth[i]) for i in chosen},
                          {index[row.id]: (stratum, design["strata"][stratum]["size"]) for row, stratum in drawn})
    report = calibrate(labels, tags, tmp_path / "out", resamples=1000)
    assert report["weighted"]
    strata = [stratum for _, stratum in drawn]
    weights = np.array([design["strata"][s]["size"] / strata.count(s) for s in strata])
    for k, behavior in enumerate(BEHAVIOR_NAMES[:2]):
        figures = report["behaviors"][behavior]
        corpus = precision_recall_fscore_support(truth[:, k], predicted[:, k], average="binary")
        weighted = precision_recall_fscore_support(truth[chosen, k], predicted[chosen, k], average="binary",
                                                   sample_weight=weights)
        plain = precision_recall_fscore_support(truth[chosen, k], predicted[chosen, k], average="binary")
        for position, name in enumerate(("precision", "recall", "f1")):
            assert figures[name]["value"] == pytest.approx(weighted[position])
            assert figures[name]["ci_low"] <= corpus[position] <= figures[name]["ci_high"], (behavior, name)
        if behavior == "verification":  # the oversampled rare stratum flatters the plain precision
            assert plain[0] - corpus[0] > 0.1 and abs(figures["precision"]["value"] - corpus[0]) < 0.05
    curve = {point["threshold"]: point for point in report["behaviors"]["verification"]["curve"]}
    assert curve[0.5]["precision"] == pytest.approx(report["behaviors"]["verification"]["precision"]["value"])
    assert (tmp_path / "out" / "pr_curve.png").stat().st_size > 10_000


def test_labels_from_other_tags_or_mixed_designs_are_refused_in_one_line(tmp_path):
    tags = write_tags(tmp_path / "tags", np.ones((3, 4), int))
    with pytest.raises(ReviewError, match="not in"):
        calibrate(write_labels(tmp_path / "a.jsonl", {7: [1, 0, 0, 0]}), tags, tmp_path / "out")
    mixed = write_labels(tmp_path / "b.jsonl", {0: [1, 0, 0, 0]}, {0: ("s", 3)})
    with open(mixed, "a") as sink:
        sink.write(json.dumps({"id": "doc-1", "labels": {"verification": 1}}) + "\n")
    with pytest.raises(ReviewError, match="separate files"):
        calibrate(mixed, tags, tmp_path / "out")


def test_a_hand_written_file_reads_unread_behaviors_as_absent_and_the_last_line_of_an_id_wins(tmp_path):
    path = tmp_path / "labels.jsonl"
    path.write_text('{"id": "a", "labels": {"backtracking": 1}}\n{"id": "b", "labels": {}}\n'
                    '{"id": "a", "labels": {"verification": 1}}')
    labels = {label.id: label.labels for label in read_labels(path)}
    assert labels == {"a": {"verification": 1, "backtracking": 0, "subgoal_setting": 0, "backward_chaining": 0},
                      "b": dict.fromkeys(BEHAVIOR_NAMES, 0)}
    path.write_text('{"id": "a", "labels": {"verification": 2}}\n')
    with pytest.raises(LabelsFileError, match="0 .absent. or 1"):
        read_labels(path)


def test_a_line_cut_by_a_crash_is_dropped_and_the_next_label_starts_a_line_of_its_own(tmp_path):
    path = tmp_path / "labels.jsonl"
    path.write_text('{"id": "a", "labels": {"verification": 1}}\n{"id": "b", "lab')
    labels = LabelsFile(path)
    assert list(labels.labeled) == ["a"]
    labels.append({"id": "c", "labels": {"backtracking": 1}})
    assert [label.id for label in read_labels(path)] == ["a", "c"]


def test_the_card_of_a_dataset_built_from_the_tags_carries_the_figures_once(tmp_path):
    from curate.behaviors import Behavior
    from curate.builders.behavior import run_build
    from curate.data_cards.cards import check_card
    from curate.pipelines.query import Selection
    from curate.pipelines.readers import InputSpec
    from tests.support.shared import DOCS

    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"id": str(i), "text": t}) + "\n" for i, t in DOCS))
    built = run_build(InputSpec(str(corpus)), tmp_path / "built", Selection(behaviors=[Behavior.BACKTRACKING]),
                      progress=False).output
    tags = built / "tags" / "cues_ngram_v1"
    ids = [str(i) for i, _ in DOCS]
    labels = tmp_path / "labels.jsonl"
    labels.write_text("".join(json.dumps({"id": doc_id, "labels": {"backtracking": int(n % 2 == 0),
                                                                   "verification": 1}}) + "\n"
                              for n, doc_id in enumerate(ids)))
    for _ in range(2):  # a second calibration replaces the section
        report = calibrate(labels, tags, tmp_path / "calibration", resamples=200, card=built)
    card = (built / "README.md").read_text()
    assert card.count("## Labels checked on this corpus") == 1
    figures = report["behaviors"]["verification"]["precision"]
    row = next(line for line in card.splitlines() if line.startswith("| verification |"))
    assert f"{figures['value']:.2f} [{figures['ci_low']:.2f}, {figures['ci_high']:.2f}]" in row
    check_card(built / "README.md")  # still a valid Hugging Face card
    with pytest.raises(ReviewError, match="README.md"):
        calibrate(labels, tags, tmp_path / "calibration", card=tmp_path)

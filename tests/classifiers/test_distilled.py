"""distilled_v1: heads trained on cue labels of real texts recover those labels on held-out texts."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from sklearn.metrics import roc_auc_score

from curate.behaviors import BEHAVIOR_NAMES
from curate.classifiers import get_classifier
from curate.classifiers.distilled import Embedder, Heads, load_model_dir
from curate.pipelines.distill import DistillError, fit_behavior, train_distilled
from curate.pipelines.query import parquet_files
from curate.pipelines.readers import InputSpec
from curate.pipelines.tag import run_tagging
from curate.schema import ATTRIBUTE_SCHEMA

LONGCOT = "longcot_skythought/sky-t1-math-correct-5K-27B_math500.jsonl"
PER_KIND = 40


def _shard(tags_dir: Path) -> str:
    (shard,) = parquet_files(tags_dir)
    return shard


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """Long reasoning traces (cues find verification and backtracking in most) mixed with textbook
    solutions of the same problems (cues find them in few), cue-tagged through `run_tagging`."""
    from tests.support.shared import SHARED_DATA

    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared data not found at {SHARED_DATA}")
    root = tmp_path_factory.mktemp("distill")
    rows = [json.loads(line) for line in (SHARED_DATA / LONGCOT).open()][:PER_KIND]
    corpus = root / "corpus" / "docs.jsonl"
    corpus.parent.mkdir()
    with corpus.open("w") as f:
        for r in rows:
            f.write(json.dumps({"id": f"trace-{r['idx']}", "text": r["code"][0]}) + "\n")
            f.write(json.dumps({"id": f"solution-{r['idx']}", "text": r["gt_cot"]}) + "\n")
    spec = InputSpec(path=str(corpus))
    # The margins below were set on cues_v1's labels; the test needs a cue labeller, not the newest one.
    tags = run_tagging(spec, root / "tags", "cues_v1", progress=False).tags_dir
    report = train_distilled(tags, spec, root / "model", max_chunks=1, validation=0.2, test=0.3, min_positives=4,
                             seed=1, progress=False)
    return {"root": root, "spec": spec, "tags": tags, "report": report, "corpus": corpus}


def test_recovers_cue_labels_above_majority_baseline(trained):
    report = trained["report"]
    assert report.documents == 2 * PER_KIND and report.unmatched_ids == 0
    assert report.label_classifier == "cues_v1"
    by_name = {r.behavior: r for r in report.behaviors}
    result = by_name["verification"]
    assert result.trained, result.warning
    # Ranking (threshold-free) clearly above chance; the validation-chosen cut beats both trivial baselines.
    assert result.auc >= 0.8, result
    assert result.accuracy > result.majority_accuracy, result
    positives, negatives = result.label_counts["test"]["positive"], result.label_counts["test"]["negative"]
    all_positive_f1 = 2 * positives / (2 * positives + negatives)
    assert result.f1 >= all_positive_f1 + 0.1, result
    model_dir = Path(report.model_dir)
    assert (model_dir / "pr_curves.png").stat().st_size > 0
    metadata = json.loads((model_dir / "distilled.json").read_text())
    assert metadata["label_classifier"] == "cues_v1" and metadata["embedding_model"] == "all-MiniLM-L6-v2"
    assert set(metadata["thresholds"]) == {r.behavior for r in report.behaviors if r.trained}


def test_behavior_with_too_few_positives_warns_and_stays_unknown(trained, tmp_path):
    # The same corpus, but labels keep only 3 positive backtracking documents.
    tags = pq.read_table(_shard(trained["tags"])).to_pylist()
    seen = 0
    for row in tags:
        if row["backtracking"]:
            seen += 1
            row["backtracking"] = row["backtracking"] if seen <= 3 else 0
    few = tmp_path / "tags"
    few.mkdir()
    pq.write_table(pa.Table.from_pylist(tags, schema=ATTRIBUTE_SCHEMA), few / "attributes.parquet")
    report = train_distilled(few, trained["spec"], tmp_path / "model", max_chunks=1, min_positives=4, limit=24,
                             progress=False)
    assert any(w.startswith("backtracking: too few positive") for w in report.warnings)
    labels = get_classifier(f"distilled:{tmp_path / 'model'}").classify(["Wait, that is wrong. Let me try another way."])
    assert labels[0].counts["backtracking"] is None
    assert "backtracking" in labels[0].error
    assert labels[0].counts["verification"] in (0, 1)


def test_save_load_round_trip_and_tagging(trained, tmp_path):
    model_dir = trained["report"].model_dir
    metadata, heads = load_model_dir(model_dir)
    texts = [json.loads(line)["text"] for line in trained["corpus"].open()][:6]
    embeddings = Embedder(metadata["embedding_model"], max_chunks=metadata["max_chunks"]).embed(texts)
    expected = heads.scores(embeddings)
    classifier = get_classifier(f"distilled:{model_dir}")
    assert classifier.name == "distilled_v1" and classifier.prompt_version.startswith("heads-")
    labels = classifier.classify(texts)
    for b in heads.weights:
        np.testing.assert_allclose([label.scores[b] for label in labels], expected[b], rtol=1e-5)
        assert [label.counts[b] for label in labels] == [int(s >= heads.thresholds[b]) for s in expected[b]]

    result = run_tagging(trained["spec"], tmp_path / "tags", f"distilled:{model_dir}", progress=False)
    rows = pq.read_table(_shard(result.tags_dir)).to_pylist()
    assert len(rows) == 2 * PER_KIND and {r["classifier"] for r in rows} == {"distilled_v1"}
    by_id = {r["id"]: r for r in rows}
    first = json.loads(trained["corpus"].open().readline())["id"]
    assert all(by_id[first][b] == labels[0].counts[b] for b in BEHAVIOR_NAMES)
    # The scores column carries each head's probability (float32); behaviors without a head are null.
    assert pq.read_schema(_shard(result.tags_dir)).equals(ATTRIBUTE_SCHEMA)
    ids = [json.loads(line)["id"] for line in trained["corpus"].open()][:6]
    for b in BEHAVIOR_NAMES:
        written = [by_id[i]["scores"][b] for i in ids]
        if b in heads.weights:
            np.testing.assert_allclose(written, expected[b], rtol=1e-5, atol=1e-6)
        else:
            assert written == [None] * len(ids)


def test_long_document_is_chunked_and_pooled(trained):
    embedder = Embedder(max_chunks=3)
    text = " ".join(f"step {i}: we check the value again." for i in range(400))
    offsets = embedder.model.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
    chunks = embedder.chunks(text, offsets)
    assert len(chunks) == 3 and chunks[0].startswith("step 0") and chunks[-1].endswith("again.")
    vector = embedder.embed([text])
    assert vector.shape == (1, embedder.dimension) and abs(float(np.linalg.norm(vector)) - 1) < 1e-5
    with pytest.raises(ValueError, match="empty"):
        embedder.embed(["   "])


def test_labels_matching_no_text_fail_clearly(trained, tmp_path):
    table = pq.read_table(_shard(trained["tags"]))
    renamed = table.set_column(0, "id", [[f"other-{i}" for i in range(table.num_rows)]])
    pq.write_table(renamed, tmp_path / "attributes.parquet")
    with pytest.raises(DistillError, match="none of the .* labelled ids"):
        train_distilled(tmp_path / "attributes.parquet", trained["spec"], tmp_path / "model", progress=False)
    assert not (tmp_path / "model").exists()


def test_bad_model_dir_and_missing_argument(tmp_path):
    with pytest.raises(ValueError, match="not a distilled model directory"):
        get_classifier(f"distilled:{tmp_path}")
    with pytest.raises(ValueError, match="needs a model directory"):
        get_classifier("distilled")



@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_mlp_head_learns_and_round_trips(tmp_path):
    """An MLP head (plain arrays, no pickle) learns a non-linear rule a linear head cannot, and saves/loads exactly."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(600, 8)).astype(np.float32)
    y = (x[:, 0] * x[:, 1] > 0).astype(int)  # XOR of signs: no linear head separates it
    heads = Heads(kind="mlp")
    fit_behavior(heads, "verification", x[:400], y[:400], regularization=1e-3, seed=0, hidden=32)
    linear = Heads()
    fit_behavior(linear, "verification", x[:400], y[:400])
    auc = roc_auc_score(y[400:], heads.scores(x[400:])["verification"])
    assert auc >= 0.9 > roc_auc_score(y[400:], linear.scores(x[400:])["verification"]) + 0.2
    heads.thresholds["verification"] = 0.5
    heads.save(tmp_path / "heads.npz")
    loaded = Heads.load(tmp_path / "heads.npz", "mlp")
    np.testing.assert_allclose(loaded.scores(x)["verification"], heads.scores(x)["verification"], rtol=1e-6)
    assert loaded.behaviors == ["verification"] and loaded.input_dimension("verification") == 8


def test_mlp_model_dir_records_head_type_and_loads(trained, tmp_path):
    """--head mlp: the model dir records the head type (format 2) and the classifier scores with the network;
    a logistic dir written before the option (no head type recorded) still loads as logistic."""
    (tmp_path / "mlp").mkdir()  # an empty output folder gives way to the model folder
    report = train_distilled(trained["tags"], trained["spec"], tmp_path / "mlp", max_chunks=1, min_positives=4, limit=24,
                             seed=1, progress=False, head="mlp", hidden=16, regularization=1e-2)
    assert [p.name for p in tmp_path.iterdir()] == ["mlp"]  # no staging folder left beside it
    metadata, heads = load_model_dir(report.model_dir)
    assert metadata["head"]["type"] == "mlp" and metadata["format_version"] == 2 and heads.kind == "mlp"
    assert {r.behavior for r in report.behaviors if r.trained} == set(heads.behaviors) and not heads.weights
    b = heads.behaviors[0]
    (w0, _), (w1, b1) = heads.layers[b]
    assert w0.shape == (metadata["embedding_dimension"], 16) and w1.shape == (16, 1) and b1.shape == (1,)
    texts = [json.loads(line)["text"] for line in trained["corpus"].open()][:3]
    labels = get_classifier(f"distilled:{report.model_dir}").classify(texts)
    expected = heads.scores(Embedder(max_chunks=1).embed(texts))
    for b in heads.behaviors:
        np.testing.assert_allclose([label.scores[b] for label in labels], expected[b], rtol=1e-5, atol=1e-6)
        assert [label.counts[b] for label in labels] == [int(s >= heads.thresholds[b]) for s in expected[b]]
    old = tmp_path / "old"
    old.mkdir()
    logistic = Path(trained["report"].model_dir)
    legacy = json.loads((logistic / "distilled.json").read_text())
    legacy.pop("head")
    (old / "distilled.json").write_text(json.dumps(legacy))
    (old / "heads.npz").write_bytes((logistic / "heads.npz").read_bytes())
    assert load_model_dir(old)[1].kind == "logistic"
    with pytest.raises(ValueError, match="unknown head"):
        train_distilled(trained["tags"], trained["spec"], tmp_path / "bad", head="forest", progress=False)

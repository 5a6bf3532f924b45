"""`curate distill`: train `distilled_v1` heads on a stronger classifier's attribute shards.

Labels come from any tags directory (cues_v1, llm_v1, ...); texts from the corpus those tags were
made from, matched by document id. Documents are split train / validation / test by a seeded
permutation; each behavior's head is a logistic regression on the frozen embeddings (or, with
head="mlp", a one-hidden-layer MLP on the standardised embeddings), its threshold is the one that maximises F1 on validation, and its precision, recall, F1 and AUC are measured on
test, which neither training nor threshold choice has seen.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from curate.behaviors import BEHAVIOR_NAMES
from curate.classifiers.distilled import (
    DEFAULT_EMBEDDING_MODEL,
    DEFAULT_MAX_CHUNKS,
    FORMAT_VERSION,
    HEAD_KINDS,
    HEADS,
    LEVELS,
    METADATA,
    MLP_FORMAT_VERSION,
    SENTENCE_FORMAT_VERSION,
    Embedder,
    Heads,
)
from curate.classifiers.spans import units
from curate.console import ProgressBar
from curate.errors import CurateError
from curate.files import atomic_folder
from curate.pipelines.jobs import DistillJob
from curate.pipelines.query import attribute_shards
from curate.pipelines.readers import InputSpec, is_reject, make_reader

PR_PLOT = "pr_curves.png"
UNIT_LABEL_RULE = ("a unit (spans.units) is positive for a behavior when one of the teacher's evidence spans of it "
                   "overlaps the unit; unknown where the teacher could not tell or said present without evidence")
MIN_TEST_POSITIVES = 5
EARLY_STOPPING_ROWS = 1000


class DistillError(CurateError, ValueError):
    pass


@dataclass
class BehaviorReport:
    behavior: str
    label_counts: dict[str, dict[str, int]]  # split -> {"positive", "negative"}
    trained: bool
    threshold: float | None = None
    precision: float | None = None
    recall: float | None = None
    f1: float | None = None
    auc: float | None = None
    accuracy: float | None = None
    majority_accuracy: float | None = None
    warning: str | None = None


@dataclass
class DistillReport:
    model_dir: Path
    documents: int
    labelled_ids: int
    unmatched_ids: int
    skipped_rejects: int
    label_classifier: str
    embedding_model: str
    behaviors: list[BehaviorReport] = field(default_factory=list)
    seconds: float = 0.0
    level: str = "document"
    units: int | None = None  # sentence level: the units the heads were trained, tuned and tested on

    @property
    def warnings(self) -> list[str]:
        return [f"{r.behavior}: {r.warning}" for r in self.behaviors if r.warning]


def load_labels(tags: str | Path, evidence: bool = False) -> tuple[dict[str, tuple], list[str]]:
    """id -> per-behavior presence (1, 0, or None when the source could not tell), and the classifier names.
    With `evidence`, id -> (that presence, the row's evidence as (behavior, start, end) tuples).

    Rows with an error are left out: their counts are not labels. LLM shards from a cascade also hold
    rows the gate ruled out; those are the gate's verdict, not the LLM's, so only route 'llm' counts."""
    import duckdb

    files = attribute_shards(tags)
    if not files:
        raise DistillError(f"no attribute shards (*.parquet) under {tags}; tag a corpus first: `curate tag --input CORPUS`")
    source = "read_parquet($f, union_by_name=true)"
    with duckdb.connect() as connection:
        columns = {r[0] for r in connection.sql(f"DESCRIBE SELECT * FROM {source}", params={"f": files}).fetchall()}
        missing = [c for c in ("id", "error", "classifier", *BEHAVIOR_NAMES) if c not in columns]
        if missing:
            raise DistillError(f"{tags} does not hold attribute shards: columns {', '.join(missing)} are missing")
        where = "error IS NULL" + (" AND route = 'llm'" if "route" in columns else "")
        presence = ", ".join(
            f"any_value(CASE WHEN {b} IS NULL THEN NULL ELSE ({b} > 0)::INT END) AS {b}" for b in BEHAVIOR_NAMES
        )
        if evidence:
            presence += ", any_value(evidence) AS evidence"
        rows = connection.sql(f"SELECT id, {presence} FROM {source} WHERE {where} GROUP BY id", params={"f": files}).fetchall()
        classifiers = [r[0] for r in connection.sql(f"SELECT DISTINCT classifier FROM {source} ORDER BY 1",
                                                    params={"f": files}).fetchall()]
    if evidence:
        return {r[0]: (tuple(r[1:-1]), [(e["behavior"], e["start"], e["end"]) for e in r[-1] or []]) for r in rows}, classifiers
    return {r[0]: tuple(r[1:]) for r in rows}, classifiers


def _split(n: int, seed: int, validation: float, test: float) -> np.ndarray:
    """0 = train, 1 = validation, 2 = test."""
    order = np.random.default_rng(seed).permutation(n)
    n_test, n_val = max(1, round(n * test)), max(1, round(n * validation))
    split = np.zeros(n, dtype=np.int8)
    split[order[:n_test]] = 2
    split[order[n_test:n_test + n_val]] = 1
    return split


def _fit_head(x: np.ndarray, y: np.ndarray, c: float, seed: int) -> tuple[np.ndarray, float]:
    """Logistic regression on standardised features, folded back into one weight vector on raw embeddings."""
    from sklearn.linear_model import LogisticRegression

    mean, scale = x.mean(axis=0), x.std(axis=0) + 1e-6
    model = LogisticRegression(C=c, class_weight="balanced", max_iter=2000, random_state=seed)
    model.fit((x - mean) / scale, y)
    weights = model.coef_[0] / scale
    bias = float(model.intercept_[0] - (model.coef_[0] * mean / scale).sum())
    return weights.astype(np.float32), bias


def _fit_mlp(x: np.ndarray, y: np.ndarray, hidden: int, alpha: float, seed: int):
    """A one-hidden-layer ReLU MLP on standardised features; classes weighted to balance, as the logistic heads are.
    Returns (layers, mean, scale) for `Heads(kind="mlp")`."""
    from sklearn.neural_network import MLPClassifier

    mean, scale = x.mean(axis=0), x.std(axis=0) + 1e-6
    positives = max(int(y.sum()), 1)
    weight = np.where(y == 1, len(y) / (2 * positives), len(y) / (2 * max(len(y) - positives, 1)))
    # Early stopping holds out a tenth of the training rows: only worth it when that tenth is not a handful.
    model = MLPClassifier(hidden_layer_sizes=(hidden,), alpha=alpha, early_stopping=len(y) >= EARLY_STOPPING_ROWS, validation_fraction=0.1,
                          n_iter_no_change=10, max_iter=300, random_state=seed)
    model.fit((x - mean) / scale, y, sample_weight=weight)
    layers = [(w.astype(np.float32), b.astype(np.float32)) for w, b in zip(model.coefs_, model.intercepts_)]
    return layers, mean.astype(np.float32), scale.astype(np.float32)


def fit_behavior(heads: Heads, behavior: str, x: np.ndarray, y: np.ndarray, regularization: float = 1.0,
                 seed: int = 0, hidden: int = 256) -> None:
    """Train `behavior`'s head of `heads.kind` on (x, y) and store it in `heads` (threshold not set).
    `regularization` is C for logistic heads and the L2 penalty alpha for MLP heads."""
    if heads.kind == "logistic":
        heads.weights[behavior], heads.bias[behavior] = _fit_head(x, y, regularization, seed)
    else:
        heads.layers[behavior], heads.mean[behavior], heads.scale[behavior] = _fit_mlp(x, y, hidden, regularization, seed)


def _one(heads: Heads, behavior: str) -> Heads:
    return Heads(kind=heads.kind, weights={k: v for k, v in heads.weights.items() if k == behavior},
                 bias={k: v for k, v in heads.bias.items() if k == behavior},
                 layers={k: v for k, v in heads.layers.items() if k == behavior},
                 mean={k: v for k, v in heads.mean.items() if k == behavior},
                 scale={k: v for k, v in heads.scale.items() if k == behavior})


def best_threshold(y: np.ndarray, scores: np.ndarray) -> float:
    from sklearn.metrics import precision_recall_curve

    if y.sum() == 0 or y.sum() == len(y):
        return 0.5
    precision, recall, thresholds = precision_recall_curve(y, scores)
    f1 = 2 * precision[:-1] * recall[:-1] / np.maximum(precision[:-1] + recall[:-1], 1e-12)
    # Cut halfway between a validation score and the next lower one rather than on the score itself,
    # and among equal F1 prefer the cut nearest 0.5 (where balanced heads put it): on a small
    # validation split both keep the threshold from hugging one document.
    cuts = np.concatenate([thresholds[:1], (thresholds[1:] + thresholds[:-1]) / 2])
    best = np.flatnonzero(f1 >= f1.max() - 1e-9)
    return float(cuts[best[np.argmin(np.abs(cuts[best] - 0.5))]])


def _metrics(report: BehaviorReport, y: np.ndarray, scores: np.ndarray) -> None:
    from sklearn.metrics import f1_score, precision_score, recall_score, roc_auc_score

    predicted = (scores >= report.threshold).astype(int)
    report.precision = float(precision_score(y, predicted, zero_division=0))
    report.recall = float(recall_score(y, predicted, zero_division=0))
    report.f1 = float(f1_score(y, predicted, zero_division=0))
    report.auc = float(roc_auc_score(y, scores)) if 0 < y.sum() < len(y) else None
    report.accuracy = float((predicted == y).mean())
    report.majority_accuracy = float(max(y.mean(), 1 - y.mean()))


def _plot(curves: dict[str, tuple[np.ndarray, np.ndarray, float]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(6, 5))
    for behavior, (recall, precision, auc) in curves.items():
        axis.plot(recall, precision, label=f"{behavior} (AUC {auc:.2f})" if not np.isnan(auc) else behavior)
    axis.set_xlabel("recall")
    axis.set_ylabel("precision")
    axis.set_xlim(0, 1)
    axis.set_ylim(0, 1.02)
    axis.set_title("distilled heads, held-out test split")
    axis.legend(loc="lower left")
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def _matched_texts(spec: InputSpec, labels: dict[str, tuple], limit: int, progress: bool):
    """Streams the corpus and keeps the labelled documents, in corpus order (first occurrence of an id)."""
    ids, texts, rejects = [], [], 0
    wanted = set(labels)
    with ProgressBar("matching texts", total=min(len(wanted), limit) if limit > 0 else len(wanted),
                     enabled=progress) as bar:
        for document in make_reader(spec).run(None, 0, 1):
            if is_reject(document):
                rejects += 1
                continue
            if document.id in wanted:
                wanted.discard(document.id)
                ids.append(document.id)
                texts.append(document.text)
                bar.advance()
                if len(ids) == limit or not wanted:
                    break
    return ids, texts, rejects


def unit_targets(spans: Sequence[tuple[int, int]], evidence: Iterable[tuple[str, int, int]]) -> np.ndarray:
    """(units, behaviors) 0/1: a unit is positive for a behavior when a (behavior, start, end) span overlaps it."""
    targets = np.zeros((len(spans), len(BEHAVIOR_NAMES)), dtype=int)
    if not spans:
        return targets
    starts, ends = np.array([s for s, _ in spans]), np.array([e for _, e in spans])
    for behavior, start, end in evidence:
        targets[(starts < end) & (ends > start), BEHAVIOR_NAMES.index(behavior)] = 1
    return targets


def unit_labels(spans: Sequence[tuple[int, int]], presence: tuple, evidence: Iterable[tuple[str, int, int]]) -> np.ndarray:
    """A document's unit labels by UNIT_LABEL_RULE: its evidence, and -1 (unknown) for a behavior the teacher could
    not tell, or said present without pointing at any unit of it."""
    targets = unit_targets(spans, evidence)
    for k, present in enumerate(presence):
        if present is None or (present and not targets[:, k].any()):
            targets[:, k] = -1
    return targets


def _embed(embedder: Embedder, texts: list[str], progress: bool) -> np.ndarray:
    batches = range(0, len(texts), 256)
    with ProgressBar("embedding", total=len(batches), enabled=progress, unit="batch") as bar:
        chunks = []
        for i in batches:
            chunks.append(embedder.embed(texts[i:i + 256]))
            bar.advance()
    return np.concatenate(chunks) if chunks else np.zeros((0, embedder.dimension), dtype=np.float32)


def fit_heads(x: np.ndarray, y: np.ndarray, split: np.ndarray, head: str = "logistic", regularization: float = 1.0,
              seed: int = 0, hidden: int = 256, min_positives: int = 5):
    """One head per behavior trained on the rows of split 0, its threshold the best F1 on split 1, its metrics
    measured on split 2 (when it has rows). `y` is (rows, behaviors): 1, 0, or -1 where the label is unknown
    (left out). Returns (heads, one BehaviorReport per behavior, PR curves on the test rows)."""
    heads, reports, curves = Heads(kind=head), [], {}
    for column, behavior in enumerate(BEHAVIOR_NAMES):
        known = y[:, column] >= 0
        labels = np.maximum(y[:, column], 0)
        parts = {name: known & (split == k) for k, name in enumerate(("train", "validation", "test"))}
        counts = {name: {"positive": int(labels[m].sum()), "negative": int((1 - labels[m]).sum())}
                  for name, m in parts.items()}
        result = BehaviorReport(behavior=behavior, label_counts=counts, trained=False)
        reports.append(result)
        train_pos, train_neg = counts["train"]["positive"], counts["train"]["negative"]
        if train_pos < min_positives or train_neg < min_positives:
            result.warning = (
                f"too few {'positive' if train_pos < min_positives else 'negative'} labels to train "
                f"({train_pos} positive, {train_neg} negative in train; need {min_positives} each): no head, "
                "tags will say unknown (null) for this behavior"
            )
            continue
        fit_behavior(heads, behavior, x[parts["train"]], labels[parts["train"]], regularization, seed, hidden)
        scored = _one(heads, behavior).scores
        result.threshold = best_threshold(labels[parts["validation"]], scored(x[parts["validation"]])[behavior])
        heads.thresholds[behavior] = result.threshold
        result.trained = True
        if not parts["test"].any():
            continue
        test_y, test_scores = labels[parts["test"]], scored(x[parts["test"]])[behavior]
        _metrics(result, test_y, test_scores)
        if 0 < test_y.sum() < len(test_y):
            from sklearn.metrics import precision_recall_curve

            precision, recall, _ = precision_recall_curve(test_y, test_scores)
            curves[behavior] = (recall, precision, result.auc)
        if counts["test"]["positive"] < MIN_TEST_POSITIVES:
            result.warning = f"only {counts['test']['positive']} positives in the test split: its metrics are unreliable"
    return heads, reports, curves


def _refuse_filled(output: Path) -> None:
    if output.exists() and any(output.iterdir()):
        raise DistillError(f"{output} exists and is not empty; give a new --output directory")


def train_distilled(
    labels_dir: str | Path,
    spec: InputSpec,
    output: str | Path,
    embedding_model: str = DEFAULT_EMBEDDING_MODEL,
    max_chunks: int = DEFAULT_MAX_CHUNKS,
    validation: float = 0.15,
    test: float = 0.15,
    min_positives: int = 5,
    regularization: float = 1.0,
    seed: int = 0,
    limit: int = -1,
    batch_size: int = 64,
    progress: bool = True,
    head: str = "logistic",
    hidden: int = 256,
    level: str = "document",
) -> DistillReport:
    """`regularization`: C of the logistic heads (default 1.0), or the MLP's L2 alpha (head="mlp"; give e.g. 1e-3).
    `level` "sentence": one head input per unit (`spans.units`), labelled from the teacher's evidence (UNIT_LABEL_RULE);
    splits are still drawn by document, and the metrics are per unit."""
    if head not in HEAD_KINDS:
        raise DistillError(f"unknown head {head!r}; expected one of {', '.join(HEAD_KINDS)}")
    if level not in LEVELS:
        raise DistillError(f"unknown level {level!r}; expected one of {', '.join(LEVELS)}")
    started = time.time()
    output = Path(output).expanduser()
    _refuse_filled(output)
    labels, classifiers = load_labels(labels_dir, evidence=level == "sentence")
    if not labels:
        raise DistillError(f"no usable labels in {labels_dir}: every row has an error (or none was routed to the LLM)")
    ids, texts, rejects = _matched_texts(spec, labels, limit, progress)
    if not ids:
        example = next(iter(labels))
        raise DistillError(
            f"none of the {len(labels):,} labelled ids in {labels_dir} matches a document id in {spec.path} "
            f"(a label id looks like {example!r}). Give the corpus these tags were made from, with the same "
            "--text-key and --id-key."
        )
    if len(ids) < 10:
        raise DistillError(f"only {len(ids)} labelled documents matched a text; at least 10 are needed for train/validation/test")

    embedder = Embedder(embedding_model, max_chunks=max_chunks, batch_size=batch_size)
    split = _split(len(ids), seed, validation, test)
    if level == "sentence":
        # Units inherit their document's part: no document has units on both sides of the held-out line.
        rows, y, unit_split = [], [], []
        for text, doc_id, part in zip(texts, ids, split):
            presence, evidence = labels[doc_id]
            spans = units(text)
            rows += [text[s:e] for s, e in spans]
            y.append(unit_labels(spans, presence, evidence))
            unit_split += [part] * len(spans)
        y = np.concatenate(y) if rows else np.zeros((0, len(BEHAVIOR_NAMES)), dtype=int)
        split = np.asarray(unit_split, dtype=np.int8)
    else:
        rows = texts
        y = np.asarray([[-1 if v is None else v for v in labels[i]] for i in ids], dtype=int)
    embeddings = _embed(embedder, rows, progress)

    report = DistillReport(
        model_dir=output, documents=len(ids), labelled_ids=len(labels), unmatched_ids=len(labels) - len(ids) if limit < 0 else 0,
        skipped_rejects=rejects, label_classifier="+".join(classifiers), embedding_model=embedding_model,
        level=level, units=len(rows) if level == "sentence" else None,
    )
    heads, report.behaviors, curves = fit_heads(embeddings, y, split, head, regularization, seed, hidden, min_positives)
    metadata = {
        "format_version": model_format(head, level),
        "classifier": "distilled_v1",
        "label_classifier": report.label_classifier,
        "labels": str(Path(labels_dir).expanduser().resolve()),
        "texts": spec.fingerprint(),
        "embedding_model": embedding_model,
        "embedding_dimension": embedder.dimension,
        "max_chunks": max_chunks,
        "window_tokens": embedder.window,
        "head": ({"type": "logistic_regression", "class_weight": "balanced", "C": regularization} if head == "logistic"
                 else {"type": "mlp", "hidden_layer_sizes": [hidden], "activation": "relu", "alpha": regularization,
                       "sample_weight": "balanced", "early_stopping_from_rows": EARLY_STOPPING_ROWS}),
        "split": {"seed": seed, "validation": validation, "test": test},
        "thresholds": dict(heads.thresholds),
        "documents": report.documents,
        "unmatched_label_ids": report.unmatched_ids,
        "behaviors": {r.behavior: {k: v for k, v in asdict(r).items() if k != "behavior"} for r in report.behaviors},
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    if level == "sentence":
        # Document-level directories keep the keys they always had; a sentence-level one says how its labels were made.
        metadata["level"] = "sentence"
        metadata["units"] = report.units
        metadata["unit_labels"] = UNIT_LABEL_RULE
    write_model(output, heads, metadata, curves)
    report.seconds = time.time() - started
    return report


def model_format(head: str, level: str) -> int:
    """The format_version a model directory of this head type and level records."""
    if level == "sentence":
        return SENTENCE_FORMAT_VERSION
    return FORMAT_VERSION if head == "logistic" else MLP_FORMAT_VERSION


def write_model(output: Path, heads: Heads, metadata: dict, curves: dict | None = None) -> None:
    """Writes a model directory (heads, metadata, PR plot when there are curves) that `distilled_v1` loads."""
    # The model folder appears whole or not at all; an empty one gives way to it, one filled while the heads
    # trained is refused again rather than replaced.
    with atomic_folder(output) as staging:
        heads.save(staging / HEADS)
        if curves:
            _plot(curves, staging / PR_PLOT)
        (staging / METADATA).write_text(json.dumps(metadata, indent=2))
        _refuse_filled(output)


def distill(job: DistillJob, progress: bool = True) -> DistillReport:
    """Runs the distill job: trains the heads on the job's labels and texts and writes them to its output."""
    return train_distilled(
        job.labels, job.corpus, job.output, embedding_model=job.embedding_model, max_chunks=job.max_chunks,
        validation=job.validation, test=job.test, min_positives=job.min_positives, regularization=job.regularization,
        seed=job.seed, limit=job.limit, batch_size=job.batch_size, progress=progress, head=job.head, level=job.level,
    )

"""Sentence-level distilled heads: learning curve against their teacher, spans_v1 (a model, not readers), and speed.

    python bench/distill_sentences.py [--sizes 1000,5000,20000] [--test-units 4000] [--workdir DIR]

Corpus: the real texts of bench/distilled_corpus.py (every genre of ../shared/data; no text of evals/devset,
evals/heldout or evals/blindset, blind rounds 18/19 included, nor any text sharing a 160-character run with one).
The teacher is `spans_v1`: its unit decisions (a unit is positive for a behavior when it is one of spans_v1's
evidence units for it) are the labels; no reader label is used anywhere here. Documents are split in one seeded
order: the first ones, up to `--test-units` units, are the held-out test; the next, up to a fifth of that, the
validation documents (thresholds only); the units of the following documents are the training pool, shuffled once,
and the first N of them are size N (1k inside 5k inside 20k).

Agreement with the teacher is measured on the held-out documents, twice: per unit (F1 and Cohen's kappa of the
student's unit decisions against spans_v1's) and per document (present when one unit is, as `distilled_v1` at
sentence level tags). Speed: docs/s/core of the trained 20k model (`curate.classifiers.distilled`, embedding every
unit) and of spans_v1 on the same held-out texts in the same process, CPU time over one core.
Embeddings of units are cached in the workdir (bench/distilled_corpus.py's cache), so a rerun embeds nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.distilled_corpus import embeddings, gather, order
from curate.behaviors import BEHAVIOR_NAMES
from curate.classifiers.distilled import DEFAULT_EMBEDDING_MODEL, DEFAULT_MAX_CHUNKS
from curate.classifiers.spans import units
from curate.pipelines.distill import fit_heads, model_format, unit_targets, write_model
from evals.devset.resolve import DEFAULT_DATA_DIR

TEACHER = "spans_v1"
SHORT = {"verification": "ver", "backtracking": "back", "subgoal_setting": "sub", "backward_chaining": "bwd"}
TIMED_DOCUMENTS = 60


def split_documents(documents: list[dict], test_units: int, pool_units: int, seed: int):
    """Indices of the test, validation and pool documents in the bench's seeded order, by unit budget."""
    parts: list[list[int]] = [[], [], []]
    budgets = [test_units, max(1, test_units // 5), pool_units]
    filled = [0, 0, 0]
    part = 0
    for i in order(len(documents), seed):
        while part < 3 and filled[part] >= budgets[part]:
            part += 1
        if part == 3:
            break
        parts[part].append(int(i))
        filled[part] += len(units(documents[i]["text"]))
    return parts


def teacher_units(documents: list[dict]) -> list[tuple[list[tuple[int, int]], np.ndarray]]:
    """Each document's units and spans_v1's (units, behaviors) decisions on them."""
    from curate.classifiers import get_classifier

    teacher = get_classifier(TEACHER)
    out = []
    for start in range(0, len(documents), 500):
        batch = [d["text"] for d in documents[start:start + 500]]
        for text, labels in zip(batch, teacher.classify(batch), strict=True):
            spans = units(text)
            out.append((spans, unit_targets(spans, [(e.behavior, e.start, e.end) for e in labels.evidence])))
    return out


def f1_kappa(gold: np.ndarray, predicted: np.ndarray) -> tuple[float, float]:
    from sklearn.metrics import cohen_kappa_score, f1_score

    f1 = float(f1_score(gold, predicted, zero_division=0))
    kappa = float(cohen_kappa_score(gold, predicted)) if len(set(gold)) > 1 or len(set(predicted)) > 1 else 1.0
    return f1, kappa


def unit_rows(documents: list[dict], labelled, indices: list[int]) -> tuple[list[dict], np.ndarray, np.ndarray]:
    """The units of `indices` as corpus rows ({"text"}), their teacher targets, and which document each is from."""
    rows, targets, owner = [], [], []
    for i in indices:
        spans, target = labelled[i]
        text = documents[i]["text"]
        rows += [{"text": text[s:e]} for s, e in spans]
        targets.append(target)
        owner += [i] * len(spans)
    return rows, np.concatenate(targets) if targets else np.zeros((0, len(BEHAVIOR_NAMES)), int), np.asarray(owner)


def agreement(heads, x: np.ndarray, gold: np.ndarray, owner: np.ndarray) -> dict[str, dict[str, tuple[float, float]]]:
    """Per behavior: (F1, kappa) of the student's decisions against the teacher's, on units and on documents."""
    scores = heads.scores(x)
    documents = np.unique(owner)
    out = {}
    for k, behavior in enumerate(BEHAVIOR_NAMES):
        if behavior not in scores:
            continue
        predicted = (scores[behavior] >= heads.thresholds[behavior]).astype(int)
        document_gold = np.asarray([gold[owner == d, k].max() for d in documents])
        document_predicted = np.asarray([predicted[owner == d].max() for d in documents])
        out[behavior] = {"unit": f1_kappa(gold[:, k], predicted), "document": f1_kappa(document_gold, document_predicted)}
    return out


def timing(texts: list[str], model_dir: Path) -> dict[str, float]:
    """docs/s/core of spans_v1 and of the sentence-level distilled model on the same texts, alternated twice."""
    from curate.classifiers import get_classifier

    classifiers = {TEACHER: get_classifier(TEACHER), "distilled_v1 (sentence)": get_classifier(f"distilled:{model_dir}")}
    for classifier in classifiers.values():
        classifier.classify(texts[:5])
    best: dict[str, float] = {}
    for _ in range(2):
        for name, classifier in classifiers.items():
            began = time.process_time()
            classifier.classify(texts)
            best[name] = max(best.get(name, 0.0), len(texts) / (time.process_time() - began))
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,5000,20000")
    parser.add_argument("--test-units", type=int, default=4000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "curate-distill-sentences")
    parser.add_argument("--prepare", action="store_true", help="only label and embed (the slow part), no training")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    args.workdir.mkdir(parents=True, exist_ok=True)
    began = time.time()
    documents, _ = gather(Path(os.environ.get("CURATE_SHARED_DATA") or DEFAULT_DATA_DIR), args.seed)
    # The pool holds twice the largest size, so the largest sample is still drawn from many documents.
    test, validation, pool = split_documents(documents, args.test_units, 2 * max(sizes), args.seed)
    chosen = test + validation + pool
    labelled = dict(zip(chosen, teacher_units([documents[i] for i in chosen])))
    print(f"{len(documents)} texts; teacher {TEACHER} on {len(chosen)} of them in {time.time() - began:.0f} s",
          file=sys.stderr, flush=True)
    test_rows, test_y, test_owner = unit_rows(documents, labelled, test)
    validation_rows, validation_y, _ = unit_rows(documents, labelled, validation)
    pool_rows, pool_y, _ = unit_rows(documents, labelled, pool)
    sample = np.random.default_rng(args.seed).permutation(len(pool_rows))[:max(sizes)]
    train_rows, train_y = [pool_rows[i] for i in sample], pool_y[sample]
    # Embedded in this order, so an interrupted pass has the test, the validation and a prefix of the sample.
    vectors, seconds, new = embeddings(test_rows + validation_rows + train_rows, args.workdir,
                                       DEFAULT_EMBEDDING_MODEL, DEFAULT_MAX_CHUNKS)
    print(f"embedded {new} new units in {seconds:.0f} s", file=sys.stderr, flush=True)
    if args.prepare:
        return
    test_x = vectors[:len(test_rows)]
    validation_x = vectors[len(test_rows):len(test_rows) + len(validation_rows)]
    train_x = vectors[len(test_rows) + len(validation_rows):]
    results = {}
    for size in sizes:
        split = np.repeat(np.int8([0, 1]), [size, len(validation_rows)])
        heads, _, _ = fit_heads(np.concatenate([train_x[:size], validation_x]),
                                np.concatenate([train_y[:size], validation_y]), split, seed=args.seed)
        results[size] = {"positives": train_y[:size].sum(axis=0).tolist(),
                         "agreement": agreement(heads, test_x, test_y, test_owner)}
        if size == max(sizes):
            largest = heads
    with tempfile.TemporaryDirectory() as folder:
        model_dir = Path(folder) / "model"
        write_model(model_dir, largest, {
            "format_version": model_format("logistic", "sentence"), "classifier": "distilled_v1", "level": "sentence",
            "label_classifier": TEACHER, "embedding_model": DEFAULT_EMBEDDING_MODEL,
            "embedding_dimension": int(train_x.shape[1]), "max_chunks": DEFAULT_MAX_CHUNKS,
            "head": {"type": "logistic_regression", "class_weight": "balanced", "C": 1.0},
            "thresholds": dict(largest.thresholds), "units": max(sizes)})
        speed = timing([documents[i]["text"] for i in test[:TIMED_DOCUMENTS]], model_dir)
    print(table(results, len(test), len(test_rows), test_y, speed))
    (args.workdir / "results.json").write_text(json.dumps({"results": results, "speed": speed}, indent=1))


def table(results: dict, test_documents: int, test_units: int, test_y: np.ndarray, speed: dict[str, float]) -> str:
    lines = [
        f"Teacher: {TEACHER} (a model; no reader labels). Held out: {test_documents} documents, {test_units} units "
        f"(teacher-positive units: " + ", ".join(f"{SHORT[b]} {int(test_y[:, k].sum())}"
                                                 for k, b in enumerate(BEHAVIOR_NAMES)) + ").",
        "",
        "| training units | level | " + " | ".join(f"{b} F1 / kappa" for b in BEHAVIOR_NAMES) + " | mean kappa |",
        "|---|---|" + "---|" * (len(BEHAVIOR_NAMES) + 1),
    ]
    for size, result in results.items():
        for level in ("unit", "document"):
            cells, kappas = [], []
            for behavior in BEHAVIOR_NAMES:
                if behavior not in result["agreement"]:
                    cells.append("no head")
                    continue
                f1, kappa = result["agreement"][behavior][level]
                kappas.append(kappa)
                cells.append(f"{f1:.3f} / {kappa:.3f}")
            mean = f"{np.mean(kappas):.3f}" if kappas else "-"
            lines.append(f"| {size:,} | {level} | " + " | ".join(cells) + f" | {mean} |")
    lines += ["", "| classifier (same process, same texts) | docs/s/core |", "|---|---|"]
    lines += [f"| {name} | {value:.1f} |" for name, value in speed.items()]
    return "\n".join(lines)


if __name__ == "__main__":
    main()

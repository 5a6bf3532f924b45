"""Distilled learning curve: heads trained on 1k, 5k and 20k teacher labels of real texts, scored against the
teacher on held-out teacher-labeled texts and against the hand labels (blind set's test half, dev set).

    python bench/distilled_eval.py [--sizes 1000,5000,20000] [--head logistic|mlp|both] [--teacher cues]
                                   [--max-chunks 4] [--test-size 2000] [--workdir DIR]

Corpus (bench/distilled_corpus.py): ~22k real texts of every genre in ../shared/data, none of them (nor any text
sharing a 160-character run with one) in evals/devset, evals/heldout or evals/blindset. A fixed random
`--test-size` of them is the teacher-agreement test; the rest is the pool, whose first N texts (one seeded
order, so 1k is inside 5k inside 20k) are the N teacher labels of a size. Only the texts the sizes need are
embedded and labeled. Those N are split 85/15 into train and
the teacher's validation split, which alone chooses each head's regularisation (logistic C, or MLP alpha, by
average precision) and its threshold (best F1); nothing is chosen on a hand-labeled set.

Teacher agreement is the macro-F1 (mean over the four behaviors of the positive-class F1) of the student against
the teacher's labels on the teacher-agreement test. Hand-label F1 is the same macro-F1 against the adjudicated
labels of the blind set's TEST half (real texts and Countdown traces separately) and the dev set; the teacher's
own row is printed for reference. Embeddings (the `Embedder` of `curate distill`: token windows, mean-pooled) and
teacher labels are cached in the workdir, so the sizes and head types share one embedding pass and a rerun
embeds nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.cue_accuracy import LABELS, is_countdown, load_blindset
from bench.distilled_corpus import embeddings, gather, order, teacher_labels, teacher_source
from curate.behaviors import BEHAVIOR_NAMES
from curate.classifiers.distilled import DEFAULT_EMBEDDING_MODEL, Heads
from curate.pipelines.distill import best_threshold, fit_behavior
from evals.devset.resolve import DEFAULT_DATA_DIR, load_devset

GRID = {"logistic": (0.1, 1.0), "mlp": (1.0,)}  # C of logistic heads; L2 alpha of MLP heads (one value: CPU time)
HIDDEN = 128
MIN_POSITIVES = 5
SHORT = {"verification": "ver", "backtracking": "back", "subgoal_setting": "sub", "backward_chaining": "bwd"}


def f1(gold: np.ndarray, predicted: np.ndarray) -> float:
    tp = int((gold & predicted).sum())
    fp, fn = int((~gold & predicted).sum()), int((gold & ~predicted).sum())
    return 2 * tp / (2 * tp + fp + fn) if tp else 0.0


def per_behavior(gold: np.ndarray, predicted: np.ndarray) -> list[float]:
    """F1 per behavior column; gold -1 (the teacher could not tell) is left out of that column."""
    out = []
    for k in range(gold.shape[1]):
        known = gold[:, k] >= 0
        out.append(f1(gold[known, k] == 1, predicted[known, k] == 1))
    return out


def train_heads(kind: str, x: np.ndarray, y: np.ndarray, validation: np.ndarray, seed: int) -> tuple[Heads, dict]:
    """One head per behavior on the rows not in `validation`; regularisation and threshold chosen on `validation`."""
    from sklearn.metrics import average_precision_score

    heads, chosen = Heads(kind=kind), {}
    for k, behavior in enumerate(BEHAVIOR_NAMES):
        known = y[:, k] >= 0
        train, val = known & ~validation, known & validation
        yt, yv = y[train, k], y[val, k]
        if min(yt.sum(), (1 - yt).sum()) < MIN_POSITIVES:
            chosen[behavior] = None
            continue
        best = None
        for strength in GRID[kind]:
            candidate = Heads(kind=kind)
            fit_behavior(candidate, behavior, x[train], yt, strength, seed, HIDDEN)
            scores = candidate.scores(x[val])[behavior]
            ap = average_precision_score(yv, scores) if 0 < yv.sum() < len(yv) else 0.0
            if best is None or ap > best[0]:
                best = (ap, strength, candidate, scores)
        _, strength, candidate, scores = best
        for store in ("weights", "bias", "layers", "mean", "scale"):
            getattr(heads, store).update(getattr(candidate, store))
        heads.thresholds[behavior] = best_threshold(yv, scores)
        chosen[behavior] = strength
    return heads, chosen


def predict(heads: Heads, x: np.ndarray) -> np.ndarray:
    """0/1 per behavior; a behavior without a head predicts absent."""
    scores = heads.scores(x)
    out = np.zeros((len(x), len(BEHAVIOR_NAMES)), dtype=np.int8)
    for k, b in enumerate(BEHAVIOR_NAMES):
        if b in scores:
            out[:, k] = scores[b] >= heads.thresholds[b]
    return out


def commit() -> str:
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "curate/classifiers"], capture_output=True, text=True, check=False).stdout
        return head + (" (curate/classifiers has uncommitted changes)" if dirty.strip() else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000,5000,20000", help="teacher labels per training run (train + validation)")
    parser.add_argument("--head", choices=("logistic", "mlp", "both"), default="both")
    parser.add_argument("--teacher", default="cues", help="registry name of the teacher (default: the newest cues)")
    parser.add_argument("--max-chunks", type=int, default=4, help="token windows embedded per long text")
    parser.add_argument("--test-size", type=int, default=2000, help="held-out teacher-labeled texts for agreement")
    parser.add_argument("--validation", type=float, default=0.15, help="share of each size's labels for choosing")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workdir", type=Path, default=Path(os.environ.get("TMPDIR", "/tmp")) / "curate-distilled-eval")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    kinds = ["logistic", "mlp"] if args.head == "both" else [args.head]
    args.workdir.mkdir(parents=True, exist_ok=True)
    began = time.time()

    documents, lost = gather(Path(os.environ.get("CURATE_SHARED_DATA") or DEFAULT_DATA_DIR), args.seed)
    if len(documents) < max(sizes) + args.test_size:
        sys.exit(f"only {len(documents)} texts; need {max(sizes) + args.test_size} for --sizes and --test-size")
    sources: dict[str, int] = {}
    for d in documents:
        sources[d["source"]] = sources.get(d["source"], 0) + 1
    print(f"corpus: {len(documents)} real texts, none in (or overlapping) the dev, held-out or blind sets: {sources}")
    print(f"  candidates left out as labeled texts: {lost}")
    blind = load_blindset("test", LABELS["blindset"])
    dev = load_devset()
    hand = {
        "blind test real": [i for i in blind if not is_countdown(i)],
        "blind test countdown": [i for i in blind if is_countdown(i)],
        "dev": dev,
    }
    hand_docs = [{"text": item["text"]} for group in hand.values() for item in group]
    # Embedding (and everything below) follows the seeded order: test first, then the pool, size by size.
    documents = [documents[i] for i in order(len(documents), args.seed)]
    started = time.time()
    x, embed_seconds, new = embeddings(hand_docs + documents[:args.test_size + max(sizes)], args.workdir,
                                       DEFAULT_EMBEDDING_MODEL, args.max_chunks)
    print(f"embeddings: {x.shape[0]} texts ({new} not cached, {embed_seconds:.0f} s; {time.time() - started:.0f} s with loading)")
    documents = documents[:args.test_size + max(sizes)]
    hand_x, offset = {}, 0
    for name, group in hand.items():
        hand_x[name], offset = x[offset:offset + len(group)], offset + len(group)
    x = x[offset:]
    started = time.time()
    y, teacher, teacher_seconds = teacher_labels(documents, args.workdir, args.teacher)
    hand_teacher = {name: teacher_labels([{"text": i["text"]} for i in group], args.workdir, args.teacher, progress=False)[0]
                    for name, group in hand.items()}
    print(f"teacher {teacher} at {commit()}, curate.classifiers source {teacher_source()}: {teacher_seconds:.0f} s new ({time.time() - started:.0f} s with loading); "
          f"positive share {dict(zip(BEHAVIOR_NAMES, (y == 1).mean(axis=0).round(3).tolist()))}")
    gold = {name: np.asarray([[item["labels"][b] for b in BEHAVIOR_NAMES] for item in group], dtype=np.int8)
            for name, group in hand.items()}

    test, pool = np.arange(args.test_size), np.arange(args.test_size, len(documents))
    results = []
    row = {"size": "teacher", "head": teacher, "agreement": None, "per_behavior": None, "seconds": None,
           "hand": {name: float(np.mean(per_behavior(gold[name], hand_teacher[name]))) for name in hand}}
    results.append(row)
    for size in sizes:
        chosen = pool[:size]
        validation = np.zeros(size, dtype=bool)
        validation[np.random.default_rng(args.seed + 1).permutation(size)[:round(size * args.validation)]] = True
        for kind in kinds:
            started = time.time()
            heads, strengths = train_heads(kind, x[chosen], y[chosen], validation, args.seed)
            seconds = time.time() - started
            agreement = per_behavior(y[test], predict(heads, x[test]))
            results.append({
                "size": size, "head": kind, "agreement": float(np.mean(agreement)), "per_behavior": agreement,
                "seconds": seconds, "regularisation": strengths, "thresholds": heads.thresholds,
                "hand": {name: float(np.mean(per_behavior(gold[name], predict(heads, hand_x[name])))) for name in hand},
                "hand_per_behavior": {name: per_behavior(gold[name], predict(heads, hand_x[name])) for name in hand},
            })
            print(f"  size {size} {kind}: agreement {np.mean(agreement):.3f} in {seconds:.0f} s", flush=True)

    test_positives = (y[test] == 1).sum(axis=0).tolist()
    print(f"\nteacher {teacher}; teacher-agreement test: {args.test_size} texts, teacher positives "
          + ", ".join(f"{SHORT[b]} {n}" for b, n in zip(BEHAVIOR_NAMES, test_positives))
          + "; hand-labeled: " + ", ".join(f"{name} {len(group)}" for name, group in hand.items()))
    print("\n| labels | head | agreement macro-F1 | " + " | ".join(SHORT[b] for b in BEHAVIOR_NAMES)
          + " | blind test real | blind test countdown | dev | train s |")
    print("|---" * (7 + len(BEHAVIOR_NAMES)) + "|")
    for r in results:
        cells = ["-"] * len(BEHAVIOR_NAMES) if r["per_behavior"] is None else [f"{v:.2f}" for v in r["per_behavior"]]
        agreement = "(teacher)" if r["agreement"] is None else f"**{r['agreement']:.2f}**"
        size = r["size"] if isinstance(r["size"], str) else f"{r['size']:,}"
        print(f"| {size} | {r['head']} | {agreement} | " + " | ".join(cells) + " | "
              + " | ".join(f"{r['hand'][name]:.2f}" for name in hand) + " | "
              + ("-" if r["seconds"] is None else f"{r['seconds']:.0f}") + " |")
    print(f"\nper-behavior F1 against the hand labels ({' / '.join(SHORT[b] for b in BEHAVIOR_NAMES)}):")
    for r in results[1:]:
        print(f"  {r['size']:>6} {r['head']:<8} " + "   ".join(
            f"{name}: " + "/".join(f"{v:.2f}" for v in r["hand_per_behavior"][name]) for name in hand))
    print("\nchosen on validation (C or alpha): " + "; ".join(f"{r['size']} {r['head']} {r['regularisation']}" for r in results[1:]))
    print(f"total {time.time() - began:.0f} s (embedding {embed_seconds:.0f} s of it new, teacher {teacher_seconds:.0f} s new)")
    if args.json:
        args.json.write_text(json.dumps({"teacher": teacher, "commit": commit(), "teacher_source": teacher_source(), "corpus": sources, "results": results},
                                        indent=1, default=float))


if __name__ == "__main__":
    main()

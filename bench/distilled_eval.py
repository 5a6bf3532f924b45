"""F1 of distilled heads on the hand-labeled dev set, against the cue classifier whose labels they learned.

    python bench/distilled_eval.py [--per-source 400] [--max-chunks 4] [--workdir DIR]

Training texts are real math texts from ../shared/data that are *not* in the dev set, cut into units
like the dev set's (Sky-T1 trace pieces from the MATH-500 traces, PRM800K phase1-test steps, GSM8K
train answers, Stack Exchange fields whose text is not a dev item). They are tagged by `cues` through
the `tag` pipeline, distilled through `curate distill`'s pipeline, and both classifiers are scored on
tests/devset. Also reports documents/s of the distilled classifier against raw
`SentenceTransformer.encode` over the same windows, measured in the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.cue_accuracy import scores  # noqa: E402
from curate.behaviors import BEHAVIOR_NAMES  # noqa: E402
from curate.classifiers import get_classifier  # noqa: E402
from curate.pipelines.distill import train_distilled  # noqa: E402
from curate.pipelines.readers import InputSpec  # noqa: E402
from curate.pipelines.tag import run_tagging  # noqa: E402
from tests.devset.resolve import DEFAULT_DATA_DIR, DevsetUnavailable, cut_pieces, load_devset  # noqa: E402


def training_texts(data: Path, per_source: int, exclude: set[str], seed: int) -> list[dict]:
    import pyarrow.parquet as pq

    rng = random.Random(seed)
    pools: dict[str, list[str]] = {"sky_t1_math500": [], "prm800k_test": [], "gsm8k_train": [], "stackexchange": []}
    for line in (data / "longcot_skythought/sky-t1-math-correct-5K-27B_math500.jsonl").open():
        trace = json.loads(line)["code"][0]
        pools["sky_t1_math500"] += [trace[s:e] for s, e in cut_pieces(trace)]
    steps = pq.read_table(data / "prm800k/phase1_test.stepwise-critic.parquet", columns=["next_response"]).column(0).to_pylist()
    pools["prm800k_test"] = sorted({s for s in steps if s and len(s) >= 40})
    pools["gsm8k_train"] = [json.loads(line)["answer"] for line in (data / "gsm8k/train.jsonl").open()]
    for path in sorted((data / "stackexchange_math").glob("*.jsonl")):
        for line in path.open():
            thread = json.loads(line)
            fields = [thread.get("question", {}).get("body_text")] + [a.get("body_text") for a in thread.get("answers", [])]
            pools["stackexchange"] += [f for f in fields if isinstance(f, str) and 40 <= len(f) <= 3500]
    documents = []
    for source, texts in pools.items():
        texts = [t for t in texts if t.strip() and t not in exclude]
        rng.shuffle(texts)
        documents += [{"id": f"{source}/{i}", "text": t, "source": source} for i, t in enumerate(texts[:per_source])]
    return documents


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--per-source", type=int, default=400, help="training texts per source")
    parser.add_argument("--max-chunks", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workdir", type=Path, help="keep corpus, tags and model here (default: a temp dir)")
    args = parser.parse_args()
    try:
        devset = load_devset()
    except DevsetUnavailable as error:
        sys.exit(f"dev set unavailable: {error}")
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="distilled_eval."))
    documents = training_texts(Path(os.environ.get("CURATE_SHARED_DATA") or DEFAULT_DATA_DIR), args.per_source, {item["text"] for item in devset}, args.seed)
    corpus = workdir / "corpus" / "train.jsonl"
    corpus.parent.mkdir(parents=True, exist_ok=True)
    corpus.write_text("".join(json.dumps(d) + "\n" for d in documents))
    spec = InputSpec(path=str(corpus))
    print(f"training corpus: {len(documents)} texts not in the dev set ({args.per_source} per source) -> {corpus}")

    started = time.time()
    tags = run_tagging(spec, workdir / "tags", "cues", progress=False).tags_dir
    print(f"cue tagging: {time.time() - started:.1f} s")
    started = time.time()
    report = train_distilled(tags, spec, workdir / "model", max_chunks=args.max_chunks, seed=args.seed, progress=True)
    print(f"distill (embed + train): {time.time() - started:.1f} s, model -> {report.model_dir}\n")
    print("held-out split of the training corpus (agreement with cue labels):")
    print("| behavior | train +/- | threshold | precision | recall | F1 | AUC |")
    print("|---|---|---|---|---|---|---|")
    for r in report.behaviors:
        c = r.label_counts["train"]
        if r.trained:
            print(f"| {r.behavior} | {c['positive']}/{c['negative']} | {r.threshold:.3f} | {r.precision:.2f} | {r.recall:.2f} | {r.f1:.2f} | {r.auc:.2f} |")
        else:
            print(f"| {r.behavior} | {c['positive']}/{c['negative']} | no head: {r.warning} |")

    texts = [item["text"] for item in devset]
    cues = get_classifier("cues").classify(texts)
    distilled_classifier = get_classifier(f"distilled:{report.model_dir}")
    started = time.time()
    distilled = distilled_classifier.classify(texts)
    classify_seconds = time.time() - started
    print(f"\ndev set ({len(devset)} hand-labeled items): F1 against the hand labels")
    print("| behavior | positives | cues P / R / F1 | distilled P / R / F1 |")
    print("|---|---|---|---|")
    for b in BEHAVIOR_NAMES:
        gold = [item["labels"][b] for item in devset]
        cp, cr, cf, n = scores(list(zip(gold, [int((l.counts[b] or 0) > 0) for l in cues])))
        if distilled[0].counts[b] is None:
            print(f"| {b} | {n} | {cp:.2f} / {cr:.2f} / {cf:.2f} | no head |")
            continue
        dp, dr, df, _ = scores(list(zip(gold, [l.counts[b] for l in distilled])))
        print(f"| {b} | {n} | {cp:.2f} / {cr:.2f} / {cf:.2f} | {dp:.2f} / {dr:.2f} / {df:.2f} |")

    # Throughput: the classifier (tokenise, window, embed, pool, heads) against raw encode of the same windows.
    embedder = distilled_classifier.embedder
    sample = [d["text"] for d in documents]
    offsets = embedder.model.tokenizer(sample, add_special_tokens=False, return_offsets_mapping=True, verbose=False)["offset_mapping"]
    windows = [w for text, o in zip(sample, offsets) for w in embedder.chunks(text, o)]
    megabytes = sum(len(t.encode()) for t in sample) / 1e6
    started = time.time()
    embedder.model.encode(windows, batch_size=embedder.batch_size, normalize_embeddings=True, show_progress_bar=False)
    raw = time.time() - started
    started = time.time()
    for i in range(0, len(sample), 64):
        distilled_classifier.classify(sample[i:i + 64])
    full = time.time() - started
    print(f"\nthroughput over {len(sample)} training texts ({megabytes:.2f} MB, {len(windows)} windows), CPU:")
    print(f"  raw SentenceTransformer.encode of the windows: {len(sample) / raw:.1f} docs/s, {megabytes / raw:.3f} MB/s")
    print(f"  distilled_v1.classify (batches of 64):         {len(sample) / full:.1f} docs/s, {megabytes / full:.3f} MB/s"
          f"  ({raw / full:.2f} x raw)")
    print(f"  dev set classify: {len(texts) / classify_seconds:.1f} docs/s; peak RSS {rss_mb():.0f} MB")


if __name__ == "__main__":
    main()

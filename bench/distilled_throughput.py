"""Throughput of `tag --classifier distilled:MODEL_DIR` on CPU against raw `SentenceTransformer.encode`.

    python bench/distilled_throughput.py [--docs 300] [--batch-size 64] [--encode-batch-size 64]
                                         [--max-chunks 4] [--train-per-source 60] [--workdir DIR]

1. Builds a distilled model here: real math texts from ../shared/data (the sources of
   bench/distilled_eval.py), tagged by `cues` through `run_tagging`, distilled by `train_distilled`.
2. Measures, each in a fresh subprocess (so model loads, caches and peak RSS do not leak between them):
   - pipeline: `run_tagging(spec, ..., "distilled:MODEL_DIR", tasks=1, workers=1, batch_size=B)` over a
     benchmark corpus of other texts - reading, tokenising, windowing, embedding, pooling, heads, parquet;
   - raw: `SentenceTransformer.encode` of exactly the windows the classifier embeds for those texts
     (computed beforehand, outside the timed region), batch size = the classifier's encode batch size.
   Both timings include loading the embedding model (the pipeline loads it inside its worker), and the raw
   encode alone is reported too. Peak RSS is the child's ru_maxrss.
Target: pipeline >= 0.9 x raw (the pipeline adds at most 10 %).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def child_pipeline(args) -> dict:
    from curate.pipelines.readers import InputSpec
    from curate.pipelines.tag import run_tagging

    started = time.perf_counter()
    result = run_tagging(InputSpec(path=str(args.corpus)), args.out, f"distilled:{args.model_dir}", tasks=1, workers=1,
                         batch_size=args.batch_size, progress=False,
                         classifier_options={"batch_size": args.encode_batch_size})
    seconds = time.perf_counter() - started
    import pyarrow.parquet as pq
    from curate.pipelines.query import parquet_files

    rows = sum(pq.read_metadata(f).num_rows for f in parquet_files(result.tags_dir))
    return {"seconds": seconds, "rows": rows}


def child_raw(args) -> dict:
    from sentence_transformers import SentenceTransformer

    from curate.classifiers.distilled import resolve_embedding_model

    windows = json.loads(Path(args.windows).read_text())
    started = time.perf_counter()
    model = SentenceTransformer(resolve_embedding_model(args.embedding_model), device="cpu")
    loaded = time.perf_counter()
    vectors = model.encode(windows, batch_size=args.encode_batch_size, normalize_embeddings=True,
                           convert_to_numpy=True, show_progress_bar=False)
    done = time.perf_counter()
    return {"seconds": done - started, "encode_seconds": done - loaded, "rows": int(vectors.shape[0])}


def run_child(kind: str, extra: list[str]) -> dict:
    """Runs this script as `--child KIND` in a fresh process; returns its JSON plus its peak RSS, read from the
    rusage of that one child (os.wait4), not from the parent."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        process = subprocess.Popen([sys.executable, __file__, "--child", kind, *extra], stdout=out, stderr=err, text=True)
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0), err.seek(0)
        if process.returncode != 0:
            sys.exit(f"{kind} child failed ({process.returncode}):\n{err.read()[-4000:]}")
        result = json.loads(out.read().strip().splitlines()[-1])
    result["max_rss_mb"] = usage.ru_maxrss / 1024  # KiB on Linux
    return result


def build_model(workdir: Path, per_source: int, max_chunks: int, seed: int) -> tuple[Path, list[dict]]:
    """Cue-label real texts and distil them; returns the model dir and texts not used for training."""
    from bench.distilled_eval import training_texts
    from curate.pipelines.distill import train_distilled
    from curate.pipelines.readers import InputSpec
    from curate.pipelines.tag import run_tagging
    from tests.devset.resolve import DEFAULT_DATA_DIR

    data = Path(os.environ.get("CURATE_SHARED_DATA") or DEFAULT_DATA_DIR)
    # Drawn once, large enough to split into training texts and benchmark texts without overlap.
    documents = training_texts(data, per_source * 4, set(), seed)
    by_source: dict[str, list[dict]] = {}
    for d in documents:
        by_source.setdefault(d["source"], []).append(d)
    train = [d for texts in by_source.values() for d in texts[:per_source]]
    rest = [d for texts in by_source.values() for d in texts[per_source:]]
    corpus = workdir / "train" / "train.jsonl"
    corpus.parent.mkdir(parents=True, exist_ok=True)
    corpus.write_text("".join(json.dumps(d) + "\n" for d in train))
    spec = InputSpec(path=str(corpus))
    tags = run_tagging(spec, workdir / "train_tags", "cues", progress=False).tags_dir
    report = train_distilled(tags, spec, workdir / "model", max_chunks=max_chunks, seed=seed, min_positives=4,
                             progress=False)
    trained = [r.behavior for r in report.behaviors if r.trained]
    print(f"model: {len(train)} cue-labelled texts, heads for {', '.join(trained) or 'nothing'} -> {report.model_dir}")
    return Path(report.model_dir), rest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=int, default=300, help="benchmark documents (spread over the four sources)")
    parser.add_argument("--batch-size", type=int, default=64, help="documents per classifier call (tag --batch-size)")
    parser.add_argument("--encode-batch-size", type=int, default=None,
                        help="windows per encode batch, both sides (default: the classifier's default)")
    parser.add_argument("--max-chunks", type=int, default=4)
    parser.add_argument("--train-per-source", type=int, default=60)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--child", choices=["pipeline", "raw"], help=argparse.SUPPRESS)
    parser.add_argument("--corpus", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--model-dir", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--windows", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--embedding-model", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.child:
        result = child_pipeline(args) if args.child == "pipeline" else child_raw(args)
        print(json.dumps(result))
        return

    import inspect

    from curate.classifiers.distilled import DistilledClassifier, Embedder, load_model_dir

    if args.encode_batch_size is None:
        args.encode_batch_size = inspect.signature(DistilledClassifier).parameters["batch_size"].default
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="distilled_throughput."))
    started = time.time()
    model_dir, rest = build_model(workdir, args.train_per_source, args.max_chunks, args.seed)
    print(f"built in {time.time() - started:.0f} s")

    # Benchmark texts: round-robin over the sources, none of them used for training.
    by_source: dict[str, list[dict]] = {}
    for d in rest:
        by_source.setdefault(d["source"], []).append(d)
    documents, pools = [], [iter(v) for v in by_source.values()]
    while len(documents) < args.docs and pools:
        for pool in list(pools):
            item = next(pool, None)
            if item is None:
                pools.remove(pool)
            elif len(documents) < args.docs:
                documents.append(item)
    corpus = workdir / "bench" / "docs.jsonl"
    corpus.parent.mkdir(parents=True, exist_ok=True)
    corpus.write_text("".join(json.dumps(d) + "\n" for d in documents))

    # The windows the classifier embeds, computed with its own chunking.
    metadata, _ = load_model_dir(model_dir)
    embedder = Embedder(metadata["embedding_model"], max_chunks=metadata["max_chunks"])
    texts = [d["text"] for d in documents]
    offsets = embedder.model.tokenizer(texts, add_special_tokens=False, return_offsets_mapping=True,
                                       verbose=False)["offset_mapping"]
    windows = [w for text, o in zip(texts, offsets) for w in embedder.chunks(text, o)]
    del embedder
    windows_path = workdir / "bench" / "windows.json"
    windows_path.write_text(json.dumps(windows))
    megabytes = sum(len(t.encode()) for t in texts) / 1e6

    raw = run_child("raw", ["--windows", str(windows_path), "--embedding-model", metadata["embedding_model"],
                            "--encode-batch-size", str(args.encode_batch_size)])
    pipeline = run_child("pipeline", ["--corpus", str(corpus), "--out", str(workdir / "bench_tags"), "--model-dir",
                                      str(model_dir), "--batch-size", str(args.batch_size),
                                      "--encode-batch-size", str(args.encode_batch_size)])
    assert pipeline["rows"] == len(documents), pipeline
    assert raw["rows"] == len(windows), raw

    n = len(documents)
    print(f"\n{n} documents ({megabytes:.2f} MB, {len(windows)} windows, max_chunks {metadata['max_chunks']}), CPU, "
          f"{os.cpu_count()} cores, tag --batch-size {args.batch_size}, encode batch {args.encode_batch_size}")
    print("| run | seconds | docs/s | MB/s | peak RSS MiB |")
    print("|---|---|---|---|---|")
    print(f"| raw SentenceTransformer.encode (load + encode) | {raw['seconds']:.1f} | {n / raw['seconds']:.1f} | "
          f"{megabytes / raw['seconds']:.3f} | {raw['max_rss_mb']:.0f} |")
    print(f"| raw encode only | {raw['encode_seconds']:.1f} | {n / raw['encode_seconds']:.1f} | "
          f"{megabytes / raw['encode_seconds']:.3f} | |")
    print(f"| tag --classifier distilled (run_tagging, 1 task/1 worker) | {pipeline['seconds']:.1f} | "
          f"{n / pipeline['seconds']:.1f} | {megabytes / pipeline['seconds']:.3f} | {pipeline['max_rss_mb']:.0f} |")
    ratio = raw["seconds"] / pipeline["seconds"]
    print(f"\nratio pipeline / raw (both with model load): {ratio:.2f} x (target >= 0.9: "
          f"{'met' if ratio >= 0.9 else 'NOT met'}); against encode only: {raw['encode_seconds'] / pipeline['seconds']:.2f} x")


if __name__ == "__main__":
    main()

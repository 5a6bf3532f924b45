"""The real, teacher-labeled corpus of bench/distilled_eval.py: texts, embeddings and teacher labels, cached.

Texts come from every genre in ../shared/data (Sky-T1 trace pieces of all three trace files, PRM800K steps of both
parquet files, GSM8K train/test answers and the model solutions, Stack Exchange questions, answers and comments,
AQuA rationales and the model rationales, MathQA problems, MATH-500 solutions), capped per source, and EXCLUDE
every text of evals/devset, evals/heldout and evals/blindset: equal texts, and any text that shares a
run of 160 characters with one of them (a trace piece cut differently from a labeled one).

Embeddings are computed once per corpus (`Embedder`, the same windows and pooling as `curate distill`) and saved
in parts under the workdir, so an interrupted pass resumes and every training size reads the same vectors.
Teacher labels are cached per teacher and per digest of the teacher's source file.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import random
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from curate.behaviors import BEHAVIOR_NAMES
from evals.devset.resolve import cut_pieces, load_devset

EVALS = Path(__file__).resolve().parents[1] / "evals"
MIN_CHARS, MAX_CHARS = 40, 4000
SHINGLE = 40
CAPS = {
    "sky_t1": 5000, "prm800k": 8000, "gsm8k_train": 5000, "gsm8k_test": 1319, "gsm8k_model_solutions": 3600,
    "stackexchange": 3000, "aqua_rationale": 508, "aqua_model_rationale": 254, "mathqa": 1000, "math500_solution": 500,
}
PART = 512


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def labelled_texts() -> list[str]:
    """Every text of the dev set, the held-out set and the blind set (both halves): excluded from training."""
    from evals.blindset.resolve import load_blindset

    texts = [item["text"] for item in load_devset()]
    texts += [item["text"] for item in load_devset(labels_path=EVALS / "heldout" / "labels.jsonl")]
    texts += [item["text"] for item in load_blindset(items_path=EVALS / "blindset" / "labels.jsonl")]
    return texts


class Exclusion:
    def __init__(self, texts: list[str]):
        self.digests = {digest(t) for t in texts} | {digest(t.strip()) for t in texts}
        self.shingles = {hash(t[i:i + SHINGLE]) for t in texts for i in range(max(1, len(t) - SHINGLE + 1))}

    def __contains__(self, text: str) -> bool:
        if digest(text) in self.digests or digest(text.strip()) in self.digests:
            return True
        # Three aligned shingles in common: a shared run of at least 4 * SHINGLE characters always gives that, while a
        # stock opening line ("<|begin_of_thought|> So I have this problem ...") shared by many traces does not.
        hits = sum(hash(text[i:i + SHINGLE]) in self.shingles for i in range(0, max(1, len(text) - SHINGLE + 1), SHINGLE))
        return hits >= min(3, max(1, len(text) // SHINGLE - 1))


def _jsonl(path: Path):
    with path.open(encoding="utf-8") as f:
        for line in f:
            if line.strip():
                yield json.loads(line)


def _pools(data: Path) -> dict[str, list[str]]:
    import pyarrow.parquet as pq

    pools: dict[str, list[str]] = {name: [] for name in CAPS}
    for path in sorted((data / "longcot_skythought").glob("*.jsonl")):
        for row in _jsonl(path):
            trace = row["code"][0] if isinstance(row["code"], list) else json.loads(row["code"])[0]
            pools["sky_t1"] += [trace[s:e] for s, e in cut_pieces(trace)]
    steps: set[str] = set()
    for path in sorted((data / "prm800k").glob("*.parquet")):
        steps |= {s for s in pq.read_table(path, columns=["next_response"]).column(0).to_pylist() if s}
    pools["prm800k"] = sorted(steps)
    pools["gsm8k_train"] = [row["answer"] for row in _jsonl(data / "gsm8k/train.jsonl")]
    pools["gsm8k_test"] = [row["answer"] for row in _jsonl(data / "gsm8k/test.jsonl")]
    for row in _jsonl(data / "gsm8k/example_model_solutions.jsonl"):
        for key in ("6b_finetuning", "6b_verification", "175b_finetuning", "175b_verification"):
            value = row.get(key)
            if isinstance(value, dict) and isinstance(value.get("solution"), str):
                pools["gsm8k_model_solutions"].append(value["solution"])
    for path in sorted((data / "stackexchange_math").glob("*.jsonl")):
        for thread in _jsonl(path):
            pools["stackexchange"].append((thread.get("question") or {}).get("body_text"))
            pools["stackexchange"] += [a.get("body_text") for a in thread.get("answers") or []]
            comments = thread.get("comments") or {}
            lists = [comments.get("question") or []] + list((comments.get("answers") or {}).values())
            pools["stackexchange"] += [c.get("text") for group in lists for c in group or [] if isinstance(c, dict)]
    for name in ("dev.json", "test.json"):
        pools["aqua_rationale"] += [row["rationale"] for row in _jsonl(data / "aqua" / name)]
    adapters = data / "llm_adapters"
    pools["aqua_model_rationale"] = [r["output"] for r in json.loads((adapters / "aqua_test_with_model_rationales.json").read_text())]
    pools["mathqa"] = [r["instruction"] for r in json.loads((adapters / "mathqa_test.json").read_text())]
    pools["math500_solution"] = [row["solution"] for row in _jsonl(data / "math500/test.jsonl")]
    return pools


def gather(data: Path, seed: int = 0) -> tuple[list[dict], dict[str, int]]:
    """Real texts, at most CAPS[source] per source, none of them (or overlapping) a labeled text. Also returns
    how many candidates each source lost to the exclusion."""
    exclusion = Exclusion(labelled_texts())
    rng = random.Random(seed)
    documents, excluded, seen = [], {}, set()
    for source, texts in _pools(data).items():
        texts = sorted({t for t in texts if isinstance(t, str) and MIN_CHARS <= len(t.strip()) and len(t) <= MAX_CHARS})
        rng.shuffle(texts)
        kept, lost = [], 0
        for text in texts:
            if len(kept) == CAPS[source]:
                break
            if text in exclusion:
                lost += 1
            elif digest(text) not in seen:
                seen.add(digest(text))
                kept.append(text)
        excluded[source] = lost
        documents += [{"id": f"{source}/{i}", "source": source, "text": t} for i, t in enumerate(kept)]
    return documents, excluded


def order(n: int, seed: int = 0) -> np.ndarray:
    """The bench's one seeded order of the corpus: the teacher-agreement test first, then the pool whose first N
    texts are size N. Embedding follows it, so an unfinished pass has embedded a test set and a prefix of the pool."""
    return np.random.default_rng(seed).permutation(n)


def corpus_key(documents: list[dict], *parts: object) -> str:
    h = hashlib.sha256()
    for d in documents:
        h.update(digest(d["text"]).encode())
    for p in parts:
        h.update(repr(p).encode())
    return h.hexdigest()[:12]


def _cache_folder(workdir: Path, model: str, max_chunks: int) -> Path:
    return workdir / f"embeddings-{hashlib.sha256(f'{model}|{max_chunks}'.encode()).hexdigest()[:10]}-chunks{max_chunks}"


def cached_vectors(folder: Path) -> dict[str, np.ndarray]:
    vectors: dict[str, np.ndarray] = {}
    for path in sorted(folder.glob("batch-*.npz")):
        with np.load(path, allow_pickle=False) as arrays:
            vectors.update(zip(arrays["digests"].tolist(), arrays["vectors"]))
    return vectors


def save_batch(folder: Path, digests: list[str], vectors: np.ndarray) -> None:
    name = hashlib.sha256("".join(digests).encode()).hexdigest()[:12]
    tmp = folder / f".tmp-{name}.npz"
    with tmp.open("wb") as f:
        np.savez(f, digests=np.asarray(digests), vectors=vectors.astype(np.float32))
    tmp.replace(folder / f"batch-{name}.npz")


def embeddings(documents: list[dict], workdir: Path, model: str, max_chunks: int, batch_size: int = 64,
               progress: bool = True) -> tuple[np.ndarray, float, int]:
    """(n, d) embeddings, the seconds spent on texts not cached yet, and how many those were. Cached per text
    digest (per embedding model and max_chunks), in batches, so an interrupted pass resumes and any subset or
    reordering of the corpus reuses what was computed."""
    folder = _cache_folder(workdir, model, max_chunks)
    folder.mkdir(parents=True, exist_ok=True)
    cache = cached_vectors(folder)
    missing = [d for d in dict.fromkeys(digest(d["text"]) for d in documents) if d not in cache]
    texts = {digest(d["text"]): d["text"] for d in documents}
    embedder, spent = None, 0.0
    for start in range(0, len(missing), PART):
        if embedder is None:
            from curate.classifiers.distilled import Embedder

            embedder = Embedder(model, max_chunks=max_chunks, batch_size=batch_size)
        began = time.time()
        batch = missing[start:start + PART]
        vectors = embedder.embed([texts[k] for k in batch])
        save_batch(folder, batch, vectors)
        cache.update(zip(batch, vectors))
        spent += time.time() - began
        if progress:
            print(f"  embedded {min(start + PART, len(missing))}/{len(missing)} new texts ({time.time() - began:.0f} s)",
                  file=sys.stderr, flush=True)
    return np.stack([cache[digest(d["text"])] for d in documents]).astype(np.float32), spent, len(missing)


def teacher_source() -> str:
    """Digest of every loaded curate.classifiers module's source and of the cue versions' rule files: the engine
    (cues.py) and the rules (cue_rules/cues_vN.json) live apart, and an edit to either must relabel."""
    from curate.classifiers.cue_rules import RULES_DIR

    names = sorted(n for n in sys.modules if n.startswith("curate.classifiers") and getattr(sys.modules[n], "__file__", None))
    rules = "".join(path.read_text(encoding="utf-8") for path in sorted(RULES_DIR.glob("*.json")))
    return digest("".join(inspect.getsource(sys.modules[n]) for n in names) + rules)


def teacher_labels(documents: list[dict], workdir: Path, teacher: str = "cues", progress: bool = True) -> tuple[np.ndarray, str, float]:
    """(n, 4) presence per behavior (-1 where the teacher could not tell), the teacher's name, and the seconds
    spent labelling. Cached per corpus and per digest of the classifier modules' source (cues may still change)."""
    from curate.classifiers import get_classifier

    classifier = get_classifier(teacher)
    source = teacher_source()
    name = getattr(classifier, "name", teacher)
    path = workdir / f"teacher-{name}-{corpus_key(documents, digest(source))}.npy"
    if path.exists():
        return np.load(path), name, 0.0
    began, rows = time.time(), []
    for start in range(0, len(documents), 1000):
        for labels in classifier.classify([d["text"] for d in documents[start:start + 1000]]):
            rows.append([-1 if labels.error and labels.counts[b] is None else int((labels.counts[b] or 0) > 0) for b in BEHAVIOR_NAMES])
        if progress:
            print(f"  teacher {name}: {min(start + 1000, len(documents))}/{len(documents)}", file=sys.stderr, flush=True)
    matrix = np.asarray(rows, dtype=np.int8)
    np.save(path, matrix)
    return matrix, name, time.time() - began


if __name__ == "__main__":
    import argparse
    import os

    from curate.classifiers.distilled import DEFAULT_EMBEDDING_MODEL
    from evals.devset.resolve import DEFAULT_DATA_DIR

    parser = argparse.ArgumentParser(description="prepare (gather, embed, label) the corpus in a workdir")
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument("--max-chunks", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--skip-teacher", action="store_true")
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    began = time.time()
    docs, lost = gather(Path(os.environ.get("CURATE_SHARED_DATA") or DEFAULT_DATA_DIR), args.seed)
    print(f"{len(docs)} texts in {time.time() - began:.0f} s; excluded as labeled: {lost}", flush=True)
    vectors, seconds, new = embeddings([docs[i] for i in order(len(docs), args.seed)], args.workdir,
                                       DEFAULT_EMBEDDING_MODEL, args.max_chunks)
    print(f"embeddings {vectors.shape}: {new} new in {seconds:.0f} s", flush=True)
    if not args.skip_teacher:
        labels, name, seconds = teacher_labels(docs, args.workdir)
        print(f"teacher {name}: {labels.shape} in {seconds:.0f} s; positives {labels.clip(0).sum(axis=0)}", flush=True)

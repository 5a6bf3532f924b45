"""Speed and macro F1 of `spans_v1`, `spans_v2` and `spans_v3` beside today's default (`cues` = cues_ngram_v1) and
a fastText peer (issue 36).

    python bench/spans_throughput.py [--mb 5] [--rounds 3] [--cpu 0] [--no-write]

The five run as datatrove pipeline steps over the same `Document` objects, as a datatrove user pays for them:
curate's `TagDocuments` step for spans_v1, spans_v2, spans_v3 and cues_ngram_v1, and datatrove's own
`FastTextClassifierFilter` for a fastText model trained here, on the spot, on exactly the labeled texts spans_v1
was trained on (the digests in its model.json), one multi-label model (one-vs-all loss: an independent probability
per behavior, present at >= 0.5). The corpus is the texts of the test rounds (blindset18, blindset19: trained on by
none of them), shuffled and repeated to --mb megabytes, plus the longest Sky-T1 trace of
../shared/data/longcot_skythought. One process, pinned to one core with every BLAS/OpenMP pool at one thread; the
steps alternate in rounds (A B C D E A B C D E ...), each round building its step afresh (model load included, as in one
datatrove task), and the table gives the median round: documents and megabytes per second of the process's CPU time
(= per core), and wall time. Macro F1 is scikit-learn's F1 (not the project's own) of each step's decisions on the
test rounds' texts.
The table is printed and written to docs/benchmarks.md, section "Classifier speed".
"""

from __future__ import annotations

import os

# One core and one thread per pool, set before numpy or scipy start their pools.
for _variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS"):
    os.environ[_variable] = "1"
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SHARED = Path(os.environ.get("CURATE_SHARED_DATA", ROOT.parent / "shared" / "data"))
DOCS = ROOT / "docs" / "benchmarks.md"
SECTION = "## Classifier speed"
TEST_SETS = ("blindset18", "blindset19")
# fastText's supervised settings: the tutorial's recipe for small labeled sets (word bigrams, many epochs), one
# thread and a fixed seed so that the model, and so its F1, is the same on every run.
FASTTEXT_SETTINGS = {"loss": "ova", "lr": 0.5, "epoch": 25, "wordNgrams": 2, "dim": 50, "minCount": 2,
                     "thread": 1, "seed": 0}
FASTTEXT_NONE = "none"  # the label of a text that shows no behavior: fastText needs one label per line
FASTTEXT_THRESHOLD = 0.5


def one_line(text: str) -> str:
    """fastText reads one example per line; the filter is told to replace newlines the same way."""
    return " ".join(text.split())


def train_fasttext(items: list[dict], trained_on: set[str], folder: Path) -> Path:
    import fasttext

    from curate.behaviors import BEHAVIOR_NAMES
    from evals.spans.draw import digest

    chosen = [item for item in items if digest(item["text"]) in trained_on]
    if len(chosen) != len(trained_on):
        raise SystemExit(f"found {len(chosen)} of the {len(trained_on)} texts spans_v1 was trained on: evals/ and "
                         "models/spans_v1/model.json disagree; retrain spans_v1 (bench/train_spans.py --write)")
    lines = []
    for item in chosen:
        labels = [b for b in BEHAVIOR_NAMES if item["labels"][b]] or [FASTTEXT_NONE]
        lines.append(" ".join(f"__label__{label}" for label in labels) + " " + one_line(item["text"]))
    train_file = folder / "train.txt"
    train_file.write_text("\n".join(lines) + "\n")
    model = fasttext.train_supervised(input=str(train_file), verbose=0, **FASTTEXT_SETTINGS)
    path = folder / "behaviors.ftz"
    model.save_model(str(path))
    return path


def longest_trace() -> str:
    traces = [json.loads(line)["code"][0] for path in sorted((SHARED / "longcot_skythought").glob("*.jsonl"))
              for line in path.open()]
    return max(traces, key=len)


def make_corpus(texts: list[str], megabytes: float, long_trace: str, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    corpus, size = [long_trace], len(long_trace.encode())
    while size < megabytes * 1e6:
        order = texts[:]
        rng.shuffle(order)
        for text in order:
            corpus.append(text)
            size += len(text.encode())
            if size >= megabytes * 1e6:
                break
    return corpus


def make_step(name: str, fasttext_model: Path):
    from datatrove.pipeline.filters import FastTextClassifierFilter

    from curate.pipelines.steps import TagDocuments

    if name == "fastText":
        # Annotate only: every document goes on with its scores in metadata. remove_labels=[] rather than None:
        # datatrove 0.10.1's label check computes `[] + self.remove_labels` and fails on None when neither is given.
        return FastTextClassifierFilter(str(fasttext_model), remove_labels=[], newline_replacement=" ")
    return TagDocuments(name)


def run_step(name: str, texts: list[str], fasttext_model: Path) -> tuple[list, float, float]:
    """The documents the step yields, its CPU seconds and its wall seconds (building the step included)."""
    from datatrove.data import Document

    documents = [Document(text=text, id=str(i)) for i, text in enumerate(texts)]
    cpu, wall = time.process_time(), time.perf_counter()
    out = list(make_step(name, fasttext_model)(iter(documents)))
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    if [d.id for d in out] != [d.id for d in documents]:
        raise RuntimeError(f"{name}: the step yielded {len(out)} of {len(documents)} documents, or out of order")
    return out, cpu, wall


def decisions(name: str, documents: list) -> list[list[bool]]:
    from curate.behaviors import BEHAVIOR_NAMES
    from curate.pipelines.steps import ATTRIBUTES

    if name == "fastText":
        return [[d.metadata.get(f"__label__{b}", 0.0) >= FASTTEXT_THRESHOLD for b in BEHAVIOR_NAMES]
                for d in documents]
    rows = [d.metadata[ATTRIBUTES] for d in documents]
    if any(row["error"] for row in rows):
        raise RuntimeError(f"{name}: {sum(bool(row['error']) for row in rows)} documents failed to tag")
    return [[bool(row[b]) for b in BEHAVIOR_NAMES] for row in rows]


def macro_f1(gold: list[list[bool]], guess: list[list[bool]]) -> float:
    from sklearn.metrics import f1_score

    # A behavior absent from both gold and guess scores 1 (nothing to find, nothing wrongly found).
    return float(f1_score(gold, guess, average="macro", zero_division=1.0))


def table(results: dict, corpus: list[str], args, device: str) -> str:
    megabytes = sum(len(t.encode()) for t in corpus) / 1e6
    default_rate = statistics.median(len(corpus) / c for c in results["cues_ngram_v1"]["cpu"])
    lines = [
        SECTION, "",
        (f"`python bench/spans_throughput.py --mb {args.mb:g} --rounds {args.rounds}` ({time.strftime('%Y-%m-%d')}, "
        f"{device}). Corpus: the {results['test_texts']} texts of rounds 18 and 19 shuffled and repeated, plus the "
        f"longest Sky-T1 trace ({results['long_trace_chars']:,} characters): {len(corpus):,} documents, "
        f"{megabytes:.2f} MB. One process pinned to one core, one thread per pool; the datatrove steps "
        f"alternate over the same documents, {args.rounds} rounds, median round shown (min-max of docs/s/core in "
        "brackets). Per core = per second of the process's CPU time. Macro F1: scikit-learn's, on each test round's "
        "texts; no classifier here was trained on them."), "",
        ("| classifier (datatrove step) | docs/s/core | MB/s/core | wall docs/s | vs cues_ngram_v1 | macro F1 round 18 "
        "| macro F1 round 19 | macro F1 both |"),
        "|---|---|---|---|---|---|---|---|",
    ]
    for name in STEP_NAMES:
        result = results[name]
        rates = [len(corpus) / c for c in result["cpu"]]
        rate = statistics.median(rates)
        mb_rate = statistics.median(megabytes / c for c in result["cpu"])
        wall = statistics.median(len(corpus) / w for w in result["wall"])
        f1 = result["f1"]
        lines.append(f"| {STEP_LABELS[name]} | {rate:,.0f} [{min(rates):,.0f}-{max(rates):,.0f}] | {mb_rate:.2f} | "
                     f"{wall:,.0f} | {rate / default_rate:.2f}x | {f1['blindset18']:.3f} | {f1['blindset19']:.3f} | "
                     f"{f1['both']:.3f} |")
    lines += [
        "", f"fastText: {results['fasttext_texts']:,} training texts (exactly spans_v1's, by digest), one multi-label "
        f"model, {json.dumps(FASTTEXT_SETTINGS)}, a behavior present at probability >= {FASTTEXT_THRESHOLD}; trained "
        f"in {results['fasttext_train_s']:.1f} s. A step's first run in the process, on one document (imports and "
        "model load), CPU s: " +
        ", ".join(f"{STEP_LABELS[n]} {results[n]['load_s']:.2f}" for n in STEP_NAMES) + ".", "",
    ]
    return "\n".join(lines)


STEP_NAMES = ("spans_v1", "spans_v2", "spans_v3", "cues_ngram_v1", "fastText")
STEP_LABELS = {"spans_v1": "`spans_v1` (TagDocuments)", "spans_v2": "`spans_v2` (TagDocuments)",
               "spans_v3": "`spans_v3` (TagDocuments)",
               "cues_ngram_v1": "`cues` = cues_ngram_v1 (TagDocuments)",
               "fastText": "fastText (datatrove FastTextClassifierFilter)"}


def write_section(text: str) -> None:
    """Replaces the section in docs/benchmarks.md (up to the next "## "), or appends it."""
    old = DOCS.read_text() if DOCS.exists() else "# Benchmarks\n\nMeasured figures, each with the command that gives it.\n"
    start = old.find(SECTION)
    if start < 0:
        DOCS.write_text(old.rstrip("\n") + "\n\n" + text)
        return
    end = old.find("\n## ", start + len(SECTION))
    DOCS.write_text(old[:start] + text + ("" if end < 0 else old[end:]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=float, default=5.0, help="corpus size in megabytes of text")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cpu", type=int, default=None, help="the core to pin to (default: the first allowed)")
    parser.add_argument("--no-write", action="store_true", help="print the table, leave docs/benchmarks.md alone")
    args = parser.parse_args()
    cpu = args.cpu if args.cpu is not None else min(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpu})

    from curate.behaviors import BEHAVIOR_NAMES
    from curate.classifiers.spans import MODELS
    from evals.spans.draw import labeled_items

    items = labeled_items()
    test = [item for item in items if item["set"] in TEST_SETS]
    trained_on = set(json.loads((MODELS / "spans_v1" / "model.json").read_text())["trained_on"]["text_sha256"])
    with tempfile.TemporaryDirectory(prefix="spans_throughput_") as folder:
        # datatrove copies a model into its assets cache before loading it: keep that copy in the temp folder.
        os.environ["HF_ASSETS_CACHE"] = folder
        import huggingface_hub.constants

        huggingface_hub.constants.HF_ASSETS_CACHE = folder
        started = time.perf_counter()
        fasttext_model = train_fasttext(items, trained_on, Path(folder))
        results: dict = {"fasttext_train_s": time.perf_counter() - started, "fasttext_texts": len(trained_on),
                         "test_texts": len(test)}
        long_trace = longest_trace()
        results["long_trace_chars"] = len(long_trace)
        corpus = make_corpus([item["text"] for item in test], args.mb, long_trace)

        for name in STEP_NAMES:
            # Macro F1 on the test rounds; the same call warms each step (imports, first model load) before timing.
            _, load_cpu, _ = run_step(name, corpus[:1], fasttext_model)
            out, _, _ = run_step(name, [item["text"] for item in test], fasttext_model)
            guess = decisions(name, out)
            gold = [[bool(item["labels"][b]) for b in BEHAVIOR_NAMES] for item in test]
            f1 = {"both": macro_f1(gold, guess)}
            for round_name in TEST_SETS:
                at = [i for i, item in enumerate(test) if item["set"] == round_name]
                f1[round_name] = macro_f1([gold[i] for i in at], [guess[i] for i in at])
            results[name] = {"f1": f1, "cpu": [], "wall": [], "load_s": load_cpu}
        for round_number in range(args.rounds):
            for name in STEP_NAMES:
                _, cpu_s, wall_s = run_step(name, corpus, fasttext_model)
                results[name]["cpu"].append(cpu_s)
                results[name]["wall"].append(wall_s)
                print(f"round {round_number + 1} {name}: {len(corpus) / cpu_s:,.0f} docs/s/core "
                      f"({cpu_s:.1f} s CPU, {wall_s:.1f} s wall)", file=sys.stderr, flush=True)
    import platform

    model_names = [line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                   if line.startswith("model name")]
    device = f"{model_names[0] if model_names else platform.machine()}, core {cpu}, Python {platform.python_version()}"
    text = table(results, corpus, args, device)
    print(text)
    if not args.no_write:
        write_section(text)


if __name__ == "__main__":
    main()

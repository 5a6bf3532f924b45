"""How well the LLM classifiers' prompts read the span read's texts when a language model answers them word for word:
llm_spans_v1 (quote each instance) beside llm_v1 (count), both in joint mode (one request per text).

    python bench/llm_spans_prompt.py prompts [--out /tmp/llmspans] [--n 40] [--seed 20261206]
    python bench/llm_spans_prompt.py score [--readers evals/spans/llm_readers]
    python bench/llm_spans_prompt.py score --oracle      # answers written from the labels: checks the scoring itself

`prompts` draws N texts of evals/spans/items.jsonl, none from the test rounds (blindset18, blindset19), seeded and
spread evenly across the six genres, and writes each prompt exactly as the classifier would send it (system message,
then the user message: the document, then the question) to OUT/<prompt>/<id>.txt, with OUT/<prompt>/prompts.jsonl
(`{"id", "messages"}`) and OUT/draw.txt (the ids). A reader gets one such file at a time and nothing else.

`score` reads READERS/<prompt>/<reader>.jsonl (`{"id", "answer"}`: the reader's raw answer), parses each answer with
that prompt's own parser (curate.classifiers.llm_spans / curate.classifiers.llm, as tagging would) and scores it
against the adjudicated labels of evals/spans/labels.jsonl: document F1 per behavior (present: a count >= 1; an
unreadable answer counts as absent and is reported), macro F1, and for the quoting prompt span precision (the share of
aligned quotes that overlap a labeled span of the same behavior), quotes dropped as not found, and the Spearman
correlation of counts with the labeled instance counts. Texts are resolved from ../shared/data.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from curate.behaviors import BEHAVIOR_NAMES
from curate.classifiers.llm import JOINT, PromptSet, labels_from_answers
from curate.classifiers.llm_spans import PROMPTS_DIR as SPANS_PROMPTS_DIR
from curate.classifiers.llm_spans import span_labels_from_answers

SPANS = Path(__file__).resolve().parents[1] / "evals" / "spans"
READERS = SPANS / "llm_readers"
TEST_ROUNDS = ("blindset18", "blindset19")
PROMPTS = {"llm_spans_v1": SPANS_PROMPTS_DIR, "llm_v1": None}  # None: llm_v1's own folder, PromptSet's default
DEFAULT_SEED = 20261206


def prompt_set(name: str) -> PromptSet:
    directory = PROMPTS[name]
    return PromptSet.load(directory) if directory else PromptSet.load()


def draw(n: int, seed: int) -> list[str]:
    """N ids, none from a test round, dealt round-robin from each genre's seeded shuffle (genres in name order)."""
    items = [json.loads(line) for line in (SPANS / "items.jsonl").read_text().splitlines()]
    rng = random.Random(seed)
    pools = {}
    for genre in sorted({item["genre"] for item in items}):
        pool = sorted(item["id"] for item in items if item["genre"] == genre and item["set"] not in TEST_ROUNDS)
        rng.shuffle(pool)
        pools[genre] = pool
    chosen: list[str] = []
    while len(chosen) < n and any(pools.values()):
        for pool in pools.values():
            if pool and len(chosen) < n:
                chosen.append(pool.pop())
    return chosen


def texts() -> dict[str, str]:
    from evals.spans.align import texts_by_id

    return texts_by_id()


def write_prompts(out: Path, n: int, seed: int) -> None:
    ids = draw(n, seed)
    by_id = texts()
    out.mkdir(parents=True, exist_ok=True)
    (out / "draw.txt").write_text("".join(i + "\n" for i in ids))
    for name in PROMPTS:
        prompts = prompt_set(name)
        folder = out / name
        folder.mkdir(exist_ok=True)
        with (folder / "prompts.jsonl").open("w") as manifest:
            for item_id in ids:
                messages = prompts.messages(by_id[item_id], JOINT)
                manifest.write(json.dumps({"id": item_id, "prompt_version": prompts.version,
                                           "messages": messages}, ensure_ascii=False) + "\n")
                (folder / f"{item_id}.txt").write_text(
                    f"[system]\n{messages[0]['content']}\n\n[user]\n{messages[1]['content']}\n", encoding="utf-8")
        print(f"{name} ({prompts.version}): {len(ids)} prompts in {folder}")


# --------------------------------------------------------------------------------------------- #
# Scoring
# --------------------------------------------------------------------------------------------- #
def f1(predicted: list[int], gold: list[int]) -> tuple[float, float, float]:
    tp = sum(p and g for p, g in zip(predicted, gold))
    fp = sum(p and not g for p, g in zip(predicted, gold))
    fn = sum(g and not p for p, g in zip(predicted, gold))
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    return precision, recall, (2 * precision * recall / (precision + recall) if precision + recall else 0.0)


def spearman(xs: list[float], ys: list[float]) -> float | None:
    from scipy.stats import spearmanr

    if len(set(xs)) < 2 or len(set(ys)) < 2:
        return None
    return float(spearmanr(xs, ys).statistic)


def read_labels(name: str, answer: str, document: str):
    if name == "llm_spans_v1":
        return span_labels_from_answers({JOINT: answer}, document)
    return labels_from_answers({JOINT: answer})


def score(name: str, answers: dict[str, str], gold: dict[str, dict], by_id: dict[str, str]) -> dict:
    """One reader's figures on one prompt."""
    labels = {i: read_labels(name, answers[i], by_id[i]) for i in answers}
    ids = sorted(labels)
    result = {"texts": len(ids), "unreadable": sum(labels[i].error is not None for i in ids), "behaviors": {}}
    for behavior in BEHAVIOR_NAMES:
        predicted = [int((labels[i].counts[behavior] or 0) > 0) for i in ids]
        truth = [gold[i]["labels"][behavior] for i in ids]
        precision, recall, f = f1(predicted, truth)
        row = {"precision": precision, "recall": recall, "f1": f, "gold": sum(truth), "predicted": sum(predicted)}
        if name == "llm_spans_v1":
            spans = [(i, e) for i in ids for e in labels[i].evidence if e.behavior == behavior]
            hits = sum(any(g["behavior"] == behavior and e.start < g["end"] and g["start"] < e.end
                           for g in gold[i]["spans"]) for i, e in spans)
            row.update(spans=len(spans), span_precision=hits / len(spans) if spans else None,
                       unaligned=sum(u.behavior == behavior for i in ids for u in labels[i].unaligned))
        row["spearman"] = spearman([labels[i].counts[behavior] or 0 for i in ids],
                                   [sum(s["behavior"] == behavior for s in gold[i]["spans"]) for i in ids])
        result["behaviors"][behavior] = row
    result["macro_f1"] = sum(r["f1"] for r in result["behaviors"].values()) / len(BEHAVIOR_NAMES)
    return result


def oracle_answers(name: str, ids: list[str], gold: dict[str, dict], by_id: dict[str, str]) -> dict[str, str]:
    """Answers a perfect reader would give: the labeled spans quoted, or their counts."""
    answers = {}
    for i in ids:
        spans = gold[i]["spans"]
        if name == "llm_spans_v1":
            quotes = {b: [by_id[i][s["start"]:s["end"]] for s in spans if s["behavior"] == b] for b in BEHAVIOR_NAMES}
            answers[i] = json.dumps(quotes, ensure_ascii=False)
        else:
            answers[i] = json.dumps({b: sum(s["behavior"] == b for s in spans) for b in BEHAVIOR_NAMES})
    return answers


def fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def print_table(results: dict[tuple[str, str], dict]) -> None:
    short = {"verification": "ver", "backtracking": "bt", "subgoal_setting": "sub", "backward_chaining": "bc"}
    print("| prompt | reader | texts | unreadable | " + " | ".join(f"F1 {short[b]}" for b in BEHAVIOR_NAMES)
          + " | macro F1 | " + " | ".join(f"span P {short[b]}" for b in BEHAVIOR_NAMES) + " | quotes dropped |")
    print("|" + "---|" * (6 + 2 * len(BEHAVIOR_NAMES)))
    for (name, reader), result in sorted(results.items()):
        rows = result["behaviors"]
        spans = [fmt(rows[b].get("span_precision")) for b in BEHAVIOR_NAMES]
        dropped = sum(rows[b].get("unaligned", 0) for b in BEHAVIOR_NAMES) if name == "llm_spans_v1" else "-"
        print(f"| {name} | {reader} | {result['texts']} | {result['unreadable']} | "
              + " | ".join(f"{rows[b]['f1']:.2f}" for b in BEHAVIOR_NAMES) + f" | {result['macro_f1']:.3f} | "
              + " | ".join(spans) + f" | {dropped} |")


def run_score(readers: Path, oracle: bool, n: int, seed: int) -> dict[tuple[str, str], dict]:
    gold = {row["id"]: row for row in map(json.loads, (SPANS / "labels.jsonl").read_text().splitlines())}
    by_id = texts()
    results = {}
    for name in PROMPTS:
        if oracle:
            results[(name, "oracle")] = score(name, oracle_answers(name, draw(n, seed), gold, by_id), gold, by_id)
            continue
        for path in sorted((readers / name).glob("*.jsonl")):
            answers = {row["id"]: row["answer"] for row in map(json.loads, path.read_text().splitlines()) if row}
            results[(name, path.stem)] = score(name, answers, gold, by_id)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    writing = commands.add_parser("prompts")
    writing.add_argument("--out", type=Path, default=Path("/tmp/llmspans"))
    scoring = commands.add_parser("score")
    scoring.add_argument("--readers", type=Path, default=READERS)
    scoring.add_argument("--oracle", action="store_true")
    scoring.add_argument("--json", type=Path, help="also write the figures here")
    for sub in (writing, scoring):
        sub.add_argument("--n", type=int, default=40)
        sub.add_argument("--seed", type=int, default=DEFAULT_SEED)
    args = parser.parse_args()
    if args.command == "prompts":
        write_prompts(args.out, args.n, args.seed)
        return
    results = run_score(args.readers, args.oracle, args.n, args.seed)
    if not results:
        sys.exit(f"no reader answers under {args.readers}/<prompt>/<reader>.jsonl")
    print_table(results)
    if args.json:
        args.json.write_text(json.dumps({f"{k[0]}/{k[1]}": v for k, v in results.items()}, indent=1))


if __name__ == "__main__":
    main()

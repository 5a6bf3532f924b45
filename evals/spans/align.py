"""Turn the span readers' quotes into character offsets, report their agreement, and merge them.

    python evals/spans/align.py readers --a A.jsonl [A2.jsonl ...] --b B.jsonl [...]   # writes spans_a/b.jsonl
    python evals/spans/align.py agreement                  # document kappa and span overlap F1, per behavior
    python evals/spans/align.py disputes > disputes.jsonl  # texts where the readers disagree on a document label
    python evals/spans/align.py merge --decisions decisions.jsonl   # writes labels.jsonl
    python evals/spans/align.py --folder evals/spans/unseen agreement  # the same for the unseen-source read

Readers write quotes; only offsets are committed (`spans_<reader>.jsonl`: `{"id", "spans": [{"behavior", "start",
"end"}]}`), since a quote is a copy of the source text, which stays in ../shared/data. A quote not found in its text
is dropped and counted. `labels.jsonl` holds, per text, the merged spans: where both readers mark a behavior, the
union of their spans; where they disagree, the third reader's decision (`decisions.jsonl`: `{"id", "behavior",
"present", "spans": [quotes]}`), whose quotes are aligned the same way.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from curate.behaviors import BEHAVIOR_NAMES
from evals.spans.draw import digest, labeled_items

HERE = Path(__file__).resolve().parent


def texts_by_id(folder: Path = HERE) -> dict[str, str]:
    """Read id -> text of the read in `folder`: the span read's texts come from the labeled sets, the unseen read's
    (items with a `unique_id`) from MATH-500."""
    items = [json.loads(line) for line in (folder / "items.jsonl").read_text().splitlines()]
    if items and "unique_id" in items[0]:
        from evals.spans.draw_unseen import resolve

        return resolve(items)
    by_digest = {digest(item["text"]): item["text"] for item in labeled_items()}
    return {item["id"]: by_digest[item["sha256"]] for item in items}


def locate(text: str, quote: str, occurrence: int = 1) -> tuple[int, int] | None:
    start = -1
    for _ in range(max(1, occurrence)):
        start = text.find(quote, start + 1)
        if start < 0:
            return None
    return start, start + len(quote)


def aligned(rows: list[dict], texts: dict[str, str]) -> tuple[list[dict], int]:
    out, missing = [], 0
    for row in rows:
        spans = []
        for span in row["spans"]:
            where = locate(texts[row["id"]], span["quote"], span.get("occurrence", 1))
            if where is None or span["behavior"] not in BEHAVIOR_NAMES:
                missing += 1
                continue
            spans.append({"behavior": span["behavior"], "start": where[0], "end": where[1]})
        out.append({"id": row["id"], "spans": sorted(spans, key=lambda s: (s["start"], s["behavior"]))})
    return sorted(out, key=lambda r: r["id"]), missing


def read(path: Path) -> dict[str, dict]:
    return {row["id"]: row for row in map(json.loads, path.read_text().splitlines()) if row}


def present(row: dict, behavior: str) -> int:
    return int(any(s["behavior"] == behavior for s in row["spans"]))


def kappa(a: list[int], b: list[int]) -> float:
    n = len(a)
    if not n:
        return float("nan")
    observed = sum(x == y for x, y in zip(a, b)) / n
    pa, pb = sum(a) / n, sum(b) / n
    expected = pa * pb + (1 - pa) * (1 - pb)
    return 1.0 if expected == 1 else (observed - expected) / (1 - expected)


def overlaps(span: dict, others: list[dict]) -> bool:
    return any(o["behavior"] == span["behavior"] and span["start"] < o["end"] and o["start"] < span["end"]
               for o in others)


def agreement(folder: Path = HERE) -> None:
    a, b = read(folder / "spans_a.jsonl"), read(folder / "spans_b.jsonl")
    genre = {row["id"]: row["genre"] for row in map(json.loads, (folder / "items.jsonl").read_text().splitlines())}
    ids = sorted(a)
    print("| behavior | texts | kappa (all) | kappa real | kappa Countdown | span overlap F1 |")
    print("|---|---|---|---|---|---|")
    for behavior in BEHAVIOR_NAMES:
        cells = []
        for subset in (ids, [i for i in ids if genre[i] != "countdown"], [i for i in ids if genre[i] == "countdown"]):
            cells.append(kappa([present(a[i], behavior) for i in subset], [present(b[i], behavior) for i in subset]))
        a_spans = [s for i in ids for s in a[i]["spans"] if s["behavior"] == behavior]
        b_spans = [s for i in ids for s in b[i]["spans"] if s["behavior"] == behavior]
        p = sum(overlaps(s, b[i]["spans"]) for i in ids for s in a[i]["spans"] if s["behavior"] == behavior)
        r = sum(overlaps(s, a[i]["spans"]) for i in ids for s in b[i]["spans"] if s["behavior"] == behavior)
        p, r = p / max(1, len(a_spans)), r / max(1, len(b_spans))
        f1 = 2 * p * r / (p + r) if p + r else 0.0
        print(f"| {behavior} | {len(ids)} | {cells[0]:.3f} | {cells[1]:.3f} | {cells[2]:.3f} | {f1:.3f} |")


def disputes(folder: Path = HERE) -> list[dict]:
    a, b = read(folder / "spans_a.jsonl"), read(folder / "spans_b.jsonl")
    texts = texts_by_id(folder)
    out = []
    for i in sorted(a):
        for behavior in BEHAVIOR_NAMES:
            if present(a[i], behavior) != present(b[i], behavior):
                quotes = {reader: [texts[i][s["start"]:s["end"]] for s in row[i]["spans"] if s["behavior"] == behavior]
                          for reader, row in (("a", a), ("b", b))}
                # The third reader sees the quotes of the one reader who marked the behavior, not who it was.
                out.append({"id": i, "behavior": behavior, "text": texts[i], "marked": quotes["a"] or quotes["b"]})
    return out


def merge(decisions_path: Path, folder: Path = HERE) -> None:
    a, b = read(folder / "spans_a.jsonl"), read(folder / "spans_b.jsonl")
    texts = texts_by_id(folder)
    decisions = {}
    for row in map(json.loads, decisions_path.read_text().splitlines()):
        decisions[(row["id"], row["behavior"])] = row
    missing = 0
    with open(folder / "labels.jsonl", "w") as out:
        for i in sorted(a):
            spans = []
            for behavior in BEHAVIOR_NAMES:
                mine = [s for s in a[i]["spans"] + b[i]["spans"] if s["behavior"] == behavior]
                if present(a[i], behavior) == present(b[i], behavior):
                    chosen = mine
                else:
                    decision = decisions[(i, behavior)]
                    chosen = []
                    if decision["present"]:
                        for quote in decision["spans"]:
                            where = locate(texts[i], quote)
                            if where is None:
                                missing += 1
                            else:
                                chosen.append({"behavior": behavior, "start": where[0], "end": where[1]})
                        chosen = chosen or mine
                unique = {(s["start"], s["end"]): s for s in chosen}
                spans += sorted(unique.values(), key=lambda s: s["start"])
            labels = {behavior: int(any(s["behavior"] == behavior for s in spans)) for behavior in BEHAVIOR_NAMES}
            out.write(json.dumps({"id": i, "labels": labels, "spans": spans,
                                  "adjudicated": sorted(b2 for (j, b2) in decisions if j == i)}) + "\n")
    print(f"merged {len(a)} texts; {missing} decision quotes not found", file=sys.stderr)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--folder", type=Path, default=HERE, help="the read's folder: evals/spans (the span read, "
                        "default) or evals/spans/unseen (the unseen-source read)")
    commands = parser.add_subparsers(dest="command", required=True)
    readers = commands.add_parser("readers")
    readers.add_argument("--a", type=Path, nargs="+", required=True)
    readers.add_argument("--b", type=Path, nargs="+", required=True)
    commands.add_parser("agreement")
    commands.add_parser("disputes")
    merging = commands.add_parser("merge")
    merging.add_argument("--decisions", type=Path, required=True)
    args = parser.parse_args()
    if args.command == "readers":
        texts = texts_by_id(args.folder)
        for name, paths in (("a", args.a), ("b", args.b)):
            rows = [json.loads(line) for path in paths for line in path.read_text().splitlines() if line.strip()]
            spans, missing = aligned(rows, texts)
            with open(args.folder / f"spans_{name}.jsonl", "w") as out:
                out.writelines(json.dumps(row) + "\n" for row in spans)
            print(f"reader {name}: {len(spans)} texts, {sum(len(r['spans']) for r in spans)} spans, "
                  f"{missing} quotes not found", file=sys.stderr)
    elif args.command == "agreement":
        agreement(args.folder)
    elif args.command == "disputes":
        for row in disputes(args.folder):
            print(json.dumps(row))
    else:
        merge(args.decisions, args.folder)


if __name__ == "__main__":
    main()

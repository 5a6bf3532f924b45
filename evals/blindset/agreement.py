"""Merge two blind readers' labels into a labeled set, with Cohen's kappa per behavior before adjudication.

    python evals/blindset/agreement.py --items evals/blindset/round2/items.jsonl \\
        --reader-a /tmp/blind2/labels_a.jsonl --reader-b /tmp/blind2/labels_b.jsonl \\
        [--adjudicated /tmp/blind2/adjudicated.jsonl] [--out evals/blindset/round2/labels.jsonl]

Without --adjudicated it prints the agreement table and writes the disputed items (ids and both readers' labels,
no text) to --disputes, for a third reader. With it (one line per disputed item: id, labels for the disputed
behaviors, note with the rule that decided), it writes --out in round 1's labels.jsonl format: each items.jsonl line
plus `labels`, `readers` {a, b}, `adjudicated` (the disputed behaviors) and, on a disputed item, `note`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from evals.devset.resolve import BEHAVIORS


def read_jsonl(path: str | Path) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]


def cohen_kappa(a: list[int], b: list[int]) -> float:
    """Cohen's kappa of two 0/1 label lists (1.0 when both readers give one constant label)."""
    n = len(a)
    observed = sum(x == y for x, y in zip(a, b, strict=True)) / n
    pa, pb = sum(a) / n, sum(b) / n
    expected = pa * pb + (1 - pa) * (1 - pb)
    return 1.0 if expected == 1 else (observed - expected) / (1 - expected)


def by_id(rows: list[dict], ids: list[str], who: str) -> dict[str, dict]:
    table = {row["id"]: row for row in rows}
    missing, extra = set(ids) - set(table), set(table) - set(ids)
    if missing or extra or len(table) != len(rows):
        sys.exit(f"{who}: {len(missing)} items missing, {len(extra)} unknown ids, {len(rows) - len(table)} repeated")
    for row in rows:
        if set(row["labels"]) != set(BEHAVIORS) or not all(v in (0, 1) for v in row["labels"].values()):
            sys.exit(f"{who}: {row['id']} does not label each of {BEHAVIORS} with 0 or 1")
    return table


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--items", required=True)
    ap.add_argument("--reader-a", required=True)
    ap.add_argument("--reader-b", required=True)
    ap.add_argument("--adjudicated")
    ap.add_argument("--disputes", default="/tmp/blind2/disputes.jsonl")
    ap.add_argument("--out")
    args = ap.parse_args(argv)

    items = read_jsonl(args.items)
    ids = [it["id"] for it in items]
    a = by_id(read_jsonl(args.reader_a), ids, "reader a")
    b = by_id(read_jsonl(args.reader_b), ids, "reader b")

    print(f"| behavior | kappa | raw agreement | positives a / b | ({len(ids)} items) |\n|---|---|---|---|---|")
    for behavior in BEHAVIORS:
        la, lb = [a[i]["labels"][behavior] for i in ids], [b[i]["labels"][behavior] for i in ids]
        raw = sum(x == y for x, y in zip(la, lb, strict=True)) / len(ids)
        print(f"| {behavior} | {cohen_kappa(la, lb):.3f} | {raw:.3f} | {sum(la)} / {sum(lb)} | |")

    disputed = {i: [bh for bh in BEHAVIORS if a[i]["labels"][bh] != b[i]["labels"][bh]] for i in ids}
    disputed = {i: bhs for i, bhs in disputed.items() if bhs}
    print(f"\n{len(disputed)} items with a disputed behavior ({sum(map(len, disputed.values()))} labels)")
    if not args.adjudicated:
        Path(args.disputes).write_text(
            "".join(
                json.dumps(
                    {
                        "id": i,
                        "disputed": bhs,
                        "a": a[i]["labels"],
                        "b": b[i]["labels"],
                        "note_a": a[i].get("note", ""),
                        "note_b": b[i].get("note", ""),
                    },
                    ensure_ascii=False,
                )
                + "\n"
                for i, bhs in disputed.items()
            ),
            encoding="utf-8",
        )
        print(f"disputes written to {args.disputes}")
        return

    decided = {row["id"]: row for row in read_jsonl(args.adjudicated)}
    if set(decided) != set(disputed):
        sys.exit(f"--adjudicated must decide exactly the {len(disputed)} disputed items")
    out = []
    for item in items:
        i = item["id"]
        labels = dict(a[i]["labels"])
        for behavior in disputed.get(i, []):
            labels[behavior] = int(decided[i]["labels"][behavior])
        out.append(
            {
                **item,
                "labels": labels,
                "readers": {"a": a[i]["labels"], "b": b[i]["labels"]},
                "adjudicated": disputed.get(i, []),
                **({"note": decided[i]["note"]} if i in decided else {}),
            }
        )
    Path(args.out).write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in out), encoding="utf-8")
    print(f"{len(out)} labeled items written to {args.out}")


if __name__ == "__main__":
    main()

"""A corpus of mixed real genres from ../shared/data, written to a jsonl in the test's (or bench's) temporary folder.

The skew is the one that breaks naive length matching on real text: long chain-of-thought traces (Sky-T1, full of
"Wait") are behavior-rich, short forum answers and textbook solutions (Stack Exchange, GSM8K, MATH, PRM800K, AQuA)
mostly are not. Stack Exchange questions are problems without a solution (negatives for --require-solution).
Nothing here is copied into the repository: the texts are read from the shared data at run time.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq

GENRES = ("trace", "stackexchange", "se_question", "gsm8k", "math500", "prm800k", "aqua")


def _records(data: Path, per_source: int | None):
    def head(items):
        for i, item in enumerate(items):
            if per_source is not None and i >= per_source:
                return
            yield item

    for source in sorted((data / "longcot_skythought").glob("*.jsonl")):
        for i, line in head(enumerate(source.read_text().splitlines())):
            yield {"id": f"{source.stem}/{i}", "text": json.loads(line)["code"][0], "domain": "trace"}
    threads = [json.loads(line) for source in sorted((data / "stackexchange_math").glob("*.jsonl"))
               for line in source.read_text().splitlines()]
    answers = ((a, t) for t in threads for a in t["answers"] if a.get("body_text"))
    for answer, _ in head(answers):
        yield {"id": f"se/{answer['id']}", "text": answer["body_text"], "domain": "stackexchange"}
    for thread in head(t for t in threads if t["question"].get("body_text")):
        question = thread["question"]
        yield {"id": f"se-q/{question['id']}", "text": f"{question['title']}\n\n{question['body_text']}",
               "domain": "se_question"}
    for i, line in head(enumerate((data / "gsm8k" / "train.jsonl").read_text().splitlines())):
        row = json.loads(line)
        yield {"id": f"gsm8k/{i}", "text": f"{row['question']}\n\n{row['answer']}", "domain": "gsm8k"}
    for line in head((data / "math500" / "test.jsonl").read_text().splitlines()):
        row = json.loads(line)
        yield {"id": f"math500/{row['unique_id']}", "text": f"Problem: {row['problem']}\n\nSolution: {row['solution']}",
               "domain": "math500"}
    for name in ("phase1_test", "phase1_train_plus"):
        path = data / "prm800k" / f"{name}.stepwise-critic.parquet"
        table = pq.read_table(path, columns=["instruction", "responses", "next_response", "is_solution",
                                             "is_preferred_response"])
        seen = set()
        chains = ((r["instruction"], [*r["responses"], r["next_response"]]) for r in table.to_pylist()
                  if r["is_solution"] and r["is_preferred_response"])
        for problem, steps in head(chains):
            if problem in seen:
                continue
            seen.add(problem)
            yield {"id": f"prm800k/{name}/{len(seen)}", "text": problem + "\n\n" + "\n".join(steps), "domain": "prm800k"}
    for split in ("dev", "test"):
        for i, line in head(enumerate((data / "aqua" / f"{split}.json").read_text().splitlines())):
            row = json.loads(line)
            yield {"id": f"aqua/{split}/{i}", "text": f"{row['question']}\nOptions: {' '.join(row['options'])}\n\n"
                                                   f"{row['rationale']}", "domain": "aqua"}


def write_real_mix(data: Path, path: Path, per_source: int | None = None, max_bytes: int | None = None) -> dict:
    """Writes {id, text, domain} lines; `per_source` caps each file or genre, `max_bytes` the text written per genre
    (a shared cap keeps every genre in the mix). Returns {genre: [documents, text bytes]}."""
    counts: dict[str, list[int]] = {}
    with path.open("w") as f:
        for record in _records(Path(data), per_source):
            if not record["text"] or not record["text"].strip():
                continue
            size = len(record["text"].encode())
            done = counts.setdefault(record["domain"], [0, 0])
            if max_bytes is not None and done[1] + size > max_bytes:
                continue
            done[0] += 1
            done[1] += size
            f.write(json.dumps(record, ensure_ascii=False) + "\n")
    return counts
